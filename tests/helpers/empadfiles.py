"""A test-side EMPAD (G1) writer, from the published description of the format (numpy only).

The raw file holds each frame as 130 rows of 128 little-endian float32: the 128 x 128 pattern,
then two rows of per-frame metadata (here: values that must never reach a reader's output).
The XML names the raw file and gives the scan shape in every form readers look for: the
``acquire``/``search`` scan parameters (LiberTEM), ``pix_x``/``pix_y`` and the raw file name
``scan_x<X>_y<Y>.raw`` (RosettaSciIO), or a series' ``count``/``series_count``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SIG = (128, 128)


def empad_frames(n: int, seed: int = 0, sparse: bool = False) -> np.ndarray:
    """`n` float32 frames: small counts (mostly zeros if `sparse`), negatives and fractions."""
    rng = np.random.default_rng(seed)
    values = np.round(rng.normal(3.0, 40.0, size=(n, *SIG)), 1)
    if sparse:
        values = np.where(rng.random(values.shape) < 0.005, values, 0.0)
    return values.astype(np.float32)


def write_empad(
    folder: Path,
    frames: np.ndarray,
    nav: tuple[int, ...],
    kind: str = "scan",
    search: tuple[int, int] | None = None,
    acquire: tuple[int, int] | None = None,
    raw_name: str | None = None,
    xml_name: str = "scan.xml",
    fov: tuple[float, float] | None = None,
    pixelsize: float | None = None,
    cut_bytes: int = 0,
    pix: bool = True,
    fov_dotted: bool = True,
) -> Path:
    """Write `frames` (``(n, 128, 128)``, any float) as an EMPAD raw file and its XML; return
    the XML's path.

    `nav` is the scan (y, x) or series (count,) the XML describes; `acquire` (default `nav`)
    and `search` the scan parameters; `fov` (y, x) in metres and `pixelsize` (in the units
    RosettaSciIO reads as 1e-9/nm) the calibrations; `cut_bytes` bytes are cut off the end of
    the raw file (an interrupted acquisition). The field of view is written as EMPAD v0.51
    writes it, in one element whose tag name holds a dot
    (``<optics.get_full_scan_field_of_view>``), or with `fov_dotted` False nested
    (``<optics><get_full_scan_field_of_view>``)."""
    folder = Path(folder)
    n = len(frames)
    if raw_name is None:
        raw_name = f"scan_x{nav[-1]}_y{nav[0]}.raw" if len(nav) == 2 else "series.raw"
    records = np.empty((n, 130, 128), dtype="<f4")
    records[:, :128] = frames
    # metadata rows: huge values that would stand out in any sum that included them
    records[:, 128:] = 1e30 + np.arange(n, dtype=np.float64)[:, None, None]
    blob = records.tobytes()
    (folder / raw_name).write_bytes(blob[: len(blob) - cut_bytes])

    lines = ["<?xml version='1.0' encoding='UTF-8'?>", '<root name="EMPAD">']
    lines.append('  <timestamp isoformat="2026-01-02T03:04:05.678"/>')
    lines.append(f"  <type>{kind}</type>")
    lines.append(f'  <raw_file filename="{raw_name}"/>')
    lines.append("  <exposure_time>0.001</exposure_time>")
    if kind == "series":
        lines.append(f"  <count>{nav[0]}</count>")
        lines.append(f"  <scan_parameters><series_count>{nav[0]}</series_count></scan_parameters>")
    else:
        acquire = acquire or (nav[0], nav[1])
        for mode, shape in (("acquire", acquire), ("search", search or acquire)):
            lines.append(
                f'  <scan_parameters mode="{mode}"><scan_resolution_x>{shape[1]}'
                f"</scan_resolution_x><scan_resolution_y>{shape[0]}</scan_resolution_y>"
                "<scan_size>1.0</scan_size></scan_parameters>"
            )
        if pix:
            lines.append(f"  <pix_x>{nav[1]}</pix_x><pix_y>{nav[0]}</pix_y>")
    lines.append("  <iom_measurements>")
    lines.append("    <high_voltage>300000.0</high_voltage>")
    lines.append("    <nominal_camera_length>0.115</nominal_camera_length>")
    if pixelsize is not None:
        lines.append(f"    <calibrated_pixelsize>{pixelsize!r}</calibrated_pixelsize>")
    if fov is not None:
        value = f"({fov[0]!r}, {fov[1]!r})"
        if fov_dotted:
            tag = "optics.get_full_scan_field_of_view"
            lines.append(f"    <{tag}>{value}</{tag}>")
        else:
            tag = "get_full_scan_field_of_view"
            lines.append(f"    <optics><{tag}>{value}</{tag}></optics>")
    lines.append("  </iom_measurements>")
    lines.append("</root>")
    path = folder / xml_name
    # no whitespace between elements: RosettaSciIO takes an element with text for a leaf
    path.write_text(lines[0] + "\n" + "".join(line.strip() for line in lines[1:]) + "\n")
    return path
