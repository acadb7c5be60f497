"""open_seq: Direct Electron StreamPix files read back as the frames the writer stored, with
their dark and gain references applied as LiberTEM applies them, ``(frame - dark) * gain``.

The writer (``tests/helpers/seqfiles.py``) works from the published layout with numpy and
struct; LiberTEM's reading of the same files is compared in ``tests/reference``.
"""

from __future__ import annotations

import pickle

import dask
import numpy as np
import pytest
from helpers.seqfiles import frames_for, write_mrc, write_scan, write_seq

import ltdask
from ltdask.io.formats.seq import open_seq

SMALL = {"ltdask.partition-bytes": 1000, "ltdask.min-partitions": 1, "ltdask.tile-bytes": 300}
RAW = ltdask.CorrectionSet()  # no corrections: the frames as stored


@pytest.mark.parametrize(
    "dtype, shape, version, pad",
    [
        pytest.param("<u2", (7, 9), 5, 0, id="u16-v5"),
        pytest.param("<u1", (5, 6), 5, 3, id="u8-odd-footer"),
        pytest.param("<u4", (4, 3), 4, 8, id="u32-v4-1024"),
        pytest.param("<u2", (1, 1), 5, 0, id="1x1-frames"),
    ],
)
def test_frames_as_written(tmp_path, dtype, shape, version, pad):
    path, frames, _, _ = write_scan(tmp_path, 10, shape, dtype, version=version, pad=pad)
    ds = open_seq(path, nav_shape=(2, 5))
    assert ds.sig_shape == shape and ds.dtype == np.dtype(dtype).newbyteorder("=")
    got = ds.to_dask().compute(scheduler="sync")
    np.testing.assert_array_equal(got.reshape(frames.shape), frames)
    with dask.config.set(SMALL):
        res = ltdask.udf.SumUDF().compute(open_seq(path, nav_shape=(2, 5)))
    np.testing.assert_allclose(res["intensity"].values, frames.sum(0, dtype=np.float64))


@pytest.mark.parametrize(
    "nav, sync_offset, first, count",
    [
        pytest.param((3, 4), 0, 0, 12, id="all"),
        pytest.param((2, 5), 2, 2, 10, id="skip-2"),
        pytest.param((3, 5), -3, -3, 15, id="insert-3-and-missing-end"),
        pytest.param((1,), 11, 11, 1, id="one-frame"),
    ],
)
def test_sync_offset_and_nav_shapes(tmp_path, nav, sync_offset, first, count):
    path, frames, _, _ = write_scan(tmp_path, 12)
    expected = np.zeros((count, *frames.shape[1:]), frames.dtype)
    valid = np.zeros(count, bool)
    for i in range(count):
        if 0 <= first + i < len(frames):
            expected[i] = frames[first + i]
            valid[i] = True
    with pytest.warns(ltdask.MissingFramesWarning) if not valid.all() else _nothing():
        ds = open_seq(path, nav_shape=nav, sync_offset=sync_offset)
    np.testing.assert_array_equal(ds.to_dask().compute().reshape(expected.shape), expected)
    np.testing.assert_array_equal(ds.valid_nav_mask().reshape(-1), valid)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_partial_last_slot(tmp_path):
    """A file cut in the last frame's timestamp keeps that frame; cut in its pixels, not."""
    frames = frames_for(4)
    path = write_seq(tmp_path / "a.seq", frames, truncate=5)
    ds = open_seq(path, nav_shape=(4,))
    assert ds.image_count == 4
    np.testing.assert_array_equal(ds.to_dask().compute(), frames)
    path = write_seq(tmp_path / "b.seq", frames, truncate=20)
    with pytest.warns(ltdask.MissingFramesWarning):
        ds = open_seq(path, nav_shape=(4,))
    assert ds.image_count == 3
    np.testing.assert_array_equal(ds.to_dask().compute()[:3], frames[:3])


