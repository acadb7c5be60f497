"""open_k2is: K2 IS sector files read back as the frames the writer packed, after
synchronising the sectors, dropping incomplete frames and finding the shutter.

The writer (``tests/helpers/k2isfiles.py``) packs 12-bit blocks with numpy from the published
layout; ``k2is_kernels.unpack12`` is the numpy reference of the decoder. Frames are 1860 x
2048, so scans here have a few frames. LiberTEM's reading of the same files is compared in
``tests/reference``.
"""

from __future__ import annotations

import pickle

import dask
import numpy as np
import pytest
from helpers.k2isfiles import pack12, random_frames, write_k2is
from hypothesis import given, settings
from hypothesis import strategies as st

import ltdask
from ltdask.common import Shape, Slice
from ltdask.io.formats.k2is import open_k2is
from ltdask.io.formats.k2is.kernels import decode_k2is, unpack12
from ltdask.io.tiling import TilingScheme
from ltdask.testing import (
    check_pickle,
    check_roi,
    check_shape_and_dtype,
    check_sync_offset,
    check_tile_shapes,
    check_values,
)

N = 5


@pytest.fixture(scope="module")
def frames():
    return random_frames(N, seed=7)


@pytest.fixture(scope="module")
def scan(tmp_path_factory, frames):
    """Sectors that start at different blocks of an incomplete first frame, and end with an
    incomplete frame."""
    folder = tmp_path_factory.mktemp("k2is")
    return write_k2is(
        folder, frames, lead_blocks=(4, 9, 4, 4, 31, 4, 6, 4), tail_blocks=(2, 2, 5, 2, 2, 2, 2, 9)
    )


def test_unpack_reference():
    pixels = np.array([[0x123, 0xABC, 0xFFF, 0x000]], dtype=np.uint16)
    packed = pack12(pixels)
    assert packed.tobytes() == bytes([0x23, 0xC1, 0xAB, 0xFF, 0x0F, 0x00])
    np.testing.assert_array_equal(unpack12(packed), pixels[0])


@settings(max_examples=20)
@given(
    seed=st.integers(0, 2**16),
    r0=st.integers(0, 929),
    rows=st.integers(1, 930),
    c0=st.integers(0, 15),
    cols=st.integers(1, 16),
    pad=st.sampled_from([0, 2]),
)
def test_decoder_clips_blocks(seed, r0, rows, c0, cols, pad):
    """One block, any part of it, against the numpy reference, into rows `pad` pixels wider
    than the part (0: whole blocks' rows are one run in the tile)."""
    rows = min(rows, 930 - r0)
    cols = min(cols, 16 - c0)
    block = np.random.default_rng(seed).integers(0, 256, 22320, dtype=np.uint8)
    src = np.concatenate([np.zeros(40, np.uint8), block])
    ranges = np.array([[0, 40, 22360, 3, cols + pad, r0, r0 + rows, c0, c0 + cols]], np.int64)
    out = np.full(3 + rows * (cols + pad) + 5, 7, dtype=np.uint16)
    decode_k2is(src, 0, ranges, out)
    want = unpack12(block).reshape(930, 16)[r0 : r0 + rows, c0 : c0 + cols]
    got = out[3:-5].reshape(rows, cols + pad)
    np.testing.assert_array_equal(got[:, :cols], want)
    np.testing.assert_array_equal(got[:, cols:], 7)
    np.testing.assert_array_equal(out[:3], 7)
    np.testing.assert_array_equal(out[-5:], 7)


def test_whole_blocks_unpack_as_one_run():
    """Every block, at every row where it may start, unpacked whole into a one-block-wide
    tile (the path of negotiated tiles) equals the reference."""
    block = np.random.default_rng(5).integers(0, 256, 22320, dtype=np.uint8)
    src = np.concatenate([np.zeros(40, np.uint8), block])
    for r0, r1 in [(0, 930), (1, 930), (0, 1), (929, 930), (17, 500)]:
        ranges = np.array([[0, 40, 22360, 0, 16, r0, r1, 0, 16]], np.int64)
        out = np.zeros((r1 - r0) * 16, np.uint16)
        decode_k2is(src, 0, ranges, out)
        want = unpack12(block).reshape(930, 16)[r0:r1]
        np.testing.assert_array_equal(out.reshape(-1, 16), want)


def test_synchronised_frames(scan, frames):
    ds = open_k2is(scan)
    assert ds.nav_shape == (N,) and ds.sig_shape == (1860, 2048) and ds.dtype == np.uint16
    assert ds.image_count == N and ds.sync_offset == 0
    assert ds.metadata["mode"] == "time series" and ds.metadata["first shutter frame"] == 0
    np.testing.assert_array_equal(ds.to_dask().compute(scheduler="threads"), frames)


