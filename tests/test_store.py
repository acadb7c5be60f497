"""Results and datasets to Zarr: round trips, atomic writes, chunk alignment."""

from __future__ import annotations

import os
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr

import ltdask
from ltdask.exceptions import LtdaskError
from ltdask.store import check_alignment, regular_chunks, zarr_aligned
from ltdask.udf import UDF, PickUDF, StdDevUDF, SumSigUDF, SumUDF


class RadialProfileUDF(UDF):
    """A per-frame vector result (nav buffer with an extra dim)."""

    def get_result_buffers(self):
        return {"profile": self.buffer(kind="nav", extra_shape=(self.meta.dataset_shape.sig[0],))}

    def process_frame(self, frame):
        self.results.profile[:] = frame.sum(axis=1)


class FailingUDF(UDF):
    def get_result_buffers(self):
        return {"x": self.buffer(kind="nav")}

    def process_frame(self, frame):
        raise RuntimeError("boom")


@pytest.fixture
def data():
    return np.random.default_rng(0).random((7, 6, 5, 4)).astype(np.float32)


@pytest.mark.parametrize("roi_kind", ["none", "random"])
def test_results_round_trip(data, tmp_path, small_partitions, roi_kind):
    ds = ltdask.from_array(data)
    roi = None if roi_kind == "none" else np.random.default_rng(1).random((7, 6)) < 0.5
    udfs = [SumUDF(), SumSigUDF(), StdDevUDF(), RadialProfileUDF(), PickUDF()]
    computed = ltdask.compute(ds, udfs, roi=roi)
    lazy = ltdask.lazy(ds, udfs, roi=roi)
    path = tmp_path / "results.zarr"
    ltdask.to_zarr(lazy, path)
    for res in computed:
        back = xr.open_zarr(path, group=res.attrs["udf"]).compute()
        xr.testing.assert_identical(back, res)
        for name in res.data_vars:
            assert back[f"{name}_valid"].dtype == bool


@pytest.mark.filterwarnings("ignore:Consolidated metadata:UserWarning")
def test_single_result_and_lazy_to_zarr_method(data, tmp_path, small_partitions):
    ds = ltdask.from_array(data)
    lazy = RadialProfileUDF().lazy(ds)
    path = tmp_path / "profile.zarr"
    ltdask.to_zarr(lazy, path)
    back = xr.open_zarr(path)
    # streamed: the store's chunks are the partitions
    assert back["profile"].encoding["chunks"][0] == ds.nav_chunks[0][0]
    np.testing.assert_allclose(back["profile"].values, data.sum(axis=3))
    # xarray's own to_zarr works on the lazy results too (regular chunks)
    lazy.to_zarr(tmp_path / "direct.zarr")
    xr.testing.assert_allclose(xr.open_zarr(tmp_path / "direct.zarr").compute(), lazy.compute())


def test_existing_store_is_kept(data, tmp_path):
    ds = ltdask.from_array(data)
    path = tmp_path / "res.zarr"
    ltdask.to_zarr(SumUDF().lazy(ds), path)
    before = sorted(os.listdir(path))
    with pytest.raises(FileExistsError, match="mode='w'"):
        ltdask.to_zarr(SumSigUDF().lazy(ds), path)
    assert sorted(os.listdir(path)) == before
    np.testing.assert_allclose(
        xr.open_zarr(path)["intensity"].values, data.sum(axis=(0, 1)), rtol=1e-6
    )
    ltdask.to_zarr(SumSigUDF().lazy(ds), path, mode="w")
    assert xr.open_zarr(path)["intensity"].dims == ("scan_y", "scan_x")
    assert [p for p in os.listdir(tmp_path) if p != "res.zarr"] == []


