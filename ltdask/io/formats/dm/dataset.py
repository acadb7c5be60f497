"""Gatan DigitalMicrograph ``.dm3`` / ``.dm4`` files holding 4-D scans or stacks of frames.

The tag tree is parsed by :mod:`ltdask.io.formats.dm.tags`. The scan is the largest image
of the ``ImageList`` that is not a thumbnail; its ``ImageData`` gives

* ``Data``: the pixels, an array tag whose bytes are mapped straight from the file;
* ``DataType``: the pixel type (`DATA_TYPES`), ``PixelDepth`` its size in bytes;
* ``Dimensions``: the sizes, fastest-varying first (so the numpy shape is reversed);
* ``Calibrations/Dimension/<i>``: ``Scale``, ``Origin`` and ``Units`` in the same order as
  the dimensions; DM's physical position is ``(index - Origin) * Scale``, i.e. ltdask's
  ``origin = -Origin * Scale``.

Images whose tags say they hold spectra are refused, with the tags that say so:
``ImageTags/Meta Data/Format`` "Spectrum" (1-D spectra, stored as 1 x N images) or
"Spectrum image" (line scans, spectrum images), ``ImageTags/Meta Data/Signal`` "EELS",
"X-ray" or "CL", an Orsay ``ImageTags/spim`` group, or a frame dim calibrated in eV.
Binary images (DataType 14) read as bool.

4-D data is C-ordered ``(scan_y, scan_x, det_y, det_x)`` when ``ImageTags/Meta Data/Data
Order Swapped`` is set. Without that flag, 4-D files are stored transposed (all scan
positions of detector pixel 0 first); those are refused unless ``force_c_order=True``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ltdask._types import PathLike
from ltdask.exceptions import DataSetError
from ltdask.io.calibration import takes_calibration
from ltdask.io.checks import check_file, check_shape
from ltdask.io.decode import Decoder
from ltdask.io.file_dataset import FileDataSet
from ltdask.io.fileset import File, FileSet
from ltdask.io.formats.dm.tags import ArrayTag, DMFile, TagGroup, finite, read_dm

#: ImageData/DataType -> dtype (without byte order)
DATA_TYPES = {
    1: "i2",
    2: "f4",
    3: "c8",
    6: "u1",
    7: "i4",
    9: "i1",
    10: "u2",
    11: "u4",
    12: "f8",
    13: "c16",
    14: "?",  # binary images: one byte per pixel, read as bool (as RosettaSciIO reads them)
}
UNSUPPORTED_TYPES = {5: "packed complex", 8: "RGB", 23: "RGBA", 27: "packed complex",
                     28: "packed complex"}  # fmt: skip
#: ``ImageTags/Meta Data/Format`` values of images whose fastest (2-D) or slowest (3-D)
#: dim is a spectrum: DM's 1-D spectra are 1 x N images, line scans N x M, spectrum images
#: 3-D (as RosettaSciIO and Nion Swift read them)
SPECTRAL_FORMATS = ("spectrum", "spectrum image")
#: ``ImageTags/Meta Data/Signal`` values of spectroscopies
SPECTROSCOPY_SIGNALS = {"eels": "EELS", "x-ray": "EDS", "cl": "cathodoluminescence"}
#: units of an energy axis (EELS energy loss, EDS energy): never a detector frame's
ENERGY_UNITS = ("ev", "kev", "mev")


class UnalignedFileSet(FileSet):
    """The frames of one file, back to back from any byte offset: GMS aligns nothing, so
    pixels of several bytes may start at an offset that is not a multiple of their size.
    The frames are still handed out as views of the map (numpy and numba read unaligned
    arrays at full speed on the CPUs ltdask runs on), not copied through the decoder."""

    def straight_view(self, buffers, file_idx: int) -> np.ndarray | None:
        dt = self.native_dtype
        if (
            self.frame_header_bytes
            or self.frame_footer_bytes
            or (dt.itemsize > 1 and not dt.isnative)
        ):
            return super().straight_view(buffers, file_idx)
        f = self.files[file_idx]
        start = f.header_bytes
        raw = buffers[file_idx][start : start + f.num_frames * self.frame_bytes]
        view = raw.view(dt).reshape((f.num_frames, *self.sig_shape))
        view.flags.writeable = False
        return view


def _thumbnail_indices(root: TagGroup) -> set[int]:
    thumbs = root.get("Thumbnails")
    out = set()
    if isinstance(thumbs, TagGroup):
        for entry in thumbs.values():
            index = entry.get("ImageIndex") if isinstance(entry, TagGroup) else None
            if isinstance(index, int):
                out.add(index)
    return out


def _images(dm: DMFile) -> list[tuple[int, TagGroup, ArrayTag]]:
    """``(index, image group, data tag)`` of every image that is not a thumbnail."""
    images = dm.root.get("ImageList")
    if not isinstance(images, TagGroup):
        raise DataSetError(f"{dm.path!r}: the DM file has no ImageList; it holds no image")
    thumbs = _thumbnail_indices(dm.root)
    found = []
    for index, image in enumerate(images.values()):
        if index in thumbs or not isinstance(image, TagGroup):
            continue
        data = image.path(("ImageData", "Data"))
        if isinstance(data, ArrayTag):
            found.append((index, image, data))
    if not found:
        raise DataSetError(f"{dm.path!r}: no image in the ImageList of the DM file has data")
    return found


def _dimensions(path: str, image: TagGroup) -> tuple[int, ...]:
    """The image's dimensions, fastest-varying first."""
    dims = image.path(("ImageData", "Dimensions"))
    values = dims.values() if isinstance(dims, TagGroup) else []
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise DataSetError(f"{path!r}: ImageData/Dimensions is missing or not a list of integers")
    if any(v <= 0 for v in values):
        raise DataSetError(
            f"{path!r}: ImageData/Dimensions is {tuple(values)}; every dimension must be >= 1"
        )
    return tuple(values)


