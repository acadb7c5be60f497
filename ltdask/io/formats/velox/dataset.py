"""Thermo Fisher Velox EMD files (HDF5): the camera stacks of 4D-STEM acquisitions.

A Velox file keeps each acquired image series in a group ``/Data/Image/<uuid>``: ``Data`` of
shape ``(y, x, frames)`` (frames last), and ``Metadata``, a ``(60000, frames)`` uint8 array
whose column ``k`` is frame ``k``'s JSON (NUL padded). ltdask reads the JSON of frame 0: the
detector name (``BinaryResult.Detector``), the pixel size, unit and offset
(``BinaryResult.PixelSize/PixelUnitX/PixelUnitY/Offset``, the signal calibration) and the
scan size (``Scan.ScanSize``, the nav shape where it fits the frames).

Velox writes one chunk per frame, ``(y, x, 1)``: such uncompressed chunks are frames at
their own offsets, read straight from the file like a raw file (a memory map, the shared
read path). Other layouts (contiguous frames-last storage, compression) are read through h5py.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
from collections.abc import Sequence

import numpy as np

from ltdask._types import PathLike
from ltdask.exceptions import DataSetError
from ltdask.io.calibration import takes_calibration
from ltdask.io.checks import (
    KeptByVersion,
    check_dtype,
    check_file,
    check_shape,
    signature_of,
    stat_regular_file,
)
from ltdask.io.fileset import File
from ltdask.io.formats.hdf5.dataset import HDF5DataSet, check_filters, import_h5py, is_hdf5, open_h5
from ltdask.io.formats.hdf5.mapped import MAX_RUNS, HDF5MappedDataSet

#: (unit in the file) -> (factor, unit ltdask reports)
UNITS = {"m": (1e9, "nm"), "1/m": (1e-9, "1/nm"), "rad": (1e3, "mrad")}
#: at most this many bytes of a frame's JSON are parsed
MAX_JSON = 1 << 20


def is_velox(path) -> bool:
    """Whether `path` is a Velox EMD file (an ``.emd`` HDF5 file with ``/Data`` and
    ``/Version``); never raises."""
    try:
        path = os.fspath(path)
        if not path.lower().endswith(".emd") or not is_hdf5(path):
            return False
        h5py = import_h5py()
        with h5py.File(path, "r") as f:
            return "Version" in f and "Data" in f
    except Exception:  # any failure means: not a Velox file we can read
        return False


def frame_json(group, path: str) -> dict:
    """The JSON of frame 0 of an image group (an empty dict if it has none)."""
    meta = group.get("Metadata")
    if meta is None or meta.ndim != 2 or meta.shape[1] < 1:
        return {}
    raw = np.asarray(meta[: min(meta.shape[0], MAX_JSON), 0], dtype=np.uint8).tobytes()
    raw = raw.split(b"\0", 1)[0]
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataSetError(
            f"{path!r}: the metadata of {group.name} is not valid JSON ({e}); the file is damaged"
        ) from None
    return value if isinstance(value, dict) else {}


def _get(tree, *keys):
    for key in keys:
        if not isinstance(tree, dict):
            return None
        tree = tree.get(key)
    return tree


def _number(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _int(value) -> int | None:
    number = _number(value)
    return int(number) if number is not None and number == int(number) else None


def candidates(f, path: str) -> list[dict]:
    """Each image series in the file: name (uuid), detector, HDF5 path, shape, JSON."""
    h5py = import_h5py()
    images = f.get("/Data/Image")
    found: list[dict] = []
    if not isinstance(images, h5py.Group):
        return found
    for name in sorted(images):
        group = images[name]
        data = group.get("Data") if isinstance(group, h5py.Group) else None
        if not isinstance(data, h5py.Dataset) or data.ndim != 3:
            continue
        meta = frame_json(group, path)
        detector = _get(meta, "BinaryResult", "Detector")
        found.append(
            dict(
                name=name,
                detector=str(detector) if detector is not None else "",
                key=data.name,
                shape=tuple(int(s) for s in data.shape),
                dtype=str(data.dtype),
                json=meta,
            )
        )
    return found


def _listing(found) -> str:
    if not found:
        return "the file holds no image series (/Data/Image/<uuid>/Data)"
    rows = [
        f"{c['name']!r} ({c['detector'] or 'no detector name'}, {c['shape'][2]} frames of "
        f"{c['shape'][:2]} {c['dtype']})"
        for c in found
    ]
    return "image series: " + ", ".join(rows)


def choose(found: list[dict], dataset: str | None, path: str) -> dict:
    """The series named `dataset` (uuid, detector name or HDF5 path), or the one stack."""
    if dataset is None:
        stacks = [c for c in found if c["shape"][2] > 1]
        if len(stacks) == 1:
            return stacks[0]
        if not stacks and len(found) == 1:
            return found[0]
        what = "several image series could be the scan" if stacks else "no frame stack"
        raise DataSetError(f"{path!r}: {what}; pass dataset=... naming one ({_listing(found)})")
    matches = [c for c in found if dataset in (c["name"], c["detector"], c["key"])]
    if len(matches) == 1:
        return matches[0]
    what = "names several series" if matches else "names no series"
    raise DataSetError(f"{path!r}: dataset={dataset!r} {what}; {_listing(found)}")


def _axis(size, unit, offset):
    scale = _number(size)
    if scale is None or scale == 0:
        return None
    factor, units = UNITS.get(str(unit or ""), (1.0, str(unit or "")))
    return (scale * factor, (_number(offset) or 0.0) * factor, units)


def calibration(meta: dict) -> list | None:
    """The signal calibration ``[(scale, origin, units) y, x]`` of a frame's JSON, or None."""
    result = meta.get("BinaryResult") if isinstance(meta, dict) else None
    if not isinstance(result, dict):
        return None
    size, offset = result.get("PixelSize") or {}, result.get("Offset") or {}
    if not isinstance(size, dict) or not isinstance(offset, dict):
        return None
    y = _axis(size.get("height"), result.get("PixelUnitY"), offset.get("y"))
    x = _axis(size.get("width"), result.get("PixelUnitX"), offset.get("x"))
    return [y, x] if y is not None and x is not None else None


