"""``ltdask demo``: a synthetic scan, four analyses in one pass, Zarr and PNG results."""

from __future__ import annotations

import os
import tempfile
import time

import click
import numpy as np

from ltdask.cli._app import run_context
from ltdask.cli._options import parse_shape
from ltdask.synthetic import synthetic_scan


def _png(path: str, image: np.ndarray) -> None:
    """A grey image (2-D) or RGB (3-D, 0..1) as an 8-bit PNG, scaled to its range."""
    from PIL import Image

    img = np.nan_to_num(np.asarray(image, dtype=np.float64))
    if img.ndim == 2:
        lo, hi = np.percentile(img, [0.5, 99.5])
        img = np.clip((img - lo) / (hi - lo if hi > lo else 1), 0, 1)
    pixels = (img * 255).round().astype(np.uint8)
    scale = max(1, 256 // max(pixels.shape[:2]))
    pixels = pixels.repeat(scale, axis=0).repeat(scale, axis=1)
    Image.fromarray(pixels).save(path)


def field_colours(fy: np.ndarray, fx: np.ndarray) -> np.ndarray:
    """Direction as hue, magnitude as brightness: an RGB image of a vector field.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.cli import field_colours
    >>> field_colours(np.array([[0.0]]), np.array([[1.0]])).tolist()  # along +x: red
    [[[1.0, 0.0, 0.0]]]
    """
    hue = (np.arctan2(fy, fx) / (2 * np.pi)) % 1.0
    mag = np.hypot(fy, fx)
    value = np.clip(mag / (np.nanpercentile(mag, 99) or 1), 0, 1)
    h6 = hue * 6
    c = value
    x = c * (1 - np.abs(h6 % 2 - 1))
    zero = np.zeros_like(c)
    sector = np.floor(h6).astype(int) % 6
    choices = [(c, x, zero), (x, c, zero), (zero, c, x), (zero, x, c), (x, zero, c), (c, zero, x)]
    rgb = np.zeros((*c.shape, 3))
    for s, (r, g, b) in enumerate(choices):
        sel = sector == s
        rgb[sel] = np.stack([r[sel], g[sel], b[sel]], axis=-1)
    return rgb


#: the files ``ltdask demo`` writes into its folder
DEMO_FILES = (
    "scan.raw",
    "results.zarr",
    "bright_field.png",
    "dark_field.png",
    "com_field.png",
    "com_magnitude.png",
    "divergence.png",
    "stddev.png",
    "mean_frame.png",
)


def _check_demo_folder(out_dir: str) -> None:
    """Refuse a folder where the demo would overwrite files it did not write: it rewrites its
    own files only where an earlier demo left them (its ``results.zarr`` store is there)."""
    from ltdask.store import ZARR_ROOT_FILES

    taken = [n for n in DEMO_FILES if os.path.lexists(os.path.join(out_dir, n))]
    store = os.path.join(out_dir, "results.zarr")
    earlier_demo = any(os.path.isfile(os.path.join(store, n)) for n in ZARR_ROOT_FILES)
    if taken and not earlier_demo:
        raise click.BadParameter(
            f"{out_dir!r} already holds {', '.join(taken)}, which the demo would overwrite; "
            "choose another folder",
            param_hint="--out",
        )


@click.command()
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="folder for the scan and the results (default: a new temporary folder)",
)
@click.option("--nav", default="64,64", show_default=True, callback=lambda c, p, v: parse_shape(v))
@click.option(
    "--sig", default="128,128", show_default=True, callback=lambda c, p, v: parse_shape(v)
)
@click.option("--progress/--no-progress", default=True, show_default=True)
@click.pass_context
def demo(ctx, out_dir, nav, sig, progress):
    """Write a synthetic scan; run virtual bright/dark field, centre of mass and standard
    deviation in one pass; write the results to Zarr and PNG images."""
    import xarray as xr

    import ltdask
    from ltdask import masks
    from ltdask.udf import ApplyMasksUDF, CoMUDF, StdDevUDF

    for option, shape in (("--nav", nav), ("--sig", sig)):
        if len(shape) != 2 or min(shape) < 1:
            raise click.BadParameter(
                f"{','.join(map(str, shape))!r}: expected two sizes >= 1, such as 64,64",
                param_hint=option,
            )
    out_dir = out_dir or tempfile.mkdtemp(prefix="ltdask-demo-")
    _check_demo_folder(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    scan_path = os.path.join(out_dir, "scan.raw")
    data, _ = synthetic_scan(nav, sig)
    data.tofile(scan_path)
    click.echo(
        f"wrote {scan_path}: nav {nav}, sig {sig}, uint16, "
        f"{data.nbytes / 2**20:.0f} MiB (a disk that moves and dims across the scan)"
    )
    ds = ltdask.open_raw(scan_path, nav_shape=nav, sig_shape=sig, dtype="uint16")
    sy, sx = sig
    r = min(sy, sx) / 8
    # the dark-field ring spans from outside the disk to the frame's edge (kept a valid
    # ring, outer above inner, on frames too small for that)
    ring_inner = r * 2.2
    ring_outer = max(min(sy, sx) / 2 - 1, ring_inner + 1)
    bf = ApplyMasksUDF(
        [
            lambda: masks.circular(sx / 2, sy / 2, sx, sy, r * 1.6),
            lambda: masks.ring(sx / 2, sy / 2, sx, sy, ring_outer, ring_inner),
        ]
    )
    com = CoMUDF.with_params(cy=sy / 2, cx=sx / 2, r=r * 2)
    std = StdDevUDF()
    t0 = time.perf_counter()
    with run_context(ctx):
        lazy = ltdask.lazy(ds, [bf, com, std])
        store = os.path.join(out_dir, "results.zarr")
        ltdask.to_zarr(
            dict(zip(("virtual_detectors", "com", "stddev"), lazy, strict=True)),
            store,
            mode="w",
            progress=progress,
        )
    elapsed = time.perf_counter() - t0
    vd = xr.open_zarr(store, group="virtual_detectors")["intensity"].values
    com_res = xr.open_zarr(store, group="com")
    std_res = xr.open_zarr(store, group="stddev")
    images = {
        "bright_field.png": vd[..., 0],
        "dark_field.png": vd[..., 1],
        "com_field.png": field_colours(com_res["field_y"].values, com_res["field_x"].values),
        "com_magnitude.png": com_res["magnitude"].values,
        "divergence.png": com_res["divergence"].values,
        "stddev.png": std_res["std"].values,
        "mean_frame.png": np.log1p(std_res["mean"].values),
    }
    for name, image in images.items():
        _png(os.path.join(out_dir, name), image)
    mb = data.nbytes / 2**20
    click.echo(
        f"ran virtual bright/dark field, CoM and StdDev in one pass: {elapsed:.2f} s "
        f"({mb / elapsed:.0f} MiB/s, {len(ds.get_partitions())} partitions)"
    )
    click.echo(f"wrote {store} (groups virtual_detectors, com, stddev)")
    for name in images:
        click.echo(f"wrote {os.path.join(out_dir, name)}")