def _dtype(dm: DMFile, image: TagGroup) -> np.dtype:
    code = image.path(("ImageData", "DataType"))
    if code in UNSUPPORTED_TYPES:
        raise DataSetError(
            f"{dm.path!r}: DM data type {code} ({UNSUPPORTED_TYPES[code]}) is not supported"
        )
    if code not in DATA_TYPES:
        raise DataSetError(
            f"{dm.path!r}: ImageData/DataType is {code!r}; ltdask reads the DM data types "
            f"{sorted(DATA_TYPES)}"
        )
    dtype = np.dtype(dm.byte_order + DATA_TYPES[code])
    depth = image.path(("ImageData", "PixelDepth"))
    if isinstance(depth, int) and depth != dtype.itemsize:
        raise DataSetError(
            f"{dm.path!r}: ImageData/PixelDepth is {depth} bytes, but DataType {code} "
            f"({dtype}) has {dtype.itemsize}"
        )
    return dtype


def _tag_text(value) -> str:
    """A text tag's value (DM stores text as arrays of UTF-16 code units), else ""."""
    if isinstance(value, ArrayTag):
        return value.text().strip()
    return value.strip() if isinstance(value, str) else ""


def _not_frames(image: TagGroup, dm_dims: tuple[int, ...]) -> str | None:
    """Why the tags say the image holds something other than a stack of 2-D frames
    (spectra), or None. `dm_dims` fastest first; the frame is ``dm_dims[:2]``."""
    meta = image.path(("ImageTags", "Meta Data"))
    kind = _tag_text(meta.get("Format")) if isinstance(meta, TagGroup) else ""
    signal = _tag_text(meta.get("Signal")) if isinstance(meta, TagGroup) else ""
    reasons = []
    if kind.lower() in SPECTRAL_FORMATS:
        reasons.append(f"ImageTags/Meta Data/Format is {kind!r}")
    if signal.lower() in SPECTROSCOPY_SIGNALS:
        reasons.append(
            f"ImageTags/Meta Data/Signal is {signal!r} "
            f"({SPECTROSCOPY_SIGNALS[signal.lower()]} spectra)"
        )
    if isinstance(image.path(("ImageTags", "spim")), TagGroup):
        reasons.append("ImageTags has a 'spim' group (an Orsay spectrum image)")
    entries = image.path(("ImageData", "Calibrations", "Dimension"))
    units = [
        _tag_text(e.get("Units")) if isinstance(e, TagGroup) else ""
        for e in (entries.values() if isinstance(entries, TagGroup) else [])
    ]
    for i, unit in enumerate(units[:2]):
        if unit.lower() in ENERGY_UNITS and i < len(dm_dims):
            reasons.append(
                f"its {'fastest' if i == 0 else 'second'} dim ({dm_dims[i]} long) is "
                f"calibrated in {unit}, an energy axis"
            )
    if not reasons:
        return None
    shape = " x ".join(str(d) for d in dm_dims[::-1])
    return f"the {shape} image holds spectra, not a stack of 2-D frames: " + "; ".join(reasons)