def metadata_of(meta: dict, version) -> dict:
    fields = {
        "detector": ("BinaryResult", "Detector"),
        "pixel size": ("BinaryResult", "PixelSize"),
        "pixel unit": ("BinaryResult", "PixelUnitX"),
        "bits per pixel": ("BinaryResult", "BitsPerPixel"),
        "dwell time (s)": ("Scan", "DwellTime"),
        "frame time (s)": ("Scan", "FrameTime"),
        "scan size": ("Scan", "ScanSize"),
        "scan rotation (rad)": ("Scan", "ScanRotation"),
        "high tension (V)": ("Optics", "AccelerationVoltage"),
        "microscope": ("Instrument", "InstrumentModel"),
        "acquired (unix s)": ("Acquisition", "AcquisitionStartDatetime", "DateTime"),
    }
    out = {"velox version": version} if version is not None else {}
    for name, keys in fields.items():
        value = _get(meta, *keys)
        if value is not None and not isinstance(value, list):
            out[name] = value
    return out


def _version(f):
    with contextlib.suppress(Exception):  # Version is informative only
        raw = f["Version"][()]
        raw = raw.flat[0] if isinstance(raw, np.ndarray) else raw
        raw = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
        return json.loads(raw).get("version")
    return None


#: what opening a Velox file read from it (`_read_layout`), by (path, ``dataset=``,
#: version of the file): opening the same file again reads no HDF5 at all (HDF5's walk over
#: every chunk took 4 ms for 16 384 frames, and the two opens, the series' JSON and the
#: version 1 ms more: 5 % and then 1.5 % of a 2 GiB SumUDF run)
_OPENED = KeptByVersion()


def _chunk_offsets(dset, n: int) -> np.ndarray:
    """The byte offset of each frame's chunk (-1: none)."""
    offsets = np.full(n, -1, dtype=np.int64)

    def visit(info):
        k = info.chunk_offset[2]
        if info.byte_offset is not None and 0 <= k < n:
            offsets[k] = info.byte_offset

    dset.id.chunk_iter(visit)
    return offsets


