"""The ``ltdask`` command."""

from __future__ import annotations

import os
import tempfile
import time

import click
import numpy as np


@click.group()
@click.version_option(package_name="ltdask")
def main():
    """ltdask: 4D-STEM datasets and UDFs on dask."""


def synthetic_scan(nav_shape=(64, 64), sig_shape=(128, 128), seed=0) -> np.ndarray:
    """A diffraction disk whose position and intensity vary across the scan, with Poisson
    noise (uint16)."""
    rng = np.random.default_rng(seed)
    ny, nx = nav_shape
    sy, sx = sig_shape
    yy, xx = np.mgrid[:ny, :nx]
    shift_y = 4 * np.sin(2 * np.pi * xx / nx)
    shift_x = 4 * np.cos(2 * np.pi * yy / ny)
    intensity = 200 + 100 * np.exp(-((yy - ny / 2) ** 2 + (xx - nx / 2) ** 2) / (ny * nx / 8))
    dy, dx = np.mgrid[:sy, :sx]
    out = np.empty((ny, nx, sy, sx), dtype=np.uint16)
    radius = min(sy, sx) / 8
    for y in range(ny):
        cy = sy / 2 + shift_y[y]
        cx = sx / 2 + shift_x[y]
        disk = (
            (dy[None] - cy[:, None, None]) ** 2 + (dx[None] - cx[:, None, None]) ** 2
        ) < radius**2
        lam = 1 + disk * intensity[y][:, None, None]
        out[y] = rng.poisson(lam)
    return out


@main.command()
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="folder for the scan (default: a new temporary folder)",
)
def demo(out_dir):
    """Write a synthetic scan, open it and compute a virtual bright field."""
    import ltdask

    out_dir = out_dir or tempfile.mkdtemp(prefix="ltdask-demo-")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "scan.raw")
    data = synthetic_scan()
    data.tofile(path)
    click.echo(f"wrote {path}: {data.shape} {data.dtype}, {data.nbytes / 2**20:.0f} MiB")
    t0 = time.perf_counter()
    ds = ltdask.open_raw(path, nav_shape=data.shape[:2], sig_shape=data.shape[2:], dtype="uint16")
    arr = ds.to_dask(dtype="float32")
    sy, sx = ds.sig_shape
    bright = arr[..., sy // 2 - 16 : sy // 2 + 16, sx // 2 - 16 : sx // 2 + 16].sum(axis=(2, 3))
    bright = bright.compute()
    elapsed = time.perf_counter() - t0
    np.save(os.path.join(out_dir, "bright_field.npy"), bright)
    click.echo(f"{ds!r}: {len(ds.get_partitions())} partitions")
    click.echo(
        f"virtual bright field in {elapsed:.2f} s: min {bright.min():.0f}, "
        f"max {bright.max():.0f}; saved to {out_dir}/bright_field.npy"
    )
