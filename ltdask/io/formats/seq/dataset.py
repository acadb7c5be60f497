"""Direct Electron StreamPix ``.seq`` acquisitions (DE-16, DE-64 ... cameras).

The frames are plain little-endian pixels in slots of ``true_image_size`` bytes after the
header (:mod:`ltdask.io.formats.seq.headers`): a `FileSet` with a file header and a frame
footer, read as views of the file where nothing needs converting. Dark and gain references
stored next to the ``.seq`` are the dataset's default corrections.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Sequence

import numpy as np

from ltdask._types import PathLike
from ltdask.exceptions import DataSetError, MetadataWarning, warn
from ltdask.io.calibration import takes_calibration
from ltdask.io.checks import check_file, check_shape
from ltdask.io.decode import Decoder
from ltdask.io.file_dataset import FileDataSet
from ltdask.io.fileset import File, FileSet
from ltdask.io.formats.seq.headers import (
    METADATA_FIELDS,
    read_bad_pixels,
    read_metadata,
    read_mrc_reference,
    read_seq_header,
)


def seq_basename(path: str) -> str:
    """``NAME`` of ``NAME.seq`` (also of the ``NAME.seq.seq`` some software writes): the
    side files are ``NAME.seq.dark.mrc``, ``NAME.seq.gain.mrc``, ``NAME.seq.metadata``."""
    name, ext = os.path.splitext(path)
    if ext.lower() != ".seq":
        return path
    inner, ext2 = os.path.splitext(name)
    return inner if ext2.lower() == ".seq" else name


class SeqDataSet(FileDataSet):
    """A DE StreamPix acquisition (see :func:`open_seq`).

    Examples
    --------
    >>> import ltdask, tempfile, os
    >>> from ltdask.io import SeqDataSet
    >>> issubclass(SeqDataSet, ltdask.io.FileDataSet)
    True
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.seq")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(b"not a scan")
    >>> try:
    ...     ltdask.open_seq(path)
    ... except ltdask.DataSetError as e:
    ...     print(e)  # doctest: +ELLIPSIS
    '.../scan.seq': 10 bytes, shorter than a StreamPix .seq header (1024 bytes); the file ...
    >>> ds = ltdask.open_seq("/data/scan.seq", nav_shape=(128, 128))  # doctest: +SKIP
    >>> ds.header.bit_depth_real, sorted(ds.references)  # doctest: +SKIP
    (12, ['dark', 'gain'])
    """

    def __init__(
        self,
        path,
        nav_shape,
        sig_shape=None,
        sync_offset=0,
        dims=None,
        dark=True,
        gain=True,
        excluded_pixels=True,
    ):
        path = self.path = check_file(path)
        header = self.header = read_seq_header(path)
        if nav_shape is None:
            raise DataSetError(
                f"{path!r}: a .seq file does not store the scan shape; pass nav_shape=(ny, nx)"
            )
        natural = (header.height, header.width)
        sig = natural if sig_shape is None else check_shape(sig_shape, "sig_shape", path)
        if math.prod(sig) != header.width * header.height:
            raise DataSetError(
                f"{path}: sig_shape={sig} does not fit the frames; expected "
                f"{header.width * header.height} pixels, like {natural}"
            )
        size = os.path.getsize(path)
        offset = header.image_offset
        if size < offset + header.frame_bytes:
            raise DataSetError(
                f"{path!r} is truncated: {size} bytes, not even one frame of "
                f"{header.frame_bytes} bytes after the {offset}-byte header"
            )
        count = (size - offset) // header.true_image_size
        if (size - offset) % header.true_image_size >= header.frame_bytes:
            count += 1  # the last slot's pixels are complete, its timestamp is cut off
        base = seq_basename(path)
        self.side_files = {
            kind: base + suffix
            for kind, suffix in (
                ("dark", ".seq.dark.mrc"),
                ("gain", ".seq.gain.mrc"),
                ("metadata", ".seq.metadata"),
                ("config", ".seq.Config.Metadata.xml"),
            )
            if os.path.isfile(base + suffix)
        }
        # the references are read when a run asks for them (not pickled into tasks)
        self.references = {
            kind: self.side_files[kind]
            for kind, wanted in (("dark", dark), ("gain", gain))
            if wanted and kind in self.side_files
        }
        for ref in self.references.values():
            read_mrc_reference(ref, natural, data=False)
        de_meta = (
            read_metadata(self.side_files["metadata"]) if "metadata" in self.side_files else {}
        )
        # the maps are of the whole sensor: the .metadata says where the frame is on it
        self.bad_pixels = None
        if excluded_pixels and "config" in self.side_files and len(de_meta) == len(METADATA_FIELDS):
            xml = self.side_files["config"]
            # read now for its warnings, again (cached) when a run asks for the corrections
            mask = read_bad_pixels(xml, de_meta, natural)
            if mask is not None and mask.any():
                self.bad_pixels = (xml, _frozen(de_meta))
                _warn_unrepairable(xml, mask)
        self.metadata = {
            "detector": "Direct Electron (StreamPix .seq)",
            "name": header.name,
            "description": header.description,
            "seq version": header.version,
            "bit depth": header.bit_depth_real or header.bit_depth,
            "frame rate (Hz)": header.frame_rate,
            "allocated frames": header.allocated_frames,
            "dark reference": self.side_files.get("dark"),
            "gain reference": self.side_files.get("gain"),
            "bad-pixel map": self.bad_pixels[0] if self.bad_pixels else None,
            **de_meta,
        }
        footer = header.true_image_size - header.frame_bytes
        files = [File(path, 0, count, offset)]
        fileset = FileSet(files, sig, header.dtype, 0, footer)
        super().__init__(
            fileset, Decoder(header.dtype), nav_shape, sync_offset=sync_offset, dims=dims
        )

    def default_corrections(self):
        """The dark and gain references next to the ``.seq`` file and the excluded pixels of
        its bad-pixel map, if any."""
        if not self.references and self.bad_pixels is None:
            return None
        from ltdask.corrections import CorrectionSet

        natural = (self.header.height, self.header.width)
        images = {
            kind: _reference(path, natural, _stamp(path)).reshape(self.sig_shape)
            for kind, path in self.references.items()
        }
        excluded = None
        if self.bad_pixels is not None:
            xml, de_meta = self.bad_pixels
            mask = _bad_pixels(xml, de_meta, natural, _stamp(xml))
            excluded = None if mask is None else mask.reshape(self.sig_shape)
        # pixels inside wide defect bands have no neighbour to be repaired from: left as
        # they are (warned at open) rather than failing every run
        return CorrectionSet(
            dark=images.get("dark"),
            gain=images.get("gain"),
            excluded_pixels=excluded,
            allow_empty=True,
        )

    def attrs(self) -> dict:
        return {**super().attrs(), **{f"seq_{k}": v for k, v in self.side_files.items()}}


def _stamp(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


@functools.lru_cache(maxsize=8)
def _reference(path: str, shape: tuple[int, int], stamp) -> np.ndarray:
    image = read_mrc_reference(path, shape)
    image.setflags(write=False)
    return image


def _warn_unrepairable(xml: str, mask: np.ndarray) -> None:
    """Warn about excluded pixels whose 3 x 3 neighbours are all excluded too."""
    padded = np.pad(~mask, 1)
    h, w = mask.shape
    good = sum(
        padded[1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w].astype(np.int64)
        for dy in (-1, 0, 1)
        for dx in (-1, 0, 1)
        if dy or dx
    )
    stuck = mask & (good == 0)
    if stuck.any():
        first = tuple(int(i) for i in np.argwhere(stuck)[0])
        warn(
            f"{xml!r}: {int(stuck.sum())} excluded pixels of the bad-pixel map (the first at "
            f"{first}) have no neighbour outside it to be repaired from and stay as they are",
            MetadataWarning,
        )


def _frozen(de_meta: dict) -> tuple:
    return tuple(sorted(de_meta.items()))


@functools.lru_cache(maxsize=8)
def _bad_pixels(path: str, de_meta: tuple, shape: tuple[int, int], stamp):
    mask = read_bad_pixels(path, dict(de_meta), shape)
    if mask is not None:
        mask.setflags(write=False)
    return mask


@takes_calibration
def open_seq(
    path: PathLike,
    nav_shape: Sequence[int] | None = None,
    sig_shape: Sequence[int] | None = None,
    sync_offset: int = 0,
    dims: Sequence[str] | None = None,
    dark: bool = True,
    gain: bool = True,
    excluded_pixels: bool = True,
) -> SeqDataSet:
    """Open a Direct Electron StreamPix ``.seq`` acquisition.

    Only the header (and the small side files) are read here; frames are read as views of
    the file where nothing needs converting.

    Parameters
    ----------
    path
        The ``.seq`` file (``NAME.seq`` or ``NAME.seq.seq``).
    nav_shape
        The scan shape (required: the file does not store it).
    sig_shape
        Reinterpret the frames with another shape of the same number of pixels.
    sync_offset
        Positive: skip that many frames; negative: insert that many empty frames at the start.
    dims
        Names of the nav and sig dims.
    dark, gain
        Use ``NAME.seq.dark.mrc`` / ``NAME.seq.gain.mrc`` where they exist: UDF runs and
        ``to_dask()`` then see ``(frame - dark) * gain`` as float32 (as LiberTEM), unless a
        run is given another ``corrections=`` (``ltdask.CorrectionSet()``: none).
    excluded_pixels
        Repair the pixels of the bad-pixel map in ``NAME.seq.Config.Metadata.xml`` (where it
        and ``NAME.seq.metadata`` exist), as the dark and gain: the map for the frames'
        ``HardwareBinning`` with the most columns, cropped to the frame at ``OffsetY``,
        ``OffsetX`` of the ``.metadata`` (as LiberTEM); a map that cannot be used warns
        `ltdask.MetadataWarning` and is left out.

    Returns
    -------
    SeqDataSet
        Pixels as stored (``uint8``, ``uint16`` or ``uint32``); ``ds.metadata`` holds what the
        header and the ``.seq.metadata`` file say.

    Raises
    ------
    ltdask.DataSetError
        Not a ``.seq`` file, a layout that cannot be read (compressed, colour), a truncated
        file or side file, no `nav_shape`.

    Examples
    --------
    >>> import numpy as np, ltdask, tempfile, os, struct
    >>> frames = np.arange(6 * 3 * 4, dtype="<u2").reshape(6, 3, 4)
    >>> header = bytearray(8192)
    >>> struct.pack_into("<I", header, 0, 0xFEED); struct.pack_into("<i", header, 28, 5)
    >>> struct.pack_into("<6I", header, 548, 4, 3, 16, 16, 24, 100)
    >>> struct.pack_into("<I", header, 580, 24 + 8)
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.seq")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(header)
    ...     for frame in frames:
    ...         _ = f.write(frame.tobytes() + bytes(8))
    >>> ds = ltdask.open_seq(path, nav_shape=(2, 3))
    >>> ds.nav_shape, ds.sig_shape
    ((2, 3), (3, 4))
    >>> bool((ds.to_dask().compute().reshape(6, 3, 4) == frames).all())
    True
    """
    return SeqDataSet(path, nav_shape, sig_shape, sync_offset, dims, dark, gain, excluded_pixels)
