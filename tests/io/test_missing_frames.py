"""A nav shape that asks for more frames than the files hold: a warning at open, invalid
positions in results, and planning whose cost follows the frames present."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ltdask
from ltdask import DataSetError, MissingFramesWarning
from ltdask.udf import SumSigUDF, SumUDF


@pytest.fixture
def stream(tmp_path):
    frames = np.random.default_rng(0).integers(0, 1000, (24, 6, 5)).astype(np.uint16)
    path = tmp_path / "stream.raw"
    frames.tofile(path)
    return path, frames


def open_raw(path, nav_shape, sync_offset=0):
    return ltdask.open_raw(
        path, nav_shape=nav_shape, sig_shape=(6, 5), dtype="uint16", sync_offset=sync_offset
    )


@pytest.mark.parametrize(
    "nav_shape, sync_offset, present",
    [((5, 6), 0, (0, 24)), ((40,), -3, (3, 27)), ((2, 3, 5), 4, (0, 20))],
)
def test_warned_at_open_and_invalid_in_results(stream, nav_shape, sync_offset, present):
    path, frames = stream
    asked = int(np.prod(nav_shape))
    with pytest.warns(
        MissingFramesWarning,
        match=rf"{path}: nav_shape=\(.*\) asks for {asked} frames, but the files hold 24 "
        rf"\(sync_offset={sync_offset}\): only positions {present[0]} to {present[1] - 1}",
    ) as record:
        ds = open_raw(path, nav_shape, sync_offset)
    assert record[0].filename == __file__  # attributed to the caller's line
    res = SumSigUDF().compute(ds)
    valid = np.zeros(asked, bool)
    valid[present[0] : present[1]] = True
    np.testing.assert_array_equal(res["intensity_valid"].values.reshape(-1), valid)
    expected = np.zeros(asked)
    first = present[0] + sync_offset
    expected[valid] = frames[first : first + valid.sum()].sum(axis=(1, 2))
    np.testing.assert_array_equal(res["intensity"].values.reshape(-1)[valid], expected[valid])


@pytest.mark.parametrize("nav_shape, sync_offset", [((4, 6), 0), ((4, 6), 3), ((3, 5), 0)])
def test_no_warning_when_the_files_hold_the_frames(stream, nav_shape, sync_offset):
    with warnings.catch_warnings():
        warnings.simplefilter("error", MissingFramesWarning)
        open_raw(stream[0], nav_shape, sync_offset)


@pytest.mark.timeout(30)  # it used to take minutes and gigabytes
@pytest.mark.parametrize("nav_shape", [(10**6, 10**6), (10**12,), (10**4, 10**4, 10**4)])
def test_absurd_nav_shape_fails_fast(stream, nav_shape):
    with pytest.warns(MissingFramesWarning):
        ds = open_raw(stream[0], nav_shape)
    with pytest.raises(DataSetError, match=r"without a single frame; give a nav_shape that fits"):
        SumUDF().lazy(ds)
    with pytest.raises(DataSetError, match=r"without a single frame"):
        ds.to_dask()


def test_large_nav_over_few_frames_finishes(stream):
    path, frames = stream
    with pytest.warns(MissingFramesWarning):
        ds = open_raw(path, (1000, 1000))
    res = SumUDF(dtype="float64").compute(ds)
    np.testing.assert_array_equal(res["intensity"].values, frames.sum(axis=0, dtype=np.float64))