def test_failed_run_leaves_no_store(data, tmp_path):
    ds = ltdask.from_array(data)
    path = tmp_path / "fail.zarr"
    with pytest.raises(RuntimeError, match="boom"):
        ltdask.to_zarr(FailingUDF().lazy(ds), path)
    assert os.listdir(tmp_path) == []
    # and a failed replacement keeps the old store
    ltdask.to_zarr(SumUDF().lazy(ds), path)
    with pytest.raises(RuntimeError, match="boom"):
        ltdask.to_zarr(FailingUDF().lazy(ds), path, mode="w")
    np.testing.assert_allclose(
        xr.open_zarr(path)["intensity"].values, data.sum(axis=(0, 1)), rtol=1e-6
    )


def test_bad_mode(data, tmp_path):
    with pytest.raises(ValueError, match="mode="):
        ltdask.to_zarr(SumUDF().lazy(ltdask.from_array(data)), tmp_path / "x.zarr", mode="a")


def test_misaligned_chunks_are_caught_or_fixed():
    assert regular_chunks(((4, 4, 3), (5,)))
    assert not regular_chunks(((3, 4, 4), (5,)))
    with pytest.raises(LtdaskError, match="do not line up"):
        check_alignment(((3, 4, 4),), (4,))
    with pytest.raises(LtdaskError, match="do not line up"):
        check_alignment(((4, 4, 3),), (3,))
    x = da.arange(11, chunks=((3, 4, 4),))
    fixed, chunks = zarr_aligned(x)
    assert regular_chunks(fixed.chunks) and chunks == (4,)


def test_misaligned_result_chunks_written_correctly(tmp_path):
    """A result whose dask chunks are irregular is rechunked before writing, so the data
    is right (dask.array.to_zarr would silently corrupt it, dask issue 12583)."""
    values = np.arange(40, dtype=np.float64).reshape(10, 4)
    arr = da.from_array(values, chunks=((3, 4, 3), (4,)))
    res = xr.Dataset({"v": (("a", "b"), arr)})
    ltdask.to_zarr(res, tmp_path / "m.zarr")
    np.testing.assert_array_equal(xr.open_zarr(tmp_path / "m.zarr")["v"].values, values)


# -- a rechunk that copies much is announced --------------------------------------------------
@pytest.fixture
def partition_bytes_500():
    """A 500-byte partition: what counts as a costly copy for zarr_aligned."""
    with dask.config.set({"ltdask.partition-bytes": 500}):
        yield 500


def test_costly_rechunk_warns_what_and_how_to_avoid(partition_bytes_500):
    x = da.zeros((11, 6), chunks=((3, 4, 4), (6,)))  # 528 bytes: more than a partition
    with pytest.warns(ltdask.PerformanceWarning) as record:
        fixed, chunks = zarr_aligned(x, "the test array")
    assert chunks == (4, 6) and fixed.chunks == ((4, 4, 3), (6,))
    (warning,) = record
    message = str(warning.message)
    assert "the test array ((11, 6) float64, 528 B) is rechunked" in message
    assert "from chunks ((3, 4, 4), (6,)) to ((4, 4, 3), (6,))" in message
    assert "To avoid it, give it chunks of one size" in message
    assert ".rechunk((4, 6))" in message
    assert warning.filename == __file__  # the user's line, not ltdask's


@pytest.mark.parametrize(
    "chunks",
    [
        pytest.param(((4, 4, 3), (6,)), id="regular-last-smaller"),
        pytest.param(((11,), (6,)), id="single-chunk"),
        pytest.param(((4, 4, 3), (2, 2, 2)), id="regular-both-dims"),
    ],
)
def test_aligned_chunks_do_not_warn(chunks, partition_bytes_500):
    x = da.zeros((11, 6), chunks=chunks)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ltdask.PerformanceWarning)
        fixed, _ = zarr_aligned(x)
    assert fixed is x