def test_tiles_follow_blocks(scan, frames):
    with dask.config.set({"ltdask.tile-bytes": 200_000, "ltdask.partition-bytes": 8_000_000}):
        ds = open_k2is(scan)
        scheme = ds.negotiate([], np.float32)
        assert len(scheme) > 1
        for sl in scheme.slices:  # every tile is whole blocks, one block wide
            assert sl.origin[0] % 930 == 0 and sl.origin[1] % 16 == 0
            assert sl.shape[0] % 930 == 0 and sl.shape[1] == 16
        assert len(ds.get_partitions()) > 1
        roi = np.array([True, False, True, True, False])
        res = ltdask.udf.SumUDF().compute(ds, roi=roi)
        sums = ltdask.udf.SumSigUDF().compute(ds)
    np.testing.assert_allclose(res["intensity"].values, frames[roi].sum(0, dtype=np.float64))
    np.testing.assert_allclose(
        sums["intensity"].values, frames.sum((1, 2), dtype=np.float64), rtol=1e-6
    )


@pytest.mark.parametrize(
    "settings",
    [
        pytest.param({}, id="default-tiles"),
        pytest.param({"ltdask.tile-bytes": 200_000}, id="small-tiles"),
    ],
)
@pytest.mark.parametrize("roi", [None, "some", "one", "none"])
def test_sum_from_the_decoder(scan, frames, settings, roi, monkeypatch):
    """SumUDF alone takes each tile's sums from the decoder (unpacked and added in one pass,
    four frames at a time, no tile): equal to numpy, and the tiles are never unpacked."""
    from ltdask.io.formats.k2is.dataset import K2ISDecoder

    roi = {None: None, "some": np.array([1, 0, 1, 1, 1], bool), "one": np.eye(1, 5, 3)[0] > 0}.get(
        roi, np.zeros(5, bool)
    )
    picked = frames if roi is None else frames[roi]
    with dask.config.set(
        {**settings, "ltdask.partition-bytes": 80_000_000, "ltdask.min-partitions": 1}
    ):
        ds = open_k2is(scan)
        said = "the decoder adds the pixels up"
        assert said in str(ltdask.explain(ds, [ltdask.udf.SumUDF()], roi=roi))
        assert said not in str(ltdask.explain(ds, [ltdask.udf.SumUDF(), ltdask.udf.PickUDF()]))
        monkeypatch.setattr(K2ISDecoder, "_decode_file", _refuse)
        res = ltdask.udf.SumUDF().compute(ds, roi=roi)
        np.testing.assert_array_equal(res["intensity"].values, picked.sum(0, dtype=np.float64))
        # with another UDF, or slices that are not one block wide: unpacked tiles
        monkeypatch.undo()
        wide = TilingScheme([Slice((0, 0), Shape((1860, 32), sig_dims=2))], depth=4)
        assert not K2ISDecoder().can_sum(wide)
        both = ltdask.compute(ds, [ltdask.udf.SumUDF(), ltdask.udf.SumSigUDF()], roi=roi)
    np.testing.assert_array_equal(both[0]["intensity"].values, res["intensity"].values)


def _refuse(*args):
    raise AssertionError("a tile was unpacked")


@pytest.mark.parametrize(
    "chunks", [pytest.param((2, 1000, 555), id="unaligned"), pytest.param((1, 7, 2048), id="rows")]
)
def test_any_chunking(scan, frames, chunks):
    ds = open_k2is(scan)
    got = ds.to_dask(dtype="float32", chunks=chunks)[1:3].compute()
    np.testing.assert_array_equal(got, frames[1:3])


@pytest.mark.parametrize(
    "scan_shape, shutter, nav, sync_offset, first",
    [
        pytest.param(None, 2, (2,), 2, 2, id="time-series-shutter-2"),
        pytest.param((1, 3), 2, (1, 3), 1, 1, id="stem-starts-a-frame-early"),
        pytest.param((2, 2), 0, (2, 2), -1, -1, id="stem-shutter-at-first-frame"),
    ],
)
@pytest.mark.filterwarnings("ignore::ltdask.MissingFramesWarning")
def test_shutter_sync(tmp_path, frames, scan_shape, shutter, nav, sync_offset, first):
    path = write_k2is(tmp_path, frames[:4], shutter_from=shutter, scan=scan_shape)
    ds = open_k2is(tmp_path / "Capture_3.bin")
    assert ds.nav_shape == nav and ds.sync_offset == sync_offset
    assert ds.native_sync_offset == sync_offset
    got = ds.to_dask().compute().reshape(-1, 1860, 2048)
    for i in range(got.shape[0]):
        if 0 <= first + i < 4:
            np.testing.assert_array_equal(got[i], frames[first + i])
        else:
            assert not got[i].any()
    assert ds.valid_nav_mask().reshape(-1).tolist() == [
        0 <= first + i < 4 for i in range(got.shape[0])
    ]
    with dask.config.set({"ltdask.partition-bytes": 80_000_000, "ltdask.min-partitions": 1}):
        total = ltdask.udf.SumUDF().compute(ds)["intensity"].values  # (missing frames: none)
    np.testing.assert_array_equal(total, got.sum(0, dtype=np.float64))
    # a given sync_offset counts frames of the synchronised stream
    again = open_k2is(path, nav_shape=(2,), sync_offset=1)
    np.testing.assert_array_equal(again.to_dask().compute(), frames[1:3])


