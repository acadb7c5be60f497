"""The ``ltdask`` xarray engine: lazily indexed arrays with named dims for every format (numpy
on access with ``chunks=None``, dask with ``chunks={}``)."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr
from helpers.formatfiles import FILE_FORMAT_PARAMS, make_data, write_npy, write_raw_csr, write_zarr

import ltdask
from ltdask.io.xarray_backend import LtdaskBackendEntrypoint

DIMS = ("scan_y", "scan_x", "det_y", "det_x")


def test_engine_is_registered():
    assert "ltdask" in xr.backends.list_engines()
    assert isinstance(xr.backends.list_engines()["ltdask"], LtdaskBackendEntrypoint)


@pytest.mark.parametrize("fmt", FILE_FORMAT_PARAMS)
def test_every_format(fmt, tmp_path):
    data = fmt.data()
    target, kwargs = fmt.write_to(tmp_path, data)
    kwargs = {k: tuple(v) if isinstance(v, tuple) else v for k, v in kwargs.items()}
    result = xr.open_dataset(target, engine="ltdask", **kwargs)
    var = result["data"]
    assert var.dims == DIMS and var.shape == data.shape
    assert var.dtype == data.dtype.newbyteorder("=")
    assert var.chunks is None  # chunks=None: numpy, read on access
    np.testing.assert_array_equal(var[1, 2:5, :, 3].values, data[1, 2:5, :, 3])
    np.testing.assert_array_equal(var.values, data)
    # chunks={}: dask, and dask's reductions over named dims
    arr = xr.open_dataarray(target, engine="ltdask", chunks={}, **kwargs)
    assert isinstance(arr.data, da.Array)
    sums = arr.astype("float64").sum(dim=("det_y", "det_x")).compute()
    np.testing.assert_allclose(sums.values, data.astype("float64").sum(axis=(2, 3)))


def test_reads_only_what_is_selected(tmp_path, monkeypatch):
    """chunks=None (xarray's default): opening reads nothing; a selection reads its part."""
    from ltdask.io import xarray_backend

    data = make_data("<f4", nav=(6, 8), sig=(9, 11))
    path, _ = write_npy(tmp_path, data)
    reads = []
    real = xarray_backend.ScanBackendArray._read

    def spy(self, key):
        out = real(self, key)
        reads.append(out.shape)
        return out

    monkeypatch.setattr(xarray_backend.ScanBackendArray, "_read", spy)
    var = xr.open_dataset(path, engine="ltdask")["data"]
    assert reads == []
    np.testing.assert_array_equal(var.isel(scan_y=[1, 4], det_x=3).values, data[[1, 4], :, :, 3])
    assert reads == [(2, 8, 9)]
    np.testing.assert_array_equal(var[5, 7].values, data[5, 7])
    assert reads[-1] == (9, 11)


def test_chunks_keep_the_native_ones(tmp_path):
    data = make_data("<u2", nav=(6, 8), sig=(9, 11))
    path, kw = write_zarr(tmp_path, data, chunks=(2, 4, 9, 11))
    native = ltdask.open_zarr(path, **kw).to_dask().chunks
    assert xr.open_dataset(path, engine="ltdask", chunks={}, **kw)["data"].data.chunks == native
    encoding = xr.open_dataset(path, engine="ltdask", **kw)["data"].encoding
    assert encoding["preferred_chunks"] == dict(zip(DIMS, native, strict=True))
    with pytest.warns(UserWarning, match="separate the stored chunks"):
        rechunked = xr.open_dataset(path, engine="ltdask", chunks={"scan_y": 3}, **kw)["data"]
    assert rechunked.data.chunks[0] == (3, 3)
    np.testing.assert_array_equal(rechunked.values, data)


def test_keywords(tmp_path):
    data = make_data("<f4", nav=(4, 6), sig=(5, 7))
    path, _ = write_npy(tmp_path, data)
    result = xr.open_dataset(
        path, engine="ltdask", dims=("y", "x", "ky", "kx"), read_dtype="float64", sync_offset=1
    )
    var = result["data"]
    assert var.dims == ("y", "x", "ky", "kx") and var.dtype == np.float64
    expected = np.zeros((24, 5, 7))
    expected[:-1] = data.reshape(24, 5, 7)[1:]
    np.testing.assert_array_equal(var.values, expected.reshape(4, 6, 5, 7))
    assert result.attrs["sync_offset"] == 1 and result.attrs["ltdask_dataset"] == "NpyDataSet"
    assert list(xr.open_dataset(path, engine="ltdask", drop_variables="data").data_vars) == []


def test_guess_can_open(tmp_path):
    engine = LtdaskBackendEntrypoint()
    data = make_data("<u2", nav=(2, 3), sig=(4, 5))
    npy, _ = write_npy(tmp_path, data)
    toml, _ = write_raw_csr(tmp_path, data)
    other = tmp_path / "other.toml"
    other.write_text("[tool]\nname = 'x'\n")
    assert engine.guess_can_open(npy) and engine.guess_can_open(str(toml))
    assert engine.guess_can_open("scan.mib")
    assert not engine.guess_can_open(other)
    assert not engine.guess_can_open("scan.h5") and not engine.guess_can_open("scan.zarr")
    # no engine= needed for what it claims
    np.testing.assert_array_equal(xr.open_dataarray(npy).values, data)