def frame_runs(dset, path: str, signature) -> list[File] | None:
    """Frames stored as uncompressed ``(y, x, 1)`` chunks: runs of frames back to back in
    the file (of version `signature`), in frame order; None where the layout does not allow
    straight reads."""
    h5py = import_h5py()
    ny, nx, n = dset.shape
    plist = dset.id.get_create_plist()
    if plist.get_nfilters() or dset.external is not None or dset.is_virtual or n == 0:
        return None
    if plist.get_layout() != h5py.h5d.CHUNKED or tuple(dset.chunks) != (ny, nx, 1):
        return None
    if dset.id.get_num_chunks() != n:
        return None  # unwritten frames read as the fill value
    frame_bytes = ny * nx * dset.dtype.itemsize
    size = os.path.getsize(path)
    offsets = _chunk_offsets(dset, n)
    if (offsets < 0).any():
        return None
    if int(offsets.max()) + frame_bytes > size:
        raise DataSetError(
            f"{path!r}: a frame of {dset.name} lies beyond the end of the file ({size} bytes); "
            "the file is truncated"
        )
    breaks = np.flatnonzero(np.diff(offsets) != frame_bytes) + 1
    starts = [0, *breaks.tolist()]
    if len(starts) > MAX_RUNS:
        return None
    ends = [*starts[1:], n]
    return [
        File(path, a, b - a, int(offsets[a]), signature) for a, b in zip(starts, ends, strict=True)
    ]


class VeloxDataSet(HDF5MappedDataSet):
    """A Velox camera stack whose frames are read straight from the file (see :func:`open_emd`).

    Examples
    --------
    >>> import ltdask, tempfile, os
    >>> from ltdask.io import VeloxDataSet
    >>> issubclass(VeloxDataSet, ltdask.io.HDF5MappedDataSet)
    True
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.emd")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(b"not a scan")
    >>> try:
    ...     ltdask.open_emd(path)
    ... except ltdask.DataSetError as e:
    ...     print(e)  # doctest: +ELLIPSIS
    '.../scan.emd' is not an HDF5 file (no HDF5 signature)
    >>> ds = ltdask.open_emd("/data/scan.emd")  # doctest: +SKIP
    >>> ds.layout, ds.metadata["detector"], ds.sig_calibration[0].units  # doctest: +SKIP
    ('chunked', 'Ceta', '1/m')
    """

    metadata: dict = {}

    def attrs(self) -> dict:
        return {**super().attrs(), "detector": str(self.metadata.get("detector", ""))}


class VeloxH5DataSet(HDF5DataSet):
    """A Velox camera stack read through h5py (frames last in the file): what `open_emd`
    gives where the frames cannot be read straight from the file (compressed chunks).

    Examples
    --------
    >>> import h5py, ltdask, tempfile, os
    >>> from ltdask.io import VeloxH5DataSet
    >>> issubclass(VeloxH5DataSet, ltdask.io.HDF5DataSet)
    True
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.emd")
    >>> with h5py.File(path, "w") as f:  # HDF5, but not from Velox
    ...     f["data"] = [1, 2, 3]
    >>> try:
    ...     ltdask.open_emd(path)
    ... except ltdask.DataSetError as e:
    ...     print(e)  # doctest: +ELLIPSIS
    '.../scan.emd' is not a Velox EMD file: it has no /Data group
    >>> ds = ltdask.open_emd("/data/compressed.emd")  # doctest: +SKIP
    >>> type(ds).__name__, ds.layout, ds.metadata["detector"]  # doctest: +SKIP
    ('VeloxH5DataSet', 'chunked', 'Ceta')
    """

    metadata: dict = {}

    @contextlib.contextmanager
    def open_reader(self):
        h5py = import_h5py()
        self.check_unchanged()
        try:
            f = h5py.File(self.path, "r", rdcc_nbytes=self.cache_bytes)
        except OSError as e:
            raise DataSetError(f"cannot read {self.path!r} as HDF5: {e}") from None
        with f:
            self._check_opened(f)
            dset = f[self.key]

            def read(index, out):
                frames, sy, sx = index
                try:
                    out[...] = np.moveaxis(dset[sy, sx, frames], 2, 0)
                except OSError as e:  # a damaged chunk, a failing filter
                    raise DataSetError(f"cannot read {self.path!r} {self.key}: {e}") from e

            yield read


