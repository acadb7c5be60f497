"""Every dataset format through the same checks: shapes and dtypes, values against the numpy
truth, ROI, partial tiles and partitions, pickling, and every dask scheduler.

The formats are the table in ``tests/formatfiles.py``; a new format is one line there.
"""

from __future__ import annotations

import math
import pickle

import dask
import dask.array as da
import numpy as np
import pytest
from helpers.formatfiles import FORMAT_PARAMS, FORMATS, NAV

import ltdask
from ltdask.udf import SumSigUDF, SumUDF

every_format = pytest.mark.parametrize("fmt", FORMAT_PARAMS)

#: tiny partitions and tiles: several partitions per scan, 5 frames (4-byte pixels, frames of
#: 99 pixels) or 2 frames (8-byte pixels) each, and tiles of 4 or 2 frames (or cut frames)
#: that do not divide them
SMALL = {"ltdask.partition-bytes": 2000, "ltdask.min-partitions": 1, "ltdask.tile-bytes": 1600}


def roi_for(seed=1):
    roi = np.random.default_rng(seed).random(NAV) < 0.45
    roi[0, 0] = False  # the first frame of the first partition is left out
    roi[-1, -1] = True
    return roi


def close(actual, expected):
    """Sums in the UDFs' float32 buffers against float64 numpy sums."""
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-3)


def native(data):
    return data.astype(data.dtype.newbyteorder("="))


@every_format
def test_shape_and_dtype(fmt, tmp_path):
    ds, data = fmt.open(tmp_path)
    assert ds.shape == data.shape
    assert tuple(ds.shape.nav) == NAV and tuple(ds.shape.sig) == fmt.sig
    assert ds.nav_shape == NAV and ds.sig_shape == fmt.sig
    assert ds.dtype == data.dtype.newbyteorder("=")
    assert ds.dims == ("scan_y", "scan_x", "det_y", "det_x")
    arr = ds.to_dask()
    assert arr.shape == data.shape and arr.dtype == ds.dtype
    xa = ds.to_xarray()
    assert xa.dims == ds.dims and xa.shape == data.shape


@every_format
@pytest.mark.parametrize("dtype", [None, "float64"], ids=["native", "float64"])
def test_to_dask_equals_truth(fmt, tmp_path, dtype):
    ds, data = fmt.open(tmp_path)
    expected = native(data) if dtype is None else data.astype(dtype)
    arr = ds.to_dask(dtype=dtype)
    assert arr.dtype == expected.dtype
    np.testing.assert_array_equal(arr.compute(scheduler="sync"), expected)


@every_format
def test_to_dask_small_partitions_and_custom_chunks(fmt, tmp_path):
    with dask.config.set(SMALL):
        ds, data = fmt.open(tmp_path)
        arr = ds.to_dask()
        assert math.prod(arr.numblocks) > 1  # (array-expr arrays have no npartitions)
        np.testing.assert_array_equal(arr.compute(scheduler="sync"), native(data))
    # chunks that are not flat nav ranges and cut the frame
    chunks = (2, 3, 4, 5)
    arr = ds.to_dask(dtype="float32", chunks=chunks)
    assert arr.chunks == da.core.normalize_chunks(chunks, data.shape)
    np.testing.assert_array_equal(arr.compute(scheduler="sync"), data.astype("float32"))


@every_format
def test_roi(fmt, tmp_path):
    roi = roi_for()
    with dask.config.set(SMALL):
        ds, data = fmt.open(tmp_path)
        sig_sums, sums = ltdask.compute(ds, [SumSigUDF(), SumUDF()], roi=roi)
    truth = data.astype("float64")
    expected = np.where(roi, truth.sum(axis=(2, 3)), np.nan)
    close(sig_sums["intensity"].values, expected)
    np.testing.assert_array_equal(sig_sums["intensity"]["intensity_valid"].values, roi)
    close(sums["intensity"].values, truth[roi].sum(axis=0))


@every_format
def test_partial_tiles_and_partitions(fmt, tmp_path):
    """Partitions and tiles that do not divide the scan (and cut the frame where the format
    allows) give the same results as numpy."""
    with dask.config.set(SMALL):
        ds, data = fmt.open(tmp_path)
        sizes = [p.num_frames for p in ds.get_partitions()]
        assert len(sizes) > 1
        assert sum(sizes) == np.prod(NAV)
        scheme = ds.negotiate([ltdask.TilingPreferences()], np.result_type(ds.dtype, "f4"))
        assert any(n % scheme.depth for n in sizes) or len(scheme) > 1, scheme
        sig_sums, sums = ltdask.compute(ds, [SumSigUDF(), SumUDF()])
    truth = data.astype("float64")
    close(sig_sums["intensity"].values, truth.sum(axis=(2, 3)))
    close(sums["intensity"].values, truth.sum(axis=(0, 1)))


@every_format
def test_pickle(fmt, tmp_path):
    ds, data = fmt.open(tmp_path)
    blob = pickle.dumps(ds)
    if not fmt.in_memory:
        # a description of the files, not their data
        assert len(blob) < 0.5 * data.nbytes
    again = pickle.loads(blob)
    assert again.shape == ds.shape and again.dtype == ds.dtype
    assert dask.base.tokenize(again) == dask.base.tokenize(ds)
    np.testing.assert_array_equal(again.to_dask().compute(scheduler="sync"), native(data))
    # what a task receives pickles too
    pickle.loads(pickle.dumps(ds.for_task()))


def test_every_format_on_scheduler(scheduler, tmp_path):
    """All formats in one graph per scheduler (the processes and distributed ones pickle
    every dataset, its tasks and results)."""
    roi = roi_for(2)
    runs = []
    with dask.config.set({"ltdask.partition-bytes": 2000, "ltdask.min-partitions": 1}):
        for i, fmt in enumerate(FORMATS):
            folder = tmp_path / str(i)
            folder.mkdir()
            ds, data = fmt.open(folder)
            runs.append((fmt.id, data, SumSigUDF().lazy(ds, roi=roi), ds.to_dask("float64")))
    computed = dask.compute(*[(lazy, arr.sum()) for _, _, lazy, arr in runs])
    for (name, data, _, _), (res, total) in zip(runs, computed, strict=True):
        truth = data.astype("float64")
        expected = np.where(roi, truth.sum(axis=(2, 3)), np.nan)
        close(res["intensity"].values, expected)
        np.testing.assert_allclose(total, truth.sum(), rtol=1e-9, err_msg=name)
