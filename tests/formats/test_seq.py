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
from helpers.seqfiles import (
    frames_for,
    write_bad_pixel_xml,
    write_metadata,
    write_mrc,
    write_scan,
    write_seq,
)

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


def repaired(frames: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Each excluded pixel the mean of its not excluded 3 x 3 neighbours (plain numpy)."""
    out = frames.copy()
    h, w = mask.shape
    for y, x in zip(*np.nonzero(mask), strict=True):
        near = [
            (y + dy, x + dx)
            for dy in (-1, 0, 1)
            for dx in (-1, 0, 1)
            if (dy or dx) and 0 <= y + dy < h and 0 <= x + dx < w and not mask[y + dy, x + dx]
        ]
        if near:  # none: left as it is
            out[:, y, x] = np.mean([frames[:, p, q] for p, q in near], axis=0, dtype=np.float64)
    return out


SENSOR_MAPS = [
    # the sensor's unbinned map: the 8 x 8 frames are its part at OffsetY=2, OffsetX=3
    (12, 12, None, [
        {"Row": "2", "Column": "3"},  # frame (0, 0): the hot pixel
        {"Row": "7"},  # frame row 5
        {"Columns": "9-9"},  # frame column 6
        {"Row": "0"}, {"Row": "11", "Column": "11"}, {"Columns": "0-2"},  # outside the frame
    ]),
    (10, 10, 1, [{"Row": "4"}]),  # an unbinned map with fewer columns: not the one
    (6, 6, 2, [{"Column": "1"}]),  # for binned frames
]  # fmt: skip


def write_de_scan(folder, offset=(2, 3), maps=SENSOR_MAPS, binning=1):
    """A DE-like scan: 6 frames of 8 x 8 with a hot pixel at (0, 0), dark, gain, the
    ``.metadata`` and the XML bad-pixel maps; ``(path, frames, dark, gain)``."""
    frames = frames_for(6, (8, 8), seed=4)
    frames[:, 0, 0] = 65535
    path = write_seq(folder / "de.seq", frames)
    rng = np.random.default_rng(5)
    dark = np.round(rng.random((8, 8)) * 50, 3).astype(np.float32)
    gain = (0.5 + rng.random((8, 8))).astype(np.float32)
    write_mrc(folder / "de.seq.dark.mrc", dark)
    write_mrc(folder / "de.seq.gain.mrc", gain)
    write_metadata(folder / "de.seq.metadata", binning=binning, size=(8, 8), offset=offset)
    write_bad_pixel_xml(folder / "de.seq.Config.Metadata.xml", maps)
    return path, frames, dark, gain


def test_bad_pixel_map_cropped_at_the_frame_offset(tmp_path):
    """The XML map is of the whole sensor: a defect at (OffsetY, OffsetX) is frame pixel
    (0, 0). UDFs and to_dask() both repair it (it stayed 65535 - dark, times gain)."""
    path, frames, dark, gain = write_de_scan(tmp_path)
    mask = np.zeros((8, 8), bool)
    mask[0, 0] = mask[5, :] = mask[:, 6] = True
    expected = repaired((frames - dark) * gain, mask)
    ds = open_seq(path, nav_shape=(2, 3))
    got = ds.to_dask().compute().reshape(expected.shape)
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    assert got[:, 0, 0].max() < 6000  # the neighbours' level, not the hot pixel's
    with dask.config.set(SMALL):
        res = ltdask.udf.SumUDF().compute(ds)
    np.testing.assert_allclose(res["intensity"].values, expected.sum(0), rtol=1e-5)
    assert ds.metadata["bad-pixel map"] == str(tmp_path / "de.seq.Config.Metadata.xml")
    # excluded_pixels=False: the dark and gain only
    plain = open_seq(path, nav_shape=(2, 3), excluded_pixels=False)
    np.testing.assert_allclose(
        plain.to_dask().compute().reshape(expected.shape), (frames - dark) * gain, rtol=1e-6
    )


def test_binned_frames_use_the_binned_map(tmp_path):
    """HardwareBinning 2: the binned map, cropped at half the offsets and size (the 16 x 16
    unbinned frame at (4, 6) is 8 x 8 at (2, 3) of the 12 x 12 binned map)."""
    maps = [(12, 12, 2, [{"Row": "2", "Column": "3"}]), (24, 24, None, [{"Row": "9"}])]
    path, frames, dark, gain = write_de_scan(tmp_path, offset=(4, 6), maps=maps, binning=2)
    write_metadata(tmp_path / "de.seq.metadata", binning=2, size=(16, 16), offset=(4, 6))
    mask = np.zeros((8, 8), bool)
    mask[0, 0] = True
    ds = open_seq(path, nav_shape=(6,))
    np.testing.assert_allclose(
        ds.to_dask().compute(), repaired((frames - dark) * gain, mask), rtol=1e-5
    )


def test_defect_band_wider_than_the_repair(tmp_path):
    """Sensor rows 3-7 (frame rows 1-5) are bad: rows 2-4 have no good neighbour, stay as
    they are with a warning, and the band's edges are repaired; runs do not fail."""
    maps = [(12, 12, None, [{"Rows": "3-7"}, {"Row": "2", "Column": "3"}])]
    path, frames, dark, gain = write_de_scan(tmp_path, maps=maps)
    with pytest.warns(ltdask.MetadataWarning, match=r"24 excluded pixels .* first at \(2, 0\)"):
        ds = open_seq(path, nav_shape=(6,))
    mask = np.zeros((8, 8), bool)
    mask[0, 0] = True
    mask[1:6] = True
    expected = repaired((frames - dark) * gain, mask)
    np.testing.assert_allclose(ds.to_dask().compute(), expected, rtol=1e-5)
    res = ltdask.udf.SumUDF().compute(ds)
    np.testing.assert_allclose(res["intensity"].values, expected.sum(0), rtol=1e-5)


def test_map_without_defects_changes_nothing(tmp_path):
    frames = frames_for(4, (8, 8))
    path = write_seq(tmp_path / "de.seq", frames)
    write_metadata(tmp_path / "de.seq.metadata", size=(8, 8), offset=(2, 3))
    write_bad_pixel_xml(tmp_path / "de.seq.Config.Metadata.xml", [(12, 12, None, [])])
    ds = open_seq(path, nav_shape=(4,))
    assert ds.default_corrections() is None and ds.metadata["bad-pixel map"] is None
    np.testing.assert_array_equal(ds.to_dask().compute(), frames)
