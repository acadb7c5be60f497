"""open_npy: np.save files read back through the raw read path."""

from __future__ import annotations

import numpy as np
import pytest
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
