"""EMPAD (G1) scans: an XML descriptor and a raw file of float32 frames.

Each frame in the raw file is 130 rows of 128 little-endian float32 values: the 128 x 128
pattern, then two rows of per-frame metadata, skipped as a 1024-byte frame footer. The XML
names the raw file (relative to the XML's folder) and holds the scan shape and calibrations.
"""

from __future__ import annotations

import ast
import math
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from ltdask._types import PathLike
from ltdask.exceptions import DataSetError
from ltdask.io.calibration import takes_calibration
from ltdask.io.checks import check_file, is_regular_file, signature_of, stat_regular_file
from ltdask.io.decode import Decoder
from ltdask.io.file_dataset import FileDataSet
from ltdask.io.fileset import File, FileSet
from ltdask.io.formats.records import frame_shape, whole_records

#: the detector's frame, and the rows stored per frame (two rows of metadata)
EMPAD_SIG = (128, 128)
EMPAD_ROWS = 130
EMPAD_DTYPE = "<f4"
FRAME_BYTES = 128 * 128 * 4
FOOTER_BYTES = (EMPAD_ROWS - 128) * 128 * 4
#: an XML descriptor is a few KiB; anything far larger is not one
XML_MAX_BYTES = 16 * 2**20


# -- the XML descriptor -----------------------------------------------------------------------
def read_xml(path: str) -> ET.Element:
    """The root element of an EMPAD XML file, or a `DataSetError` naming the file."""
    size = stat_regular_file(path).st_size
    if size > XML_MAX_BYTES:
        raise DataSetError(f"{path!r}: {size} bytes is too large for an EMPAD XML descriptor")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise DataSetError(f"{path!r} is not a readable XML file: {e}") from None
    if root.find("raw_file") is None:
        raise DataSetError(
            f"{path!r} is not an EMPAD descriptor: it has no <raw_file filename=...> element"
        )
    return root


def is_empad_xml(path: str) -> bool:
    """Whether `path` is an EMPAD XML descriptor (an ``.xml`` file naming a raw file)."""
    if not path.lower().endswith(".xml") or not is_regular_file(path):
        return False
    try:
        if os.path.getsize(path) > XML_MAX_BYTES:
            return False
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return False
    raw = root.find("raw_file")
    return raw is not None and "filename" in raw.attrib


def _text(root: ET.Element, path: str) -> str | None:
    node = root.find(path)
    return None if node is None or node.text is None else node.text.strip()


def _int(root: ET.Element, path: str, xml_path: str) -> int | None:
    text = _text(root, path)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise DataSetError(f"{xml_path!r}: <{path}> is {text!r}, not an integer") from None


def _float(root: ET.Element, path: str) -> float | None:
    text = _text(root, path)
    try:
        return None if text is None else float(text)
    except ValueError:
        return None


def raw_path_of(root: ET.Element, xml_path: str) -> str:
    name = root.find("raw_file").attrib.get("filename")  # type: ignore[union-attr]
    if not name:
        raise DataSetError(f"{xml_path!r}: <raw_file> has no filename attribute")
    # the name is relative to the XML's folder (Windows paths included)
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    return os.path.join(os.path.dirname(xml_path), base)


def nav_candidates(root: ET.Element, xml_path: str, raw_path: str) -> list[tuple[int, ...]]:
    """The scan shapes the XML suggests, most trusted first: a series' length; else the
    ``acquire`` and ``search`` scan parameters, ``pix_y``/``pix_x`` and the raw file's
    ``scan_x<X>_y<Y>`` name."""
    kind = (_text(root, "type") or "scan").lower()
    if kind == "series":
        count = _int(root, "count", xml_path) or _int(
            root, "scan_parameters/series_count", xml_path
        )
        if count is None:
            raise DataSetError(f"{xml_path!r}: a series without <count>")
        return [(count,)]
    if kind != "scan":
        raise DataSetError(f"{xml_path!r}: <type> is {kind!r}; expected 'scan' or 'series'")
    found = []
    for mode in ("acquire", "search"):
        for params in root.findall("scan_parameters"):
            if params.attrib.get("mode") == mode:
                nx = _int(params, "scan_resolution_x", xml_path)
                ny = _int(params, "scan_resolution_y", xml_path)
                if nx is not None and ny is not None:
                    found.append((ny, nx))
    nx, ny = _int(root, "pix_x", xml_path), _int(root, "pix_y", xml_path)
    if nx is not None and ny is not None:
        found.append((ny, nx))
    m = re.search(r"scan_x(\d+)_y(\d+)", os.path.basename(raw_path))
    if m:
        found.append((int(m.group(2)), int(m.group(1))))
    return [s for s in dict.fromkeys(found) if all(d > 0 for d in s)]