def _calibration(image: TagGroup, ndim: int) -> list[tuple[float, float, str] | None]:
    """One ``(scale, origin, units)`` (ltdask's convention) or None per dim, in DM order."""
    group = image.path(("ImageData", "Calibrations", "Dimension"))
    entries = group.values() if isinstance(group, TagGroup) else []
    out: list[tuple[float, float, str] | None] = []
    for i in range(ndim):
        entry = entries[i] if i < len(entries) else None
        if not isinstance(entry, TagGroup):
            out.append(None)
            continue
        scale = finite(entry.get("Scale"))
        origin = finite(entry.get("Origin")) or 0.0
        units = entry.get("Units")
        text = units.text() if isinstance(units, ArrayTag) else ""
        if scale is None or scale == 0 or (scale == 1 and origin == 0 and not text):
            out.append(None)
        else:
            out.append((scale, -origin * scale, text))
    return out


def _metadata(dm: DMFile, image: TagGroup, index: int) -> dict:
    meta: dict = {"format": f"DM{dm.version}", "image_index": index}
    name = image.get("Name")
    if isinstance(name, ArrayTag) and name.text():
        meta["name"] = name.text()
    for key, where in (
        ("signal_format", ("ImageTags", "Meta Data", "Format")),
        ("signal", ("ImageTags", "Meta Data", "Signal")),
        ("voltage_V", ("ImageTags", "Microscope Info", "Voltage")),
        ("exposure_s", ("ImageTags", "Acquisition", "Parameters", "High Level", "Exposure (s)")),
        ("camera_length", ("ImageTags", "Microscope Info", "STEM Camera Length")),
    ):
        value = image.path(where)
        if isinstance(value, ArrayTag):
            value = value.text() or None
        elif value is not None and not isinstance(value, (int, float, str)):
            value = None
        if value is not None:
            meta[key] = value
    return meta


class DMDataSet(FileDataSet):
    """The image data of a DM3/DM4 file as a scan (see :func:`open_dm`).

    Examples
    --------
    >>> import ltdask, tempfile, os
    >>> from ltdask.io import DMDataSet
    >>> issubclass(DMDataSet, ltdask.io.FileDataSet)
    True
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.dm4")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(bytes(64))
    >>> try:
    ...     ltdask.open_dm(path)
    ... except ltdask.DataSetError as e:
    ...     print(e)  # doctest: +ELLIPSIS
    '.../scan.dm4' is not a DM3/DM4 file: it starts with version 0, expected 3 or 4
    >>> ds = ltdask.open_dm("/data/scan.dm4")  # doctest: +SKIP
    >>> ds.metadata["format"], ds.attrs()["dm_format"]  # doctest: +SKIP
    ('DM4', 'DM4')
    """

    def __init__(self, path, nav_shape=None, sync_offset=0, dims=None, force_c_order=False):
        path = check_file(path)
        self.path = path
        dm = read_dm(path)
        images = _images(dm)
        readable = [im for im in images if im[1].path(("ImageData", "DataType")) in DATA_TYPES]
        # the largest image: one ltdask can read where there is one (a thumbnail that no
        # Thumbnails tag names is RGBA)
        index, image, data = max(readable or images, key=lambda found: found[2].nbytes)
        dm_dims = _dimensions(path, image)
        dtype = _dtype(dm, image)
        shape = dm_dims[::-1]
        expected = math.prod(shape) * dtype.itemsize
        if data.nbytes != expected:
            raise DataSetError(
                f"{path!r}: the image data holds {data.nbytes} bytes, but its Dimensions "
                f"{dm_dims} of {dtype} need {expected}"
            )
        why = _not_frames(image, dm_dims)
        if why is not None:
            raise DataSetError(
                f"{path!r}: {why}; ltdask reads detector frames (4-D scans, 3-D stacks, 2-D "
                "images); open spectra with RosettaSciIO or HyperSpy"
            )
        swapped = image.path(("ImageTags", "Meta Data", "Data Order Swapped"))
        if len(shape) == 4 and not swapped and not force_c_order:
            raise DataSetError(
                f"{path!r}: 4-D data without 'Data Order Swapped' is stored transposed (all "
                "scan positions of each detector pixel together), which ltdask cannot read "
                "frame by frame; convert it, or pass force_c_order=True if the frames are "
                "C-ordered after all"
            )
        if not 2 <= len(shape) <= 4:
            raise DataSetError(f"{path!r}: {len(shape)}-D image data; expected 2 to 4 dims")
        sig = shape[-2:]
        natural_nav = shape[:-2] or (1,)
        frames = math.prod(natural_nav)
        if nav_shape is None:
            nav_shape = natural_nav
        else:
            nav_shape = check_shape(nav_shape, "nav_shape", path)
        self.metadata = _metadata(dm, image, index)
        self.metadata["data_order_swapped"] = bool(swapped)
        files = [File(path, 0, frames, data.offset, dm.signature)]
        fileset = UnalignedFileSet(files, sig, dtype)
        super().__init__(fileset, Decoder(dtype), nav_shape, sync_offset=sync_offset, dims=dims)
        calibration = _calibration(image, len(shape))[::-1]  # numpy order
        sig_cal = calibration[-2:]
        nav_cal = calibration[:-2] if tuple(nav_shape) == tuple(natural_nav) else []
        if any(sig_cal) or any(nav_cal):
            self.calibrate(
                nav=list(nav_cal) if nav_cal and any(nav_cal) else None,
                sig=list(sig_cal) if any(sig_cal) else None,
            )

    def hands_out_views(self, dtype) -> bool:
        return self._straight(dtype) and (self.raw_dtype.isnative or self.raw_dtype.itemsize == 1)

    def attrs(self) -> dict:
        return {**super().attrs(), "dm_format": self.metadata["format"]}


