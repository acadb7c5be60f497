"""DECTRIS ARINA / ELA / SELUN series as the SIMPLON FileWriter writes them (NeXus NXmx HDF5).

A series is a master file ``<base>_master.h5`` whose ``/entry/data/data_NNNNNN`` are external
links to the data files ``<base>_data_NNNNNN.h5``; each holds ``/entry/data/data`` of shape
``(frames, y, x)``, chunked by whole frames and usually compressed with bitshuffle + LZ4
(HDF5 filter 32008) or LZ4 (32004). Opening reads the master and the data files' headers;
tasks decompress the chunks themselves (:mod:`ltdask.io.formats.dectris.chunks`).

The master holds no scan shape. ARINA software writes ``<base>.h5`` with a ``STEM Metadata``
group (``NumPixelsX``, ``NumPixelsY``, ``Pixel Size`` in nm): where it is there and fits the
frames, it gives the nav shape and calibration; otherwise pass ``nav_shape=``, or the frames
form a 1-D scan.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
from collections.abc import Sequence

import numpy as np

from ltdask._types import PathLike
from ltdask.exceptions import DataSetError, MetadataWarning, PerformanceWarning, warn
from ltdask.io.calibration import takes_calibration
from ltdask.io.checks import check_dtype, check_file, check_shape, signature_of
from ltdask.io.chunked import ChunkedArrayDataSet
from ltdask.io.formats.dectris.chunks import DATA_KEY, ChunkReader, DataFile, codec_of
from ltdask.io.formats.hdf5.dataset import check_filters, import_h5py, is_hdf5, open_h5

DETECTOR = "/entry/instrument/detector"
#: detector fields copied into ``metadata`` (name in the file -> name in the dict)
DETECTOR_FIELDS = {
    "description": "detector",
    "detector_number": "serial number",
    "sensor_material": "sensor material",
    "sensor_thickness": "sensor thickness (m)",
    "x_pixel_size": "pixel size x (m)",
    "y_pixel_size": "pixel size y (m)",
    "bit_depth_image": "bit depth (image)",
    "bit_depth_readout": "counter depth (readout)",
    "count_time": "count time (s)",
    "frame_time": "frame time (s)",
    "threshold_energy": "threshold energy (eV)",
    "beam_center_x": "beam center x (px)",
    "beam_center_y": "beam center y (px)",
    "detector_distance": "detector distance (m)",
    "saturation_value": "saturation value",
    "detectorSpecific/compression": "compression",
    "detectorSpecific/nimages": "nimages",
    "detectorSpecific/ntrigger": "ntrigger",
    "detectorSpecific/trigger_mode": "trigger mode",
    "detectorSpecific/software_version": "software version",
    "detectorSpecific/data_collection_date": "collection date",
}
STEM_FIELDS = {
    "NumPixelsX": "scan width",
    "NumPixelsY": "scan height",
    "Pixel Size": "scan pixel size (nm)",
    "ScanDwellTime": "dwell time",
    "Camera Length": "camera length",
    "High Tension": "high tension",
}
_DATA_NAME = re.compile(r"^data_\d{6}$")
_SERIES_NAME = re.compile(r"^(.*)_(master|data_\d{6})\.h5$", re.IGNORECASE)


def master_for(path: str) -> str:
    """The master file of the series `path` belongs to (`path` itself if it is none of a
    series' data files, or the master is not next to it)."""
    folder, name = os.path.split(path)
    match = _SERIES_NAME.match(name)
    if match and match.group(2).lower() != "master":
        master = os.path.join(folder, match.group(1) + "_master.h5")
        if os.path.isfile(master):
            return master
    return path


def claims_series(path) -> bool:
    """Whether `path` names a DECTRIS series file (``*_master.h5``, or a ``*_data_NNNNNN.h5``
    next to its master) that is HDF5; never raises."""
    try:
        if not isinstance(path, (str, os.PathLike)):
            return False
        name = os.path.basename(os.fspath(path))
        match = _SERIES_NAME.match(name)
        if not match:
            return False
        master = master_for(os.fspath(path))
        return master.lower().endswith("_master.h5") and is_hdf5(master)
    except (OSError, TypeError, ValueError):
        return False


def _value(node):
    value = node[()] if hasattr(node, "shape") else node
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray):
        return value.item() if value.size == 1 else None
    if isinstance(value, np.generic):
        return value.item()
    return value