def xml_metadata(root: ET.Element) -> dict:
    """What the XML says about the acquisition, for ``ltdask info`` (missing items left out)."""
    stamp = root.find("timestamp")
    items = {
        "detector": "EMPAD",
        "type": _text(root, "type") or "scan",
        "timestamp": None if stamp is None else stamp.attrib.get("isoformat"),
        "exposure_time": _text(root, "exposure_time"),
        "high_voltage": _text(root, "iom_measurements/high_voltage"),
        "camera_length": _text(root, "iom_measurements/nominal_camera_length"),
        "calibrated_pixelsize": _text(root, "iom_measurements/calibrated_pixelsize"),
        "calibrated_diffraction_angle": _text(
            root, "iom_measurements/calibrated_diffraction_angle"
        ),
    }
    return {k: v for k, v in items.items() if v is not None}


def nav_calibration(root: ET.Element, nav: tuple[int, ...]):
    """``(scale, "nm")`` per scan dim from the XML's field of view, or None."""
    if len(nav) != 2:
        return None
    # v0.51 names one element with a dot in its tag (``<optics.get_full_scan_field_of_view>``),
    # not a nested ``<optics>`` group; both are read
    fov = _text(root, "iom_measurements/optics.get_full_scan_field_of_view")
    if fov is None:
        fov = _text(root, "iom_measurements/optics/get_full_scan_field_of_view")
    if fov is not None:
        try:
            values = ast.literal_eval(fov)
            scales = [float(values[i]) / nav[i] * 1e9 for i in range(2)]
        except (ValueError, TypeError, SyntaxError, IndexError):
            return None
        return (
            [(s, "nm") for s in scales] if all(s > 0 and math.isfinite(s) for s in scales) else None
        )
    width = _float(root, "iom_measurements/full_scan_field_of_view/x")
    factor = _float(root, "iom_measurements/full_scan_field_of_view/scale_factor")
    if width and factor:
        # the stored width is the scan's larger side, times the scale factor
        scale = width / factor / max(nav) * 1e9
        if scale > 0 and math.isfinite(scale):
            return (scale, "nm")
    return None