def test_without_gtg_and_no_shutter(tmp_path, frames):
    write_k2is(tmp_path, frames[:2], shutter_from=5, gtg=False)
    with pytest.raises(ltdask.DataSetError, match="shutter flag"):
        open_k2is(tmp_path / "Capture_1.bin")
    ds = open_k2is(tmp_path / "Capture_1.bin", sync_offset=0, nav_shape=(1, 2))
    assert ds.metadata["first shutter frame"] is None
    np.testing.assert_array_equal(ds.to_dask().compute().reshape(2, 1860, 2048), frames[:2])


def test_opening_and_metadata(scan, frames):
    ds = ltdask.open(scan)
    assert type(ds).__name__ == "K2ISDataSet"
    assert ds.metadata["whole frames"] == N and ds.metadata["sectors"] == 8
    xr = pytest.importorskip("xarray")
    xa = xr.open_dataset(scan, engine="ltdask")
    arr = next(iter(xa.data_vars.values()))
    np.testing.assert_array_equal(arr[2].values, frames[2])
    assert len(pickle.dumps(ds)) < 6000
    again = pickle.loads(pickle.dumps(ds))
    np.testing.assert_array_equal(again.to_dask()[4].compute(), frames[4])


@pytest.mark.parametrize("sector", [1, 5, 8])
def test_any_sector_file_opens_the_set(scan, frames, sector):
    """A sector file is ``NAME<n>.bin``: the block headers, not raw's ``.bin`` suffix, decide,
    and the whole acquisition opens from it (it was read as raw data)."""
    path = scan.parent / f"Capture_{sector}.bin"
    assert ltdask.io.detect_format(path) == "k2is"
    ds = ltdask.open(path)
    assert type(ds).__name__ == "K2ISDataSet" and ds.nav_shape == (N,)
    np.testing.assert_array_equal(ds.to_dask()[1:3].compute(), frames[1:3])


@pytest.mark.parametrize(
    "second",
    [
        pytest.param(b"", id="sync-word-then-pixels"),
        pytest.param(bytes(40), id="no-second-block"),
    ],
)
def test_raw_bin_starting_like_a_block_stays_raw(tmp_path, second):
    """Only whole block headers claim a ``.bin`` file: a raw scan whose first pixels happen to
    be the sync word is still read as raw."""
    data = np.zeros((4, 64, 128), dtype="<u2")
    raw = bytearray(data.tobytes())
    raw[:4] = b"\xff\xff\x00\x55"
    if second:  # a valid first header, garbage a block later
        raw[20:24] = (256).to_bytes(2, "big") + (1860).to_bytes(2, "big")
        raw[22360 : 22360 + len(second)] = second
    path = tmp_path / "scan.bin"
    path.write_bytes(bytes(raw))
    raw_keywords = dict(nav_shape=(4,), sig_shape=(64, 128), dtype="<u2")
    assert ltdask.io.detect_format(path, raw_keywords) == "raw"


def test_on_scheduler(scheduler, scan, frames):
    """Every scheduler (the conformance table's check, here: K2IS frames are too large for
    its tiny partitions): tasks open the sector files themselves."""
    with dask.config.set({"ltdask.partition-bytes": 16_000_000, "ltdask.min-partitions": 1}):
        ds = open_k2is(scan)
        assert len(ds.get_partitions()) > 1
        roi = np.array([False, True, True, False, True])
        res = ltdask.udf.SumUDF(dtype="float64").compute(ds, roi=roi)
        picked = ds.to_dask()[3, 900:960, 250:270].compute()
    np.testing.assert_array_equal(res["intensity"].values, frames[roi].sum(0, dtype="f8"))
    np.testing.assert_array_equal(picked, frames[3, 900:960, 250:270])


@pytest.mark.parametrize(
    "check",
    [
        pytest.param(check_shape_and_dtype, id="shape-and-dtype"),
        pytest.param(check_values, id="values", marks=pytest.mark.slow),
        pytest.param(check_tile_shapes, id="tile-shapes", marks=pytest.mark.slow),
        pytest.param(check_roi, id="roi"),
        pytest.param(check_pickle, id="pickle"),
    ],
)
def test_conformance_kit(scan, frames, check):
    """The checks of the conformance table (``ltdask.testing``), on this module's few frames:
    K2IS frames are too large for the table's scans (the slow ones read every tile shape)."""
    check(open_k2is(scan), frames)


def test_conformance_kit_sync_offset(scan, frames):
    check_sync_offset(lambda **k: open_k2is(scan, **k), frames)


def test_calibration_keywords(scan):
    """(K2IS is not in the format table that checks them for every other format.)"""
    ds = open_k2is(scan, nav_calibration=(0.25, "nm"), sig_calibration=(0.1, "mrad"))
    assert [a.units for a in ds.nav_calibration] == ["nm"] * len(ds.nav_shape)
    xa = ds.to_xarray()
    np.testing.assert_allclose(xa[ds.dims[-1]].values, 0.1 * np.arange(ds.sig_shape[-1]))
    assert xa[ds.dims[0]].attrs["units"] == "nm"