def _detector_metadata(f) -> dict:
    out: dict = {}
    group = f.get(DETECTOR)
    if group is None:
        return out
    for field, name in DETECTOR_FIELDS.items():
        with contextlib.suppress(Exception):  # optional fields, of any shape or type
            node = group.get(field)
            if node is not None and node.size <= 1:
                value = _value(node)
                if value is not None:
                    out[name] = value
    return out


def _stem_metadata(master: str) -> dict:
    """``STEM Metadata`` of ARINA's ``<base>.h5`` next to the master, if there is one."""
    h5py = import_h5py()
    base = re.sub(r"_master\.h5$", ".h5", master, flags=re.IGNORECASE)
    if base == master or not os.path.isfile(base):
        return {}
    try:
        with h5py.File(base, "r") as f:
            group = f.get("STEM Metadata")
            attrs = dict(group.attrs) if group is not None else {}
    except OSError:
        return {}
    out = {}
    for field, name in STEM_FIELDS.items():
        if field in attrs:
            value = _value(attrs[field])
            if value is not None:
                out[name] = value
    return out


def _warn_unused_scan(master: str, stem: dict, ny, nx, held: int, sync_offset: int, used):
    """``STEM Metadata`` gives a scan shape that is not used: say which and why."""
    base = re.sub(r"_master\.h5$", ".h5", master, flags=re.IGNORECASE)
    given = f"NumPixelsY={stem.get('scan height')!r}, NumPixelsX={stem.get('scan width')!r}"
    given += f" in 'STEM Metadata' of {base!r}"
    if ny and nx:
        after = f" ({held - sync_offset} from sync_offset={sync_offset})" if sync_offset else ""
        why = f"a {ny} x {nx} scan needs {ny * nx} frames, the data files hold {held}{after}"
    else:
        why = "that is not a scan shape (two positive integers)"
    warn(
        f"{given}: {why}; read as a 1-D scan, nav_shape={used}; pass nav_shape= to choose "
        "the scan shape",
        MetadataWarning,
    )


def _data_links(f, master: str) -> list[tuple[str, str, str]]:
    """``(name, file, dataset)`` of each data link in the master, in order."""
    h5py = import_h5py()
    group = f.get("/entry/data")
    if not isinstance(group, h5py.Group):
        raise DataSetError(
            f"{master!r} is not a DECTRIS master file: it has no group /entry/data; "
            "open_hdf5 reads other HDF5 files"
        )
    names = sorted(k for k in group if _DATA_NAME.match(k))
    folder = os.path.dirname(master)
    links = []
    for name in names:
        link = group.get(name, getlink=True)
        if isinstance(link, h5py.ExternalLink):
            links.append((name, os.path.join(folder, link.filename), link.path))
        else:
            links.append((name, master, f"/entry/data/{name}"))
    if not links and isinstance(group.get("data", getlink=True), h5py.HardLink):
        links.append(("data", master, DATA_KEY))  # nimages_per_file = 0: data in the master
    if not links:
        raise DataSetError(
            f"{master!r}: /entry/data holds no data_NNNNNN links and no data; "
            "is this the master file of a series?"
        )
    return links


def _data_file(name: str, path: str, key: str, master: str, first: int, h5py):
    """The `DataFile` of one link, and its frame shape and dtype (headers only)."""
    if not os.path.isfile(path):
        what = "is not a regular file" if os.path.exists(path) else "does not exist"
        raise DataSetError(
            f"{master!r}: {name} links to {path!r}, which {what}; copy the whole series"
        )
    signature = signature_of(os.stat(path))
    if not is_hdf5(path):
        raise DataSetError(f"{master!r}: {name} links to {path!r}, which is not an HDF5 file")
    try:
        with h5py.File(path, "r") as f:
            dset = f.get(key)
            if not isinstance(dset, h5py.Dataset) or dset.ndim != 3:
                what = "no dataset" if dset is None else f"{getattr(dset, 'shape', 'a group')}"
                raise DataSetError(
                    f"{path!r} ({name} of {master!r}): {key} is {what}; expected a dataset of "
                    "shape (frames, y, x)"
                )
            check_filters(dset, path, key)
            count, *frame = (int(s) for s in dset.shape)
            chunk_frames = int(dset.chunks[0]) if dset.chunks else max(count, 1)
            low = dset.attrs.get("image_nr_low")
            if low is not None and count and int(np.ravel(low)[0]) != first + 1:
                raise DataSetError(
                    f"{path!r} ({name} of {master!r}): image_nr_low is {int(np.ravel(low)[0])}, "
                    f"but the files before it hold {first} frames; a data file is missing or "
                    "out of order"
                )
            entry = DataFile(path, key, first, count, chunk_frames, signature)
            return entry, tuple(frame), dset.dtype, codec_of(dset)
    except OSError as e:
        raise DataSetError(f"cannot read {path!r} ({name} of {master!r}) as HDF5: {e}") from None


