"""`ScanArray`: sums and means of ``to_dask()`` by ltdask's kernels, against numpy."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from helpers.formatfiles import write_raw
from hypothesis import given, settings
from hypothesis import strategies as st

import ltdask
from ltdask.io.scan_array import ScanArray
from ltdask.kernels import statistics

INT_DTYPES = ["uint8", "uint16", "uint32", "int8", "int16", "int32"]
#: the reductions of a (nav, nav, sig, sig) array: per pixel, per frame, whole, and axes
#: the kernels do not take (numpy's sums)
AXES = [(0, 1), (2, 3), None, (0, 1, 2, 3), 0, (1, 2, 3), (3,), (1, 2), -1, (0, 2)]
RESULT_DTYPES = [None, "float32", "float64", "int16", "uint8", "int64"]


@pytest.fixture
def kernel_calls(monkeypatch):
    """How often the per-pixel and the per-frame kernel ran (they still run)."""
    calls = {"frames": 0, "pixels": 0}

    def counted(name, fn):
        def wrapper(*args):
            calls[name] += 1
            return fn(*args)

        return wrapper

    monkeypatch.setattr(statistics, "sum_frames", counted("frames", statistics.sum_frames))
    monkeypatch.setattr(statistics, "sum_pixels", counted("pixels", statistics.sum_pixels))
    return calls


def _raw(folder, data):
    path, kwargs = write_raw(folder, data)
    return ltdask.open_raw(path, **kwargs)


def _reference(data, axis, dtype):
    """numpy's sum, from exact 64-bit sums (numpy's own float32 sums of integers round at
    every step)."""
    wide = np.int64 if data.dtype != np.uint32 else np.uint64
    exact = data.astype(wide).sum(axis=axis)
    return np.asarray(exact).astype(dtype or np.zeros(1, data.dtype).sum().dtype)


@settings(max_examples=40, deadline=None)
@given(
    dtype=st.sampled_from(INT_DTYPES),
    nav=st.tuples(st.integers(1, 6), st.integers(1, 7)),
    sig=st.tuples(st.integers(1, 9), st.integers(1, 8)),
    axis=st.sampled_from(AXES),
    result_dtype=st.sampled_from(RESULT_DTYPES),
    seed=st.integers(0, 2**16),
    frames_per_chunk=st.integers(1, 11),
)
def test_sums_equal_numpy(
    tmp_path_factory, dtype, nav, sig, axis, result_dtype, seed, frames_per_chunk
):
    info = np.iinfo(dtype)
    # (sums exact in float32: any order of adding gives the same result)
    low, high = max(int(info.min), -100), min(int(info.max), 255)
    data = np.random.default_rng(seed).integers(low, high, (*nav, *sig), dtype=dtype)
    ds = _raw(tmp_path_factory.mktemp("scan"), data)
    rows = max(1, frames_per_chunk // nav[1])
    for arr in (ds.to_dask(), ds.to_dask(chunks=(rows, -1, -1, -1))):
        got = arr.sum(axis=axis, dtype=result_dtype)
        want = _reference(data, axis, result_dtype)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.compute(), want)
        np.testing.assert_array_equal(np.sum(arr, axis=axis, dtype=result_dtype).compute(), want)
        np.testing.assert_allclose(arr.mean(axis=axis).compute(), data.mean(axis=axis))


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_kernels_sum_views_of_the_file(tmp_path, dtype, kernel_calls):
    data = np.random.default_rng(1).integers(0, 100, (5, 3, 6, 7), dtype=dtype)
    arr = _raw(tmp_path, data).to_dask(chunks=(2, 3, 6, 7))
    np.testing.assert_array_equal(arr.sum(axis=(0, 1)).compute(), data.sum(axis=(0, 1)))
    assert kernel_calls == {"frames": 3, "pixels": 0}  # one call per chunk
    np.testing.assert_array_equal(arr.sum(axis=(2, 3)).compute(), data.sum(axis=(2, 3)))
    np.testing.assert_array_equal(arr.sum().compute(), data.sum())
    assert kernel_calls == {"frames": 3, "pixels": 6}


@pytest.mark.parametrize("dtype", ["uint16", "int8", "float32"])
def test_ltdask_sum_and_mean_take_any_dask_array(tmp_path, dtype, kernel_calls):
    # the route to the kernels that needs no ScanArray: what dask's array-expr engine has
    data = np.random.default_rng(11).integers(0, 100, (4, 3, 5, 6)).astype(dtype)
    arr = da.asarray(_raw(tmp_path, data).to_dask(chunks=(2, 3, 5, 6)))
    wide = data.astype(np.float64)
    for axis in ((0, 1), (2, 3), None):
        got = ltdask.sum(arr, axis=axis)
        assert got.dtype == data.sum(axis=axis).dtype
        np.testing.assert_allclose(got.compute(), wide.sum(axis=axis), rtol=1e-6)
        np.testing.assert_allclose(ltdask.mean(arr, axis=axis).compute(), wide.mean(axis=axis))
    assert kernel_calls["frames"] >= 2 and kernel_calls["pixels"] >= 2
    keep = ltdask.sum(arr, axis=(2, 3), dtype="float64", keepdims=True).compute()
    np.testing.assert_array_equal(keep, wide.sum(axis=(2, 3), keepdims=True))


def test_kernels_sum_blocks_of_large_frames(tmp_path, kernel_calls, monkeypatch):
    from ltdask.io import scan_array

    monkeypatch.setattr(scan_array, "SUM_BLOCK", 10)
    data = np.random.default_rng(2).integers(0, 2**16, (2, 3, 5, 7), dtype=np.uint16)
    arr = _raw(tmp_path, data).to_dask(chunks=data.shape)
    np.testing.assert_array_equal(arr.sum(axis=(0, 1), dtype="float64"), data.sum(axis=(0, 1)))
    assert kernel_calls["frames"] == 4  # 35 pixels in blocks of 10


@settings(max_examples=25, deadline=None)
@given(
    dtype=st.sampled_from(["float32", "float64"]),
    nav=st.tuples(st.integers(1, 5), st.integers(1, 6)),
    sig=st.tuples(st.integers(1, 9), st.integers(1, 8)),
    axis=st.sampled_from(AXES),
    result_dtype=st.sampled_from([None, "float32", "float64"]),
    seed=st.integers(0, 2**16),
    special=st.sampled_from([None, np.nan, np.inf, -np.inf]),
)
def test_float_sums_equal_numpy(
    tmp_path_factory, dtype, nav, sig, axis, result_dtype, seed, special
):
    rng = np.random.default_rng(seed)
    data = rng.normal(100, 30, (*nav, *sig)).astype(dtype)
    if special is not None:  # (NaN and infinities go through the sums as through numpy's)
        data[tuple(rng.integers(0, s) for s in data.shape)] = special
    arr = _raw(tmp_path_factory.mktemp("scan"), data).to_dask()
    got = arr.sum(axis=axis, dtype=result_dtype)
    want = data.astype(np.float64).sum(axis=axis).astype(result_dtype or dtype)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got.compute(), want, rtol=1e-5 if "32" in str(got.dtype) else 1e-12)


def test_float_sums_use_the_kernels(tmp_path, kernel_calls):
    data = np.random.default_rng(8).normal(size=(4, 3, 5, 6)).astype(np.float32)
    arr = _raw(tmp_path, data).to_dask(chunks=(2, 3, 5, 6))
    np.testing.assert_allclose(arr.sum(axis=(0, 1)).compute(), data.sum(axis=(0, 1)), rtol=1e-5)
    np.testing.assert_allclose(arr.sum(axis=(2, 3)).compute(), data.sum(axis=(2, 3)), rtol=1e-5)
    assert kernel_calls == {"frames": 2, "pixels": 2}


def test_other_reductions_are_numpys(tmp_path, kernel_calls):
    data = np.random.default_rng(3).integers(0, 100, (4, 3, 5, 6), dtype=np.uint16)
    ints = _raw(tmp_path, data).to_dask()
    floats = ltdask.from_array(data.astype(np.float32)).to_dask()
    halves = ltdask.from_array(data.astype(np.float16)).to_dask()
    np.testing.assert_array_equal(ints.sum(axis=(0, 2)).compute(), data.sum(axis=(0, 2)))
    # (float32 frames summed per pixel into float64: each converted first, as numpy does)
    got = floats.sum(axis=(0, 1), dtype="float64").compute()
    np.testing.assert_array_equal(got, data.sum(axis=(0, 1)))
    np.testing.assert_array_equal(halves.sum(axis=(0, 1)).compute(), data.sum(axis=(0, 1)))
    np.testing.assert_array_equal(ints.sum(axis=(0, 1), dtype=bool).compute(), data.any((0, 1)))
    np.testing.assert_array_equal(np.mean(ints, axis=(1, 3)), data.mean(axis=(1, 3)))
    assert kernel_calls == {"frames": 0, "pixels": 0}


def test_sums_of_big_endian_and_decoded_scans(tmp_path):
    data = np.random.default_rng(4).integers(0, 2**16, (3, 4, 5, 6), dtype=np.uint16)
    ds = _raw(tmp_path, data.astype(">u2"))
    got = ds.to_dask().sum(axis=(0, 1), dtype="float64").compute()
    np.testing.assert_array_equal(got, data.sum(axis=(0, 1)))
    arr = ds.to_dask(dtype="int32")
    np.testing.assert_array_equal(arr.sum(axis=(2, 3)).compute(), data.sum(axis=(2, 3)))


def test_one_frame_and_keepdims(tmp_path):
    data = np.arange(30, dtype=np.uint16).reshape(1, 1, 5, 6)
    arr = _raw(tmp_path, data).to_dask()
    for axis in ((0, 1), (2, 3), None):
        got = arr.sum(axis=axis, keepdims=True)
        assert got.shape == data.sum(axis=axis, keepdims=True).shape
        np.testing.assert_array_equal(got.compute(), data.sum(axis=axis, keepdims=True))
        np.testing.assert_array_equal(
            arr.mean(axis=axis, keepdims=True).compute(), data.mean(axis=axis, keepdims=True)
        )


def test_derived_arrays(tmp_path):
    data = np.random.default_rng(5).integers(0, 100, (4, 3, 5, 6), dtype=np.uint16)
    arr = _raw(tmp_path, data).to_dask()
    assert isinstance(arr, ScanArray)
    for derived in (arr[1:3], arr.rechunk((1, 3, 5, 6)), arr.persist()):
        assert isinstance(derived, ScanArray)
    # anything else is dask's own array
    assert type(arr + 1) is da.Array and type(arr.astype("float32")) is da.Array
    part = arr[1:3, :, 2:].sum(axis=(0, 1)).compute()
    np.testing.assert_array_equal(part, data[1:3, :, 2:].sum((0, 1)))
    out = da.zeros((5, 6), dtype=np.uint64, chunks=-1)
    arr.sum(axis=(0, 1), out=out)
    np.testing.assert_array_equal(out.compute(), data.sum(axis=(0, 1)))


def test_xarray_sums_use_the_kernels(tmp_path, kernel_calls):
    data = np.random.default_rng(6).integers(0, 100, (4, 3, 5, 6), dtype=np.uint16)
    xarr = _raw(tmp_path, data).to_xarray()
    got = xarr.sum(dim=xarr.dims[:2])
    np.testing.assert_array_equal(got.values, data.sum(axis=(0, 1)))
    np.testing.assert_allclose(xarr.mean(dim=xarr.dims[2:]).values, data.mean(axis=(2, 3)))
    assert kernel_calls["frames"] >= 1 and kernel_calls["pixels"] >= 1


def test_corrected_scans_are_scan_arrays(tmp_path):
    data = np.random.default_rng(7).integers(0, 100, (2, 3, 5, 6), dtype=np.uint16)
    dark = np.full((5, 6), 1.5, dtype=np.float32)
    arr = _raw(tmp_path, data).to_dask(corrections=ltdask.CorrectionSet(dark=dark))
    assert isinstance(arr, ScanArray)
    np.testing.assert_allclose(arr.sum(axis=(0, 1)).compute(), data.sum(axis=(0, 1)) - 6 * 1.5)


@pytest.mark.parametrize(
    "native, dtype, from_natives",
    [
        ("uint16", "float32", True),
        ("uint8", "float64", True),
        ("int16", "int32", True),
        ("float32", "float64", True),
        ("uint32", "float32", False),  # (float32 does not hold every uint32)
        ("uint16", "float16", False),
        ("uint16", "uint16", False),
    ],
)
def test_sums_of_converted_frames_from_the_natives(tmp_path, native, dtype, from_natives):
    data = np.random.default_rng(9).integers(0, 250, (4, 3, 5, 6)).astype(native)
    arr = _raw(tmp_path, data).to_dask(dtype=dtype)
    assert (arr.sums_from is not None) == from_natives
    converted = data.astype(dtype).astype(np.float64)
    rtol = 1e-2 if dtype == "float16" else 1e-6  # (float16 sums round as they go)
    for axis in ((0, 1), (2, 3), None, (1, 3)):
        got = arr.sum(axis=axis)
        assert got.dtype == np.zeros(1, dtype).sum().dtype
        np.testing.assert_allclose(got.compute(), converted.sum(axis=axis), rtol=rtol)
        mean = arr.mean(axis=axis)
        assert mean.dtype == np.mean(np.zeros(1, dtype)).dtype
        np.testing.assert_allclose(mean.compute(), converted.mean(axis=axis), rtol=1e-3)
    # (a slice of it sums its own chunks)
    part = arr[1:, :, 2:]
    assert part.sums_from is None
    np.testing.assert_allclose(part.sum(axis=(0, 1)).compute(), converted[1:, :, 2:].sum((0, 1)))


def test_sums_of_float32_frames_of_integers_run_the_integer_kernels(tmp_path, kernel_calls):
    data = np.random.default_rng(10).integers(0, 2**16, (4, 3, 5, 6), dtype=np.uint16)
    arr = _raw(tmp_path, data).to_dask(dtype="float32", chunks=(2, 3, 5, 6))
    np.testing.assert_array_equal(arr.sum(axis=(0, 1), dtype="float64"), data.sum(axis=(0, 1)))
    # (float32 frames summed per pixel into float64 would be numpy's: the natives were read)
    assert kernel_calls["frames"] >= 1


BAD_AXES = [4, -5, (0, 4), (0, -4), (-5, 2), 1.0, (0, 1.5)]


@pytest.mark.parametrize("axis", BAD_AXES, ids=repr)
@pytest.mark.parametrize("dtype", ["uint16", "float32", "uint16-as-float32"])
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_bad_axes_raise_as_numpy(tmp_path, axis, dtype, reduction):
    # a remainder took axis 4 (and -5) of a 4-D integer scan for axis 0: mean(axis=4)
    # was mean(axis=0)
    native, _, converted = dtype.partition("-as-")
    data = np.arange(2 * 3 * 4 * 5, dtype=native).reshape(2, 3, 4, 5)
    arr = _raw(tmp_path, data).to_dask(dtype=converted or None)
    with pytest.raises(Exception) as numpy_error:
        getattr(data, reduction)(axis=axis)
    with pytest.raises(type(numpy_error.value)):
        getattr(arr, reduction)(axis=axis).compute()
    with pytest.raises(type(numpy_error.value)):
        getattr(np, reduction)(arr, axis=axis).compute()


@pytest.mark.parametrize("dtype", ["float32", "uint16"])
def test_the_same_sum_by_every_route(tmp_path, dtype):
    """Every way a user sums ``to_dask()`` over the same chunks gives the same bits (float32
    sums round by the order of their additions): the method, numpy's and dask's functions,
    ``ltdask.sum``, xarray's, a persisted or pickled copy, dask's ``nansum``; and equals
    numpy's float64 sum to float32 rounding."""
    import pickle

    rng = np.random.default_rng(9)
    data = (rng.random((8, 9, 17, 19)) * 1000).astype(dtype)
    ds = _raw(tmp_path, data)
    arr = ds.to_dask()
    axes = (0, 1)
    routes = {
        "method": lambda: arr.sum(axis=axes, dtype=np.float32),
        "numpy": lambda: np.sum(arr, axis=axes, dtype=np.float32),
        "dask": lambda: da.sum(arr, axis=axes, dtype=np.float32),
        "ltdask": lambda: ltdask.sum(arr, axis=axes, dtype=np.float32),
        "persisted": lambda: arr.persist().sum(axis=axes, dtype=np.float32),
        "pickled": lambda: pickle.loads(pickle.dumps(arr)).sum(axis=axes, dtype=np.float32),
        "nansum": lambda: da.nansum(arr, axis=axes, dtype=np.float32),
        "xarray": lambda: ds.to_xarray().sum(dim=ds.dims[:2], dtype=np.float32).data,
    }
    got = {name: np.asarray(route().compute()) for name, route in routes.items()}
    first = got["method"]
    assert {name for name, v in got.items() if not np.array_equal(v, first)} == set()
    np.testing.assert_allclose(first, data.astype(np.float64).sum(axis=axes), rtol=1e-5)
