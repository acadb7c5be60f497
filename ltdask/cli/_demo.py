"""``ltdask demo``: a synthetic scan, four analyses in one pass, Zarr and PNG results."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time

import click

from ltdask.cli._app import run_context
from ltdask.cli._options import parse_shape
from ltdask.cli._pictures import save_picture
from ltdask.io.synthetic import synthetic_scan
from ltdask.views.plot import field_colours

#: the pictures ``ltdask demo`` draws: file name -> title
PICTURES = {
    "bright_field.png": "virtual bright field",
    "dark_field.png": "virtual annular dark field",
    "com_field.png": "centre of mass shift",
    "com_magnitude.png": "CoM shift magnitude",
    "divergence.png": "CoM divergence",
    "stddev.png": "standard deviation per pixel",
    "mean_frame.png": "mean frame",
}
#: the files ``ltdask demo`` writes into its folder
DEMO_FILES = ("results.zarr", *PICTURES)
#: the made-up calibration of the synthetic scan: per scan step, per detector pixel
NAV_STEP_NM = 0.4
DETECTOR_PIXEL_MRAD = 0.05


def _check_demo_folder(out_dir: str, overwrite: bool) -> None:
    """Refuse a folder that holds any file the demo writes, but with ``--overwrite`` where
    those are an earlier demo's (its ``results.zarr`` store is there): never a user's."""
    from ltdask.store import ZARR_ROOT_FILES

    taken = [n for n in DEMO_FILES if os.path.lexists(os.path.join(out_dir, n))]
    if not taken:
        return
    store = os.path.join(out_dir, "results.zarr")
    earlier_demo = any(os.path.isfile(os.path.join(store, n)) for n in ZARR_ROOT_FILES)
    if not earlier_demo:
        raise click.BadParameter(
            f"{out_dir!r} already holds {', '.join(taken)}, which the demo would overwrite; "
            "choose another folder",
            param_hint="--out",
        )
    if not overwrite:
        raise click.BadParameter(
            f"{out_dir!r} holds an earlier demo's {', '.join(taken)}; pass --overwrite to "
            "replace them, or choose another folder",
            param_hint="--out",
        )


@contextlib.contextmanager
def _cleaned_up(out_dir: str, created_folder: bool):
    """A scratch folder inside `out_dir`, removed when the demo ends; if the demo fails, the
    outputs it made (files that were not there before; `out_dir` itself if it made it) go
    too. Nothing else is deleted."""
    before = set(os.listdir(out_dir))
    scratch = tempfile.mkdtemp(prefix=".ltdask-demo-scratch-", dir=out_dir)
    try:
        yield scratch
    except BaseException:
        if created_folder:
            shutil.rmtree(out_dir, ignore_errors=True)
        else:
            for name in set(DEMO_FILES) - before:
                path = os.path.join(out_dir, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                elif os.path.lexists(path):
                    os.remove(path)
        raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _draw(out_dir: str, store: str) -> list[str]:
    """The PNGs of the results in `store` (with `ltdask.plot`); their paths."""
    import xarray as xr

    from ltdask.views import plot

    vd = xr.open_zarr(store, group="virtual_detectors")["intensity"].compute()
    com = xr.open_zarr(store, group="com").compute()
    std = xr.open_zarr(store, group="stddev").compute()
    div = com["divergence"]
    span = float(abs(div).max()) or 1.0
    draw = {
        "bright_field.png": lambda ax: plot.virtual_image(vd.isel(mask=0), ax),
        "dark_field.png": lambda ax: plot.virtual_image(vd.isel(mask=1), ax),
        "com_field.png": lambda ax: plot.com_field(com, ax),
        "com_magnitude.png": lambda ax: plot.virtual_image(com["magnitude"], ax, cmap="magma"),
        "divergence.png": lambda ax: plot.virtual_image(
            div, ax, cmap="RdBu_r", vmin=-span, vmax=span
        ),
        "stddev.png": lambda ax: plot.virtual_image(std["std"], ax, cmap="viridis"),
        "mean_frame.png": lambda ax: plot.virtual_image(std["mean"], ax, norm="log"),
    }
    return [
        save_picture(os.path.join(out_dir, name), draw[name], title)
        for name, title in PICTURES.items()
    ]


@click.command()
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="folder for the results (default: a new temporary folder)",
)
@click.option("--nav", default="64,64", show_default=True, callback=lambda c, p, v: parse_shape(v))
@click.option(
    "--sig", default="128,128", show_default=True, callback=lambda c, p, v: parse_shape(v)
)
@click.option("--overwrite", is_flag=True, help="replace the results of an earlier demo in --out")
@click.option(
    "--progress/--no-progress",
    default=None,
    help="A bar of the partitions done (default: once a run takes a few seconds, in a terminal).",
)
@click.pass_context
def demo(ctx, out_dir, nav, sig, overwrite, progress):
    """Write a synthetic scan to a scratch file; run virtual bright/dark field, centre of
    mass and standard deviation on it in one pass; write the results to Zarr and PNG
    pictures. The scratch file is removed at the end."""
    import ltdask
    from ltdask import masks
    from ltdask.udf import ApplyMasksUDF, CoMUDF, StdDevUDF

    for option, shape in (("--nav", nav), ("--sig", sig)):
        if len(shape) != 2 or min(shape) < 1:
            raise click.BadParameter(
                f"{','.join(map(str, shape))!r}: expected two sizes >= 1, such as 64,64",
                param_hint=option,
            )
    created_folder = out_dir is None or not os.path.exists(out_dir)
    out_dir = out_dir or tempfile.mkdtemp(prefix="ltdask-demo-")
    if not created_folder:
        _check_demo_folder(out_dir, overwrite)
    os.makedirs(out_dir, exist_ok=True)
    with _cleaned_up(out_dir, created_folder) as scratch:
        scan_path = os.path.join(scratch, "scan.raw")
        data, _ = synthetic_scan(nav, sig, progress=progress)
        data.tofile(scan_path)
        mb = data.nbytes / 2**20
        sy, sx = sig
        click.echo(
            f"synthetic scan: nav {nav}, sig {sig}, uint16, {mb:.0f} MiB, in a scratch file "
            f"removed at the end (a disk that moves and dims across the scan; {NAV_STEP_NM} "
            f"nm a scan step, {DETECTOR_PIXEL_MRAD} mrad a detector pixel)"
        )
        del data
        ds = ltdask.open_raw(
            scan_path,
            nav_shape=nav,
            sig_shape=sig,
            dtype="uint16",
            nav_calibration=(NAV_STEP_NM, "nm"),
            # angles from the frame's centre, where the undeflected disk sits
            sig_calibration=[
                (DETECTOR_PIXEL_MRAD, -DETECTOR_PIXEL_MRAD * size / 2, "mrad") for size in sig
            ],
        )
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
        com = CoMUDF.with_params(cy=sy / 2, cx=sx / 2, r=r * 2, physical_units=True)
        std = StdDevUDF()
        t0 = time.perf_counter()
        store = os.path.join(out_dir, "results.zarr")
        with run_context(ctx):
            lazy = ltdask.lazy(ds, [bf, com, std])
            ltdask.to_zarr(
                dict(zip(("virtual_detectors", "com", "stddev"), lazy, strict=True)),
                store,
                mode="w",
                progress=progress,
            )
        elapsed = time.perf_counter() - t0
        click.echo(
            f"ran virtual bright/dark field, CoM and StdDev in one pass: {elapsed:.2f} s "
            f"({mb / elapsed:.0f} MiB/s, {len(ds.get_partitions())} partitions)"
        )
        click.echo(f"wrote {store} (groups virtual_detectors, com, stddev)")
        for path in _draw(out_dir, store):
            click.echo(f"wrote {path}")


__all__ = ["DEMO_FILES", "demo", "field_colours", "synthetic_scan"]