def _positive_int(value) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
    return int(value) if ok else None


def _positive_float(value) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok and math.isfinite(value) and value > 0 else None


class DectrisDataSet(ChunkedArrayDataSet):
    """A DECTRIS series (see :func:`open_dectris`).

    Examples
    --------
    >>> import ltdask, tempfile, os
    >>> from ltdask.io import DectrisDataSet
    >>> issubclass(DectrisDataSet, ltdask.io.ChunkedArrayDataSet)
    True
    >>> path = os.path.join(tempfile.mkdtemp(), "scan_master.h5")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(b"not a scan")
    >>> try:
    ...     ltdask.open_dectris(path)
    ... except ltdask.DataSetError as e:
    ...     print(e)  # doctest: +ELLIPSIS
    '.../scan_master.h5' is not an HDF5 file (no HDF5 signature)
    >>> ds = ltdask.open_dectris("/data/scan_master.h5", nav_shape=(256, 256))  # doctest: +SKIP
    >>> ds.codec, len(ds.files), ds.metadata["pixel size x (m)"]  # doctest: +SKIP
    ('bslz4', 65, 7.5e-05)
    >>> mask = ds.read_pixel_mask()  # the detector's mask of bad pixels  # doctest: +SKIP
    """

    def __init__(self, path, files, frame_shape, dtype, codec, metadata, **kwargs):
        self.path = path
        self.files = tuple(files)
        self.codec = codec
        #: what the master says about the detector and the scan (printable values)
        self.metadata = metadata
        total = sum(f.count for f in files)
        chunk_frames = max(f.chunk_frames for f in files)
        super().__init__(
            (total, *frame_shape), dtype, 2, read_chunks=(chunk_frames, *frame_shape), **kwargs
        )

    def get_nav_alignment(self) -> tuple[int, ...] | None:
        """Partitions start on chunk boundaries where every file starts on one."""
        cf = self.read_chunks[0] if self.read_chunks else 1
        if self.sync_offset or any(f.first % cf for f in self.files):
            return None
        nav = self.nav_shape
        inner = 1
        for j in range(len(nav) - 1, -1, -1):
            if cf % (inner * nav[j]) == 0:
                inner *= nav[j]
                continue
            if (nav[j] * inner) % cf == 0 and cf % inner == 0:
                return (1,) * j + (cf // inner,) + tuple(nav[j + 1 :])
            return None
        return None

    def adjust_tileshape(self, tileshape, roi=None):
        cf = self.read_chunks[0] if self.read_chunks else 1
        depth = tileshape[0]
        if depth >= cf:
            depth = (depth // cf) * cf
        return (depth, *tileshape[1:])

    # decoded chunks are copied into the tiles: numpy converts as it copies
    reader_converts = True

    @contextlib.contextmanager
    def open_reader(self):
        reader = ChunkReader(self.files, self.sig_shape, self.dtype, self.codec)
        try:
            yield reader.read
        finally:
            reader.close()

    def read_pixel_mask(self) -> np.ndarray | None:
        """The detector's ``pixel_mask`` from the master (non-zero: a bad pixel), or None."""
        h5py = import_h5py()
        with h5py.File(self.path, "r") as f:
            node = f.get(f"{DETECTOR}/detectorSpecific/pixel_mask")
            if node is None or tuple(node.shape) != tuple(self.sig_shape):
                return None
            return np.asarray(node[()])

    def attrs(self) -> dict:
        return {**super().attrs(), "codec": self.codec, "data files": len(self.files)}

    def _token_fields(self) -> tuple:
        return (super()._token_fields(), self.path, self.files, self.codec)


@takes_calibration
def open_dectris(
    path: PathLike,
    nav_shape: Sequence[int] | None = None,
    sync_offset: int = 0,
    dims: Sequence[str] | None = None,
) -> DectrisDataSet:
    """Open a DECTRIS ARINA / ELA / SELUN series from its master file (or any data file of it).

    Only headers are read here: the master, each data file's dataset description, and
    ARINA's ``<base>.h5`` scan metadata if it is there.

    Parameters
    ----------
    path
        ``<base>_master.h5`` (or ``<base>_data_NNNNNN.h5`` next to it).
    nav_shape
        The scan's shape; by default ``STEM Metadata`` NumPixelsY × NumPixelsX of
        ``<base>.h5`` where it fits the frames, else the frames as a 1-D scan (with a
        `ltdask.MetadataWarning` naming the values, where they are there but unusable).
    sync_offset
        Positive: skip that many frames; negative: insert that many empty frames first.
    dims
        Names of the nav and sig dims.

    Raises
    ------
    FileNotFoundError
        `path` does not exist.
    ltdask.DataSetError
        Not a DECTRIS master file; a linked data file is missing, not HDF5, of another frame
        shape or dtype, or out of order; a compression filter is not available.

    Examples
    --------
    A series of one data file, 6 frames in chunks of 2, compressed with bitshuffle + LZ4:

    >>> import os, tempfile, h5py, hdf5plugin, numpy as np
    >>> folder = tempfile.mkdtemp()
    >>> frames = np.arange(6 * 4 * 5, dtype=np.uint16).reshape(6, 4, 5)
    >>> with h5py.File(os.path.join(folder, "s_data_000001.h5"), "w") as f:
    ...     bslz4 = hdf5plugin.Bitshuffle(cname="lz4")
    ...     _ = f.create_dataset("entry/data/data", data=frames, chunks=(2, 4, 5), **bslz4)
    >>> with h5py.File(os.path.join(folder, "s_master.h5"), "w") as f:
    ...     f["entry/data/data_000001"] = h5py.ExternalLink("s_data_000001.h5", "/entry/data/data")
    ...     f["entry/instrument/detector/x_pixel_size"] = 75e-6
    ...     f["entry/instrument/detector/y_pixel_size"] = 75e-6
    >>> ds = open_dectris(os.path.join(folder, "s_master.h5"), nav_shape=(2, 3))
    >>> ds.nav_shape, ds.codec, ds.sig_calibration[0].units
    ((2, 3), 'bslz4', 'um')
    >>> bool((ds.to_dask().compute().reshape(6, 4, 5) == frames).all())
    True
    """
    h5py = import_h5py()
    path = master_for(check_file(path))
    f = open_h5(path)
    with f:
        links = _data_links(f, path)
        metadata = _detector_metadata(f)
        entries, first = [], 0
        frame = dtype = codec = None
        for name, target, key in links:
            entry, shape, dt, how = _data_file(name, target, key, path, first, h5py)
            if frame is None:
                frame, dtype, codec = shape, dt, how
            elif (shape, dt) != (frame, dtype):
                raise DataSetError(
                    f"{target!r} ({name} of {path!r}) holds frames {shape} {dt}, the first "
                    f"data file {frame} {dtype}; the series is inconsistent"
                )
            codec = codec if how == codec else "h5py"
            if entry.count:
                entries.append(entry)
            first += entry.count
    assert frame is not None and codec is not None
    dtype = check_dtype(dtype, path)
    if not entries:
        raise DataSetError(f"{path!r}: the data files hold no frames")
    if codec == "h5py":
        warn(
            f"{path!r}: the chunks are read through h5py one at a time (another filter, or "
            "bitshuffle-Zstd: pip install bitshuffle for parallel decompression)",
            PerformanceWarning,
        )
    stem = _stem_metadata(path)
    metadata.update(stem)
    calibration: dict = {}
    if nav_shape is not None:
        nav_shape = check_shape(nav_shape, "nav_shape", path)
    else:
        ny, nx = _positive_int(stem.get("scan height")), _positive_int(stem.get("scan width"))
        frames = first - sync_offset
        if ny and nx and ny * nx <= frames:
            nav_shape = (ny, nx)
            step = _positive_float(stem.get("scan pixel size (nm)"))
            if step:
                calibration["nav"] = (step, "nm")
        else:
            nav_shape = (max(1, first - max(sync_offset, 0)),)
            if "scan height" in stem or "scan width" in stem:
                _warn_unused_scan(path, stem, ny, nx, first, sync_offset, nav_shape)
    sizes = [_positive_float(metadata.get(f"pixel size {a} (m)")) for a in "yx"]
    if all(sizes):
        calibration["sig"] = [(s * 1e6, "um") for s in sizes if s]
    metadata["data files"] = len(entries)
    ds = DectrisDataSet(
        path,
        entries,
        frame,
        dtype,
        codec,
        metadata,
        nav_shape=nav_shape,
        sync_offset=sync_offset,
        dims=dims,
    )
    if calibration:
        ds.calibrate(**calibration)
    return ds
