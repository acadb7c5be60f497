"""open_npy: np.save files read back through the raw read path."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from helpers.rawfiles import expected_scan

import ltdask

CASES = [
    pytest.param((7, 6, 5), 1, "<f4", ("scan_y", "scan_x", "sig_0"), id="sig1d-f32"),
    pytest.param((3, 5, 6, 4), 2, "<u2", ("scan_y", "scan_x", "det_y", "det_x"), id="sig2d-u16"),
    pytest.param((5, 3, 4, 2), 3, "<f8", ("frame", "sig_0", "sig_1", "sig_2"), id="sig3d-f64"),
    pytest.param(
        (2, 3, 4, 5, 6), 2, ">i2", ("nav_0", "nav_1", "nav_2", "det_y", "det_x"), id="nav3d-i16-be"
    ),
    pytest.param(
        (4, 4, 3, 3), 2, ">c8", ("scan_y", "scan_x", "det_y", "det_x"), id="c64-bigendian"
    ),
    pytest.param((1, 8, 8), 2, "u1", ("frame", "det_y", "det_x"), id="one-frame-u8"),
]


def random_array(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    return rng.integers(0, 100, size=shape).astype(dt)


@pytest.mark.parametrize("shape, sig_dims, dtype, dims", CASES)
def test_open_npy(tmp_path, small_partitions, shape, sig_dims, dtype, dims):
    data = random_array(shape, dtype)
    path = tmp_path / "scan.npy"
    np.save(path, data)
    ds = ltdask.open_npy(path, sig_dims=sig_dims)
    native = np.dtype(dtype).newbyteorder("=")
    assert ds.nav_shape == shape[:-sig_dims]
    assert ds.sig_shape == shape[-sig_dims:]
    assert ds.dtype == native
    assert ds.to_xarray().dims == dims
    reference = np.load(path)
    np.testing.assert_array_equal(ds.to_dask().compute(), reference)
    target = "complex128" if native.kind == "c" else "float32"
    np.testing.assert_array_equal(ds.to_dask(dtype=target).compute(), reference.astype(target))
    np.testing.assert_array_equal(ds.to_dask(chunks=1).compute(), reference)


@pytest.mark.parametrize("sync_offset", [-3, 0, 2])
def test_open_npy_sync_offset(tmp_path, small_partitions, sync_offset):
    data = random_array((4, 5, 3, 3), "<f4")
    path = tmp_path / "scan.npy"
    np.save(path, data)
    ds = ltdask.open_npy(path, sync_offset=sync_offset)
    stream = np.load(path).reshape(20, 3, 3)
    expected, valid = expected_scan(stream, (4, 5), sync_offset)
    np.testing.assert_array_equal(ds.valid_nav_mask(), valid)
    np.testing.assert_array_equal(ds.to_dask().compute(), expected)


def test_open_npy_version_2_header(tmp_path):
    data = random_array((3, 4, 5), "<u2")
    path = tmp_path / "v2.npy"
    with open(path, "wb") as f:
        np.lib.format.write_array(f, data, version=(2, 0))
    ds = ltdask.open_npy(path, sig_dims=1)
    np.testing.assert_array_equal(ds.to_dask().compute(), data)


def test_open_npy_custom_dims(tmp_path):
    path = tmp_path / "scan.npy"
    np.save(path, random_array((3, 4, 5), "<u2"))
    ds = ltdask.open_npy(path, sig_dims=1, dims=("y", "x", "energy"))
    assert ds.to_xarray().dims == ("y", "x", "energy")


# -- nav_shape / sig_shape (LiberTEM's npy reader) ----------------------------------------------
def test_open_npy_flat_stack_as_scan(tmp_path, small_partitions):
    data = random_array((12, 4, 5), "<u2")
    path = tmp_path / "stack.npy"
    np.save(path, data)
    ds = ltdask.open_npy(path, nav_shape=(3, 4))
    assert (ds.nav_shape, ds.sig_shape) == ((3, 4), (4, 5))
    np.testing.assert_array_equal(ds.to_dask().compute(), data.reshape(3, 4, 4, 5))
    # the same through ltdask.open (the keywords pass to open_npy)
    np.testing.assert_array_equal(
        ltdask.open(path, nav_shape=(4, 3)).to_dask().compute(), data.reshape(4, 3, 4, 5)
    )


@pytest.mark.parametrize(
    ("shape", "kwargs", "nav", "sig"),
    [
        pytest.param((6, 20), dict(sig_shape=(4, 5)), (6,), (4, 5), id="rows-as-frames"),
        pytest.param((2, 3, 4, 5), dict(sig_shape=(4, 5)), (2, 3), (4, 5), id="same-sig"),
        pytest.param((2, 3, 4, 5), dict(sig_shape=(20,)), (2, 3), (20,), id="flat-sig"),
        pytest.param((2, 3, 4, 5), dict(sig_shape=(2, 5)), (12,), (2, 5), id="half-frames"),
        pytest.param((2, 3, 4, 5), dict(nav_shape=(6,), sig_shape=(4, 5)), (6,), (4, 5), id="both"),
    ],
)
def test_open_npy_sig_shape_over_values(tmp_path, shape, kwargs, nav, sig):
    data = random_array(shape, "<f4")
    path = tmp_path / "scan.npy"
    np.save(path, data)
    ds = ltdask.open_npy(path, **kwargs)
    assert (ds.nav_shape, ds.sig_shape) == (nav, sig)
    np.testing.assert_array_equal(ds.to_dask().compute(), data.reshape(*nav, *sig))


@pytest.mark.parametrize("nav", [(2, 2), (4, 4)], ids=["fewer-positions", "more-positions"])
def test_open_npy_nav_shape_other_than_frames(tmp_path, nav):
    data = random_array((3, 3, 4, 4), "<f4")
    path = tmp_path / "scan.npy"
    np.save(path, data)
    stream = data.reshape(9, 4, 4)
    expected, valid = expected_scan(stream, nav, 0)
    if np.prod(nav) > 9:
        with pytest.warns(ltdask.MissingFramesWarning):
            ds = ltdask.open_npy(path, nav_shape=nav)
    else:
        ds = ltdask.open_npy(path, nav_shape=nav)
    np.testing.assert_array_equal(ds.valid_nav_mask(), valid)
    np.testing.assert_array_equal(ds.to_dask().compute(), expected)


def test_npy_detect_params_as_libertem(tmp_path):
    from ltdask.io.formats.npy import NpyDataSet

    path = tmp_path / "scan.npy"
    np.save(path, random_array((2, 3, 4, 5), "<u2"))
    assert NpyDataSet.detect_params(str(path), executor=None) == {
        "parameters": {"path": str(path), "nav_shape": (2, 3), "sig_shape": (4, 5)},
        "info": {"image_count": 6, "native_sig_shape": (4, 5)},
    }
    (tmp_path / "bad.npy").write_bytes(b"not an npy file")
    assert NpyDataSet.detect_params(str(tmp_path / "bad.npy")) is False


def test_cli_nav_shape_on_npy(tmp_path):
    import subprocess
    import sys

    data = random_array((12, 4, 5), "<u2")
    np.save(tmp_path / "stack.npy", data)
    out = tmp_path / "sum.zarr"
    args = [sys.executable, "-m", "ltdask.cli"]
    env = {**__import__("os").environ, "PYTHONPATH": str(Path(ltdask.__file__).parents[1])}
    info = subprocess.run(
        [*args, "info", "stack.npy", "--nav-shape", "3,4"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    assert re.search(r"nav shape\s+\(3, 4\)", info), info
    subprocess.run(
        [*args, "run", "sumsig", "stack.npy", "--nav-shape", "3,4", "--out", str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    result = xr.open_zarr(out)
    np.testing.assert_array_equal(
        result["intensity"].values, data.reshape(3, 4, 20).astype(np.float64).sum(axis=-1)
    )