@pytest.mark.parametrize("dark, gain", [(True, False), (False, True), (True, True)])
def test_references_are_default_corrections(tmp_path, dark, gain):
    path, frames, d, g = write_scan(tmp_path, 6, dark=dark, gain=gain)
    ds = open_seq(path, nav_shape=(2, 3))
    expected = frames.astype(np.float32)
    if dark:
        expected = expected - d
    if gain:
        expected = expected * g
    got = ds.to_dask().compute()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.reshape(expected.shape), expected, rtol=1e-6)
    with dask.config.set(SMALL):
        res = ltdask.udf.SumUDF().compute(ds)
        roi = np.zeros((2, 3), bool)
        roi[1, ::2] = True
        picked = ltdask.udf.SumUDF().compute(ds, roi=roi)
    np.testing.assert_allclose(res["intensity"].values, expected.sum(0), rtol=1e-5)
    np.testing.assert_allclose(picked["intensity"].values, expected[[3, 5]].sum(0), rtol=1e-5)
    # an explicit CorrectionSet replaces the references; dark=False/gain=False ignore them
    raw = ltdask.udf.SumUDF().compute(ds, corrections=RAW)
    np.testing.assert_allclose(raw["intensity"].values, frames.sum(0))
    plain = open_seq(path, nav_shape=(2, 3), dark=False, gain=False)
    assert plain.default_corrections() is None
    np.testing.assert_array_equal(plain.to_dask().compute().reshape(frames.shape), frames)


def test_seq_seq_name_and_mrc_modes(tmp_path):
    """``NAME.seq.seq`` finds ``NAME.seq.dark.mrc``; integer MRC references are read too."""
    frames = frames_for(4, (3, 5))
    path = write_seq(tmp_path / "run.seq.seq", frames)
    dark = np.arange(15, dtype=np.uint16).reshape(3, 5)
    write_mrc(tmp_path / "run.seq.dark.mrc", dark, mode=6)
    ds = ltdask.open(path, nav_shape=(4,))
    assert ds.side_files == {"dark": str(tmp_path / "run.seq.dark.mrc")}
    np.testing.assert_allclose(ds.to_dask().compute(), frames - dark.astype(np.float32))


def test_metadata_and_opening(tmp_path):
    path, frames, _, _ = write_scan(tmp_path, 6, metadata=True, name="scan.seq")
    ds = ltdask.open(path, nav_shape=(2, 3))
    assert type(ds).__name__ == "SeqDataSet"
    meta = ds.metadata
    assert meta["name"] == "ltdask test" and meta["description"] == "synthetic frames"
    assert meta["seq version"] == 5 and meta["bit depth"] == 16 and meta["frame rate (Hz)"] == 100
    assert meta["UnbinnedFrameSizeX"] == 9 and meta["UnbinnedFrameSizeY"] == 7
    assert meta["HardwareBinning"] == 1
    xr = pytest.importorskip("xarray")
    xa = xr.open_dataset(path, engine="ltdask", nav_shape=(2, 3))
    arr = next(iter(xa.data_vars.values()))
    np.testing.assert_array_equal(arr.values.reshape(frames.shape), frames)


def test_sig_shape_reinterprets(tmp_path):
    path, frames, _, _ = write_scan(tmp_path, 4, (6, 4))
    ds = open_seq(path, nav_shape=(4,), sig_shape=(3, 8))
    np.testing.assert_array_equal(ds.to_dask().compute(), frames.reshape(4, 3, 8))


def test_pickles_small_and_tokenizes(tmp_path):
    path, _, _, _ = write_scan(tmp_path, 6, dark=True)
    ds = open_seq(path, nav_shape=(2, 3))
    assert len(pickle.dumps(ds)) < 4000
    again = pickle.loads(pickle.dumps(ds))
    from dask.base import tokenize

    assert tokenize(again) == tokenize(ds)
    np.testing.assert_array_equal(again.to_dask().compute(), ds.to_dask().compute())