def sig_calibration(root: ET.Element):
    """``(scale, origin, "1/nm")`` with the centre of the detector at 0, or None."""
    size = _float(root, "iom_measurements/calibrated_pixelsize")
    if not size or not math.isfinite(size) or size <= 0:
        return None
    scale = size * 1e9
    return (scale, -EMPAD_SIG[0] // 2 * scale, "1/nm")


def _xml_for_raw(raw_path: str) -> str | None:
    """The XML descriptor next to `raw_path` that names it, if there is one."""
    folder = os.path.dirname(raw_path) or "."
    name = os.path.basename(raw_path)
    try:
        names = sorted(n for n in os.listdir(folder) if n.lower().endswith(".xml"))
    except OSError:
        return None
    stem = os.path.splitext(name)[0]
    names.sort(key=lambda n: os.path.splitext(n)[0] != stem)  # the same name first
    for n in names:
        candidate = os.path.join(folder, n)
        if not is_empad_xml(candidate):
            continue
        root = ET.parse(candidate).getroot()
        if os.path.basename(raw_path_of(root, candidate)) == name:
            return candidate
    return None


# -- the dataset ------------------------------------------------------------------------------
class EMPADDataSet(FileDataSet):
    """An EMPAD scan or series (see :func:`open_empad`).

    Examples
    --------
    >>> import ltdask, tempfile, os
    >>> from ltdask.io import EMPADDataSet
    >>> issubclass(EMPADDataSet, ltdask.io.FileDataSet)
    True
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.xml")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(b"not xml")
    >>> try:
    ...     ltdask.open_empad(path)
    ... except ltdask.DataSetError as e:
    ...     print(e)  # doctest: +ELLIPSIS
    '.../scan.xml' is not a readable XML file: ...
    >>> ds = ltdask.open_empad("/data/scan.xml")  # doctest: +SKIP
    >>> ds.sig_shape, ds.xml_path, ds.metadata["type"]  # doctest: +SKIP
    ((128, 128), '/data/scan.xml', 'scan')
    """

    def __init__(self, path, nav_shape=None, sig_shape=None, sync_offset=0, dims=None):
        path = check_file(path)
        xml_path = path if path.lower().endswith(".xml") else None
        if xml_path is None and nav_shape is None:
            xml_path = _xml_for_raw(path)
            if xml_path is None:
                raise DataSetError(
                    f"{path!r}: no EMPAD XML descriptor next to it names this file; pass the "
                    "XML file, or nav_shape= to read the raw file alone"
                )
        root = read_xml(xml_path) if xml_path else None
        raw_path = raw_path_of(root, xml_path) if root is not None and xml_path else path
        if not os.path.exists(raw_path):
            raise DataSetError(
                f"{xml_path!r} names the raw file {os.path.basename(raw_path)!r}, which is not "
                f"in {os.path.dirname(raw_path) or '.'!r} (was it renamed?)"
            )
        raw_path = check_file(raw_path)
        self.path = raw_path
        self.xml_path = xml_path
        signature = signature_of(stat_regular_file(raw_path))
        stride = FRAME_BYTES + FOOTER_BYTES
        count = whole_records(raw_path, signature[2], 0, stride, FOOTER_BYTES)
        if count == 0:
            raise DataSetError(
                f"{raw_path!r} holds no whole EMPAD frame ({signature[2]} bytes; one frame is "
                f"{stride} bytes: 128 x 130 float32)"
            )
        self.metadata: dict = {"detector": "EMPAD"}
        nav = None
        if root is not None and xml_path is not None:
            self.metadata = xml_metadata(root)
            self.metadata["raw_file"] = os.path.basename(raw_path)
            candidates = nav_candidates(root, xml_path, raw_path)
            # the first shape that the file holds exactly, else the most trusted one
            exact = [s for s in candidates if math.prod(s) == count]
            nav = (exact or candidates or [(count,)])[0]
        if nav_shape is not None:
            nav = nav_shape
        sig = frame_shape(sig_shape, EMPAD_SIG, raw_path)
        fileset = FileSet(
            [File(raw_path, 0, count, 0, signature)], sig, EMPAD_DTYPE, 0, FOOTER_BYTES
        )
        super().__init__(fileset, Decoder(EMPAD_DTYPE), nav, sync_offset=sync_offset, dims=dims)
        if root is not None:
            self.calibrate(
                nav=nav_calibration(root, self.nav_shape),
                sig=sig_calibration(root) if self.sig_shape == EMPAD_SIG else None,
            )

    def attrs(self) -> dict:
        attrs = super().attrs()
        if self.xml_path:
            attrs["empad_xml"] = self.xml_path
        return attrs


@takes_calibration
def open_empad(
    path: PathLike,
    nav_shape: Sequence[int] | None = None,
    sig_shape: Sequence[int] | None = None,
    sync_offset: int = 0,
    dims: Sequence[str] | None = None,
) -> EMPADDataSet:
    """Open an EMPAD (G1) scan: its XML descriptor, or its raw file.

    Only the XML and the raw file's size are read here.

    Parameters
    ----------
    path
        The ``.xml`` descriptor, which names the raw file (in the same folder); or the
        ``.raw`` file, whose descriptor is looked for next to it unless `nav_shape` is given
        (``ltdask.open`` takes a ``.raw`` file for raw data: add ``format="empad"``).
    nav_shape
        The scan shape; by default from the XML: a series' ``count``; for a scan, the first
        of the ``acquire`` and ``search`` scan parameters, ``pix_y``/``pix_x`` and the raw
        file's ``scan_x<X>_y<Y>`` name that the raw file holds exactly (else the first).
    sig_shape
        Reinterpret the 128 x 128 frames with another shape of as many pixels.
    sync_offset
        Positive: skip that many frames; negative: insert that many empty frames at the start.
    dims
        Names of the nav and sig dims.

    Returns
    -------
    EMPADDataSet
        float32 frames without their two metadata rows; nav dims calibrated in nm from the
        scan's field of view and signal dims in 1/nm (centred on the detector) where the XML
        has them; the XML's acquisition details in ``metadata``.

    Raises
    ------
    FileNotFoundError
        The file given does not exist.
    ltdask.DataSetError
        The XML is malformed or names no existing raw file, the raw file holds no whole frame,
        or the shapes do not fit. A raw file that ends inside a frame (an interrupted
        acquisition) is read without that frame, with a `ltdask.MissingFramesWarning`.

    Examples
    --------
    >>> import numpy as np, ltdask, tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> frames = np.zeros((6, 130, 128), np.float32)
    >>> frames[:, :128] = np.arange(6)[:, None, None]
    >>> frames.tofile(os.path.join(folder, "scan_x3_y2.raw"))
    >>> with open(os.path.join(folder, "scan.xml"), "w") as f:
    ...     _ = f.write('<root><type>scan</type><raw_file filename="scan_x3_y2.raw"/></root>')
    >>> ds = ltdask.open_empad(os.path.join(folder, "scan.xml"))
    >>> ds.nav_shape, ds.sig_shape, ds.dtype
    ((2, 3), (128, 128), dtype('float32'))
    >>> ds.to_dask()[1, 2].max().compute()
    np.float32(5.0)
    """
    return EMPADDataSet(path, nav_shape, sig_shape, sync_offset, dims)