@takes_calibration
def open_emd(
    path: PathLike,
    dataset: str | None = None,
    nav_shape: Sequence[int] | None = None,
    sync_offset: int = 0,
    dims: Sequence[str] | None = None,
) -> VeloxDataSet | VeloxH5DataSet:
    """Open the 4D-STEM camera stack of a Thermo Fisher Velox ``.emd`` file.

    Parameters
    ----------
    path
        The ``.emd`` file.
    dataset
        Which image series: its uuid (the group name under ``/Data/Image``), its detector
        name, or its HDF5 path. By default the one series of more than one frame; an error
        lists them where there are several.
    nav_shape
        The scan's shape; by default ``Scan.ScanSize`` (height, width) where it fits the
        frames, else the frames as a 1-D scan.
    sync_offset
        Positive: skip that many frames; negative: insert that many empty frames first.
    dims
        Names of the nav and sig dims.

    Raises
    ------
    FileNotFoundError
        `path` does not exist.
    ltdask.DataSetError
        Not a Velox file, no such series (the message lists them), damaged metadata.

    Examples
    --------
    A file with one stack of 6 frames (stored frames last) from a 2 x 3 scan:

    >>> import json, os, tempfile, h5py, numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.emd")
    >>> frames = np.arange(6 * 4 * 5, dtype=np.uint16).reshape(6, 4, 5)
    >>> size = {"width": "1e8", "height": "1e8"}
    >>> meta = {"BinaryResult": {"Detector": "Ceta", "PixelSize": size, "PixelUnitX": "1/m",
    ...                          "PixelUnitY": "1/m", "Offset": {"x": "0", "y": "0"}},
    ...         "Scan": {"ScanSize": {"width": "3", "height": "2"}}}
    >>> text = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    >>> with h5py.File(path, "w") as f:
    ...     f["Version"] = json.dumps({"version": "11", "format": "Velox"})
    ...     group = f.create_group("Data/Image/0a1b")
    ...     _ = group.create_dataset("Data", data=frames.transpose(1, 2, 0), chunks=(4, 5, 1))
    ...     group["Metadata"] = np.pad(text, (0, 100))[:, None].repeat(6, axis=1)
    >>> ds = open_emd(path)
    >>> ds.nav_shape, ds.metadata["detector"], ds.sig_calibration[0].units
    ((2, 3), 'Ceta', '1/nm')
    >>> bool((ds.to_dask().compute().reshape(6, 4, 5) == frames).all())
    True
    """
    path = check_file(path)
    signature = signature_of(stat_regular_file(path))
    meta, key, (ny, nx, n), dtype, files, chunks, version = _OPENED.get(
        (path, dataset, signature), lambda: _read_layout(path, dataset, signature)
    )
    if nav_shape is not None:
        nav_shape = check_shape(nav_shape, "nav_shape", path)
    else:
        height = _int(_get(meta, "Scan", "ScanSize", "height"))
        width = _int(_get(meta, "Scan", "ScanSize", "width"))
        if height is not None and width is not None and 0 < height and 0 < width:
            nav_shape = (height, width) if height * width == n else (n,)
        else:
            nav_shape = (n,)
    common = dict(nav_shape=nav_shape, sync_offset=sync_offset, dims=dims)
    shape = (n, ny, nx)
    ds: VeloxDataSet | VeloxH5DataSet
    if files is not None:  # (kept Files: frozen, so shared; the list is the dataset's own)
        ds = VeloxDataSet(path, key, list(files), shape, dtype, 2, "chunked", chunks, **common)
    else:
        read_chunks = None if chunks is None else (chunks[2], chunks[0], chunks[1])
        kind = "chunked" if chunks else "contiguous"
        ds = VeloxH5DataSet(
            path, key, shape, dtype, 2, read_chunks, kind, **common, signature=signature
        )
    ds.metadata = copy.deepcopy(metadata_of(meta, version))  # (`meta` is kept: not shared)
    sig = calibration(meta)
    if sig is not None:
        ds.calibrate(sig=sig)
    return ds


def _read_layout(path: str, dataset: str | None, signature) -> tuple:
    """What `open_emd` reads from the file (of version `signature`): the chosen series'
    JSON, HDF5 path, shape ``(y, x, frames)``, dtype, runs of frames (`frame_runs`), chunk
    shape and the file's Velox version."""
    with open_h5(path) as f:
        if "Data" not in f:
            raise DataSetError(f"{path!r} is not a Velox EMD file: it has no /Data group")
        chosen = choose(candidates(f, path), dataset, path)
        dset = f[chosen["key"]]
        key = dset.name
        dtype = check_dtype(dset.dtype, f"{path!r}: {key}")
        check_filters(dset, path, key)
        files = frame_runs(dset, path, signature)
        chunks = None if dset.chunks is None else tuple(int(c) for c in dset.chunks)
        return chosen["json"], key, chosen["shape"], dtype, files, chunks, _version(f)