def test_cheap_rechunk_does_not_warn():
    """Smaller than one partition (128 MiB by default): copied without a word."""
    x = da.zeros((11, 6), chunks=((3, 4, 4), (6,)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ltdask.PerformanceWarning)
        fixed, chunks = zarr_aligned(x)
    assert fixed.chunks == ((4, 4, 3), (6,))


def test_writers_name_what_they_rechunk(tmp_path, partition_bytes_500):
    values = np.arange(400, dtype=np.float64).reshape(100, 4)
    res = xr.Dataset({"v": (("a", "b"), da.from_array(values, chunks=((30, 40, 30), (4,))))})
    with pytest.warns(ltdask.PerformanceWarning, match="result variable 'v' .*partition size"):
        ltdask.to_zarr(res, tmp_path / "r.zarr")
    np.testing.assert_array_equal(xr.open_zarr(tmp_path / "r.zarr")["v"].values, values)
    ds = ltdask.from_array(np.ones((7, 6, 5, 4), dtype=np.float32))
    with pytest.warns(ltdask.PerformanceWarning, match=r"e\.g\. chunks=\(4, 6, 5, 4\)"):
        ds.to_zarr(tmp_path / "d.zarr", chunks=((3, 4), (6,), (5,), (4,)))
    # regular chunks: written as they are, without a warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", ltdask.PerformanceWarning)
        ds.to_zarr(tmp_path / "e.zarr", chunks=((4, 3), (6,), (5,), (4,)))
    assert zarr.open_array(tmp_path / "e.zarr", mode="r")[:].sum() == 7 * 6 * 5 * 4


@pytest.mark.parametrize("dtype", ["uint16", "float32"])
def test_dataset_to_zarr_round_trip(tmp_path, dtype, small_partitions):
    data = (np.random.default_rng(2).random((9, 5, 6, 7)) * 1000).astype(dtype)
    path = tmp_path / "scan.raw"
    data.tofile(path)
    ds = ltdask.open_raw(path, nav_shape=(9, 5), sig_shape=(6, 7), dtype=dtype)
    out = tmp_path / "scan.zarr"
    ds.to_zarr(out)
    arr = zarr.open_array(out, mode="r")
    np.testing.assert_array_equal(arr[...], data)
    assert list(arr.metadata.dimension_names) == list(ds.dims)
    assert arr.attrs["ltdask"]["sig_dims"] == 2
    with pytest.raises(FileExistsError):
        ds.to_zarr(out)
    ds.to_zarr(out, mode="w", dtype="float32")
    np.testing.assert_allclose(zarr.open_array(out, mode="r")[...], data.astype(np.float32))


def test_dataset_to_zarr_threads_scheduler(tmp_path, small_partitions):
    data = np.random.default_rng(3).random((6, 6, 8, 8)).astype(np.float32)
    with dask.config.set(scheduler="threads"):
        ltdask.from_array(data).to_zarr(tmp_path / "t.zarr")
    np.testing.assert_array_equal(zarr.open_array(tmp_path / "t.zarr", mode="r")[...], data)


# -- dtype conversions that cannot hold the values: refused, or clipped when asked -------------
def _scan_up_to_4000():
    """uint16 values 0..4000 (most above uint8's 255), the issue's case."""
    return (np.arange(4 * 4 * 8 * 12) * 7 % 4001).astype(np.uint16).reshape(4, 4, 8, 12)


def test_to_zarr_refuses_a_dtype_that_wraps_values_around(tmp_path, small_partitions):
    data = _scan_up_to_4000()
    ds = ltdask.from_array(data)
    path = tmp_path / "scan.zarr"
    with pytest.raises(ltdask.ConversionError, match=r"uint8's range 0\.\.255.*clip=True"):
        ds.to_zarr(path, dtype="uint8")
    assert os.listdir(tmp_path) == []  # the partial store is removed
    # a store that was there is left as it was
    ds.to_zarr(path, dtype="uint16")
    with pytest.raises(ltdask.ConversionError):
        ds.to_zarr(path, dtype="int8", mode="w")
    assert os.listdir(tmp_path) == ["scan.zarr"]
    np.testing.assert_array_equal(zarr.open_array(path, mode="r")[...], data)
    # values that fit convert: no refusal for a dtype merely narrower than the data's
    small = ltdask.from_array(data % 256)
    small.to_zarr(tmp_path / "small.zarr", dtype="uint8")
    np.testing.assert_array_equal(zarr.open_array(tmp_path / "small.zarr")[...], data % 256)


def test_to_zarr_clips_when_asked_and_records_how_many(tmp_path, small_partitions):
    data = _scan_up_to_4000()
    path = tmp_path / "scan.zarr"
    ltdask.from_array(data).to_zarr(path, dtype="uint8", clip=True)
    arr = zarr.open_array(path, mode="r")
    assert arr.dtype == np.uint8
    np.testing.assert_array_equal(arr[...], np.minimum(data, 255))
    assert arr.attrs["ltdask"]["clipped_values"] == np.count_nonzero(data > 255)


#: float values, the dtype asked for -> the values in that dtype with clip=True, and how many
#: of the three were clipped (a fraction is dropped, as astype drops it: not clipped)
FLOAT_CASES = {
    "inf-to-uint16": (np.float32, [1.5, np.inf, 3.0], "uint16", [1, 65535, 3], 1),
    "minus-inf-to-int8": (np.float32, [-np.inf, -2.5, 7.9], "int8", [-128, -2, 7], 1),
    "above-range-to-uint8": (np.float64, [255.9, 256.0, 1e9], "uint8", [255, 255, 255], 2),
    "below-range-to-uint16": (np.float32, [-0.5, -1.0, 2.0], "uint16", [0, 0, 2], 1),
    # 2**63 is one past int64's largest; the largest float64 below it is 2**63 - 1024
    "above-int64": (
        np.float64,
        [2.0**63, -(2.0**63), 1.0],
        "int64",
        [2**63 - 1024, -(2**63), 1],
        1,
    ),
    # finite values clipped to float32's largest; infinities are float32 values: kept
    "float64-overflows-float32": (
        np.float64,
        [1e39, -1e39, np.inf],
        "float32",
        [np.finfo(np.float32).max, -np.finfo(np.float32).max, np.inf],
        2,
    ),
}


@pytest.mark.parametrize("case", FLOAT_CASES)
def test_to_zarr_floats_that_a_dtype_cannot_hold(tmp_path, case):
    source, values, target, expected, clipped = FLOAT_CASES[case]
    data = np.array(values * 4, dtype=source).reshape(2, 2, 1, 3)
    ds = ltdask.from_array(data)
    with pytest.raises(ltdask.ConversionError, match=f"outside {target}'s"):
        ds.to_zarr(tmp_path / "refused.zarr", dtype=target)
    assert not (tmp_path / "refused.zarr").exists()
    ds.to_zarr(tmp_path / "clipped.zarr", dtype=target, clip=True)
    arr = zarr.open_array(tmp_path / "clipped.zarr", mode="r")
    np.testing.assert_array_equal(
        arr[...], np.array(expected * 4, dtype=target).reshape(2, 2, 1, 3)
    )
    assert arr.attrs["ltdask"]["clipped_values"] == 4 * clipped


def test_to_zarr_nan_to_an_integer_is_refused_even_when_clipping(tmp_path):
    data = np.array([1.0, np.nan, 2.0, 3.0], dtype=np.float32).reshape(2, 2, 1, 1)
    ds = ltdask.from_array(data)
    for clip in (False, True):
        with pytest.raises(ltdask.ConversionError, match="NaN"):
            ds.to_zarr(tmp_path / "nan.zarr", dtype="uint16", clip=clip)
        assert os.listdir(tmp_path) == []


def test_to_zarr_corrected_frames_to_integers_are_checked(tmp_path):
    data = np.full((2, 2, 3, 3), 10, dtype=np.uint16)
    dark = np.full((3, 3), 12.0)  # corrected frames hold -2: not a uint16
    ds = ltdask.from_array(data)
    corrections = ltdask.CorrectionSet(dark=dark)
    with pytest.raises(
        ltdask.ConversionError, match=r"-2\.0 at scan position \(\d, 0\), pixel \(0, 0\)"
    ):
        ds.to_zarr(tmp_path / "c.zarr", dtype="uint16", corrections=corrections)
    ds.to_zarr(tmp_path / "c.zarr", dtype="int16", corrections=corrections)
    np.testing.assert_array_equal(
        zarr.open_array(tmp_path / "c.zarr")[...], data.astype(np.int16) - 12
    )
