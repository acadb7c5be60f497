"""``ltdask info``: what a file holds and how ltdask would read it."""

from __future__ import annotations

import click
import numpy as np

from ltdask.cli._options import _open, open_options


@click.command()
@click.argument("path", type=click.Path(exists=True))
@open_options
def info(path, opening):
    """Format, shapes, dtype, size, partitions and tiling of PATH."""
    from ltdask.io.open import detect_format

    ds = _open(path, opening)
    nav_shape = opening["nav_shape"]
    parts = ds.get_partitions()
    scheme = ds.negotiate([], np.float32)
    rows = [
        ("path", path),
        (
            "format",
            opening["format"] or detect_format(path, {"nav_shape": nav_shape} if nav_shape else {}),
        ),
        ("class", type(ds).__name__),
        ("nav shape", ds.nav_shape),
        ("sig shape", ds.sig_shape),
        ("dims", ", ".join(ds.dims)),
        ("dtype", ds.dtype),
        ("size", f"{ds.nbytes / 2**20:.1f} MiB"),
        ("frames in files", ds.image_count),
        *_present_rows(ds),
        ("sync offset", ds.sync_offset),
        ("partitions", f"{len(parts)} (nav chunks {_chunks(ds.nav_chunks)})"),
        ("tiles (float32)", f"{scheme.tileshape}, {len(scheme)} signal slices"),
        *_metadata_rows(ds),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        click.echo(f"{k:<{width}}  {v}")


def _present_rows(ds) -> list:
    """A row that flags a nav shape asking for more frames than the files hold."""
    start, stop = getattr(ds, "present_range", (0, None))
    asked = getattr(ds, "num_frames", None)
    if stop is None or asked is None or stop - start >= asked:
        return []
    return [
        (
            "MISSING FRAMES",
            f"only {stop - start} of the {asked} frames the nav shape {tuple(ds.nav_shape)} "
            f"asks for are in the files (positions {start}:{stop}); the others read as zeros "
            "and are invalid",
        )
    ]


def _metadata_rows(ds) -> list:
    """What the file says about the acquisition (a format's ``metadata`` dict: detector,
    binning, ...; one row per entry that has a value), and the calibrations of the dims
    (``det_y: 0.2 mrad, origin -3.2``: 0.2 mrad a pixel, the first one at -3.2 mrad)."""
    metadata = getattr(ds, "metadata", None)
    if not isinstance(metadata, dict):
        metadata = {}
    rows = [(f"  {k}", v) for k, v in metadata.items() if v is not None and v != ""]
    if rows:
        rows.insert(0, ("metadata", ""))
    cal = [
        f"{dim}: {a.scale:g} {a.units}".rstrip() + (f", origin {a.origin:g}" if a.origin else "")
        for dim, a in zip(ds.dims, (*ds.nav_calibration, *ds.sig_calibration), strict=True)
        if a.calibrated
    ]
    if cal:
        rows.append(("calibration", "; ".join(cal)))
    return rows


def _chunks(chunks) -> str:
    return " x ".join(f"{c[0]}" + (f"..{c[-1]}" if c[-1] != c[0] else "") for c in chunks)