@takes_calibration
def open_dm(
    path: PathLike,
    nav_shape: Sequence[int] | None = None,
    sync_offset: int = 0,
    dims: Sequence[str] | None = None,
    force_c_order: bool = False,
) -> DMDataSet:
    """Open a Gatan DigitalMicrograph ``.dm3`` / ``.dm4`` file holding a 4-D scan or a stack.

    Only the tag tree is read here; the pixels are mapped straight from the file.

    Parameters
    ----------
    path
        The ``.dm3`` / ``.dm4`` file.
    nav_shape
        The scan shape; by default the image's leading dims (4-D: the scan; 3-D: the
        frames; 2-D: one frame). Another shape reinterprets the frames (calibrations of the
        nav dims are then dropped).
    sync_offset
        Positive: skip that many frames; negative: insert that many empty frames at the start.
    dims
        Names of the nav and sig dims.
    force_c_order
        Read 4-D data without the ``Data Order Swapped`` tag as C-ordered frames.

    Returns
    -------
    DMDataSet
        The largest image of the file (thumbnails left out), with the calibrations of its
        dims (``origin + scale * index`` in the file's units) and `metadata`.

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    ltdask.DataSetError
        Not a DM3/DM4 file, a malformed or truncated tag tree, an unsupported data type or
        layout, image data that does not match its dimensions, or an image whose tags say
        it holds spectra (a 1 x N spectrum, a spectrum line scan or spectrum image) rather
        than a stack of 2-D frames.

    Examples
    --------
    A DM3 file written by hand: tags are groups (kind 20) or data (kind 21, ``%%%%``,
    definition words, value):

    >>> import numpy as np, ltdask, tempfile, os, struct
    >>> def tag(label, body, group=False):
    ...     return struct.pack(">BH", 20 if group else 21, len(label)) + label.encode() + body
    >>> def group(*tags):
    ...     return struct.pack(">BBI", 0, 1, len(tags)) + b"".join(tags)
    >>> def u32(value):
    ...     return b"%%%%" + struct.pack(">II", 1, 5) + struct.pack("<I", value)
    >>> frames = np.arange(2 * 3 * 4 * 5, dtype="<u2").reshape(2, 3, 4, 5)
    >>> pixels = b"%%%%" + struct.pack(">4I", 3, 20, 4, frames.size) + frames.tobytes()
    >>> dims = group(*(tag("", u32(d)) for d in (5, 4, 3, 2)))  # fastest first
    >>> image_data = group(tag("Data", pixels), tag("DataType", u32(10)),
    ...                    tag("Dimensions", dims, group=True), tag("PixelDepth", u32(2)))
    >>> meta = group(tag("Meta Data", group(tag("Data Order Swapped", u32(1))), group=True))
    >>> image = group(tag("ImageData", image_data, True), tag("ImageTags", meta, True))
    >>> root = group(tag("ImageList", group(tag("", image, True)), True))
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.dm3")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(struct.pack(">3I", 3, 0, 1) + root + bytes(4))
    >>> ds = ltdask.open_dm(path)
    >>> ds.nav_shape, ds.sig_shape, ds.dtype
    ((2, 3), (4, 5), dtype('uint16'))
    >>> bool((ds.to_dask().compute() == frames).all())
    True
    """
    return DMDataSet(path, nav_shape, sync_offset, dims, force_c_order)


def is_dm(path: str) -> bool:
    """Whether `path` starts like a DM3/DM4 file: version 3 or 4, a byte order flag of 0
    or 1, and a root group whose sorted/open bytes are 0 or 1."""
    try:
        with open(path, "rb") as f:
            head = f.read(18)
    except OSError:
        return False
    if len(head) < 18 or head[:4] not in (b"\0\0\0\x03", b"\0\0\0\x04"):
        return False
    at = 8 if head[3] == 3 else 12
    return head[at : at + 3] == b"\0\0\0" and all(b in (0, 1) for b in head[at + 3 : at + 6])
