"""An acquisition whose payloads are a file format's records is read as such files are:
each task decodes its partition's payloads (the records received, headers included) tile
by tile through the format's file set and decoder (``ltdask.acquire.blocks``), never into a
whole partition of frames. A Merlin stream's results equal those of ``ltdask.open_mib`` on
the same file, bit for bit, for every layout, tiles that cut frames, partitions of any
size, lost frames and ``ltdask.lazy``; a growing raw file's with frame headers, those of
numpy."""

from __future__ import annotations

import warnings

import dask
import numpy as np
import pytest
from helpers.merlinstreams import MODES, assert_same_results, udfs, write_scan
from helpers.mibfiles import make_counts, write_hdr, write_mib

import ltdask
from ltdask.acquire import RawFollowSource, follow, merlin, pool
from ltdask.acquire.mpx import MibFrames
from ltdask.acquire.simulate.merlin import MerlinSimulator
from ltdask.exceptions import MissingFramesWarning
from ltdask.io.block_files import BlockFileDataSet
from ltdask.io.formats.mib.layout import MibRawDecoder
from ltdask.udf import SumSigUDF, SumUDF


@pytest.fixture
def never_whole(monkeypatch):
    """Decoding a partition's payloads into whole frames fails the test."""

    def whole(self, payloads):
        raise AssertionError("a partition was decoded into whole frames")

    monkeypatch.setattr(MibFrames, "decode", whole)


@pytest.fixture
def tile_shapes(monkeypatch):
    """The shapes of the tiles read from the partitions' payloads."""
    shapes: list[tuple[int, ...]] = []
    read = BlockFileDataSet.iter_flat_tiles

    def spy(self, positions, scheme, dtype, block=None):
        for tile in read(self, positions, scheme, dtype, block):
            shapes.append(tile[0].shape)
            yield tile

    monkeypatch.setattr(BlockFileDataSet, "iter_flat_tiles", spy)
    return shapes


def _live(hdr, udf_list, faults=None, **options):
    pool.clear()
    with MerlinSimulator(hdr, port=0, **(faults or {})) as sim:
        with merlin("127.0.0.1", sim.port, **options) as acq:
            results = ltdask.compute(acq, udf_list)
            return results, acq.nav_chunks, pool.held()


@pytest.mark.parametrize("mode", list(MODES))
def test_every_layout_is_read_tile_by_tile(tmp_path, mode, never_whole, tile_shapes):
    hdr, counts = write_scan(tmp_path, mode)
    ds = ltdask.open_mib(str(hdr))
    expected = ltdask.compute(ds, udfs(ds.sig_shape))
    got, _, free = _live(hdr, udfs(ds.sig_shape), frames_per_partition=5)
    assert tile_shapes
    assert_same_results(got, expected)
    np.testing.assert_array_equal(got[0]["intensity"].values, counts.sum(axis=0, dtype=np.int64))
    assert free > 0  # (the partitions' buffers went back to the pool once read)


@pytest.mark.parametrize("mode", ["raw1", "raw12", "raw12-quad", "U16"])
def test_tiles_that_cut_frames(tmp_path, mode, never_whole, tile_shapes):
    depth, raw, quad, gap, _ = MODES[mode]
    sig = (128, 256)
    counts = make_counts(np.random.default_rng(7), 10, sig, depth, gap) % 16  # (exact in f32)
    write_mib(tmp_path / "scan.mib", counts, depth=depth, raw=raw, quad=quad, gap=gap)
    write_hdr(tmp_path / "scan.hdr", 10, per_trigger=5, depth=depth)
    hdr = tmp_path / "scan.hdr"
    with dask.config.set({"ltdask.tile-bytes": 16 * 1024}):
        ds = ltdask.open_mib(str(hdr))
        expected = ltdask.compute(ds, udfs(sig))
        got, _, _ = _live(hdr, udfs(sig), frames_per_partition=7)
    # tiles of a few rows of a frame, fewer frames than a partition; quads: whole frames
    # (a raw row holds a row of each half: `MibRawFileSet.base_shape`)
    if quad:
        assert all(shape[1:] == sig for shape in tile_shapes), set(tile_shapes)
    else:
        assert any(shape[1:] != sig for shape in tile_shapes), set(tile_shapes)
    assert all(shape[0] < 7 for shape in tile_shapes)
    assert_same_results(got, expected)
    np.testing.assert_array_equal(got[0]["intensity"].values, counts.sum(axis=0, dtype=np.int64))
    per_frame = counts.sum(axis=(1, 2), dtype=np.int64).reshape(2, 5)
    np.testing.assert_array_equal(got[1]["intensity"].values, per_frame)


@pytest.mark.parametrize(
    "mode, frames_per_partition, faults, missing",
    [
        pytest.param("raw1", 1, {}, [], id="raw1-partitions-of-one-frame"),
        pytest.param("raw12-quad", 7, {}, [], id="raw12-quad-odd-partitions"),
        pytest.param("raw6-quad-gaps", 1, {"drop": [0, 5]}, [0, 5], id="gaps-one-frame-dropped"),
        pytest.param(
            "raw12", 5, {"drop": [3, 4, 17], "reorder": True}, [3, 4, 17], id="raw12-dropped"
        ),
        pytest.param("U08", 7, {"cut_after": 15}, range(15, 24), id="U08-cut"),
    ],
)
def test_partition_sizes_and_lost_frames(
    tmp_path, mode, frames_per_partition, faults, missing, never_whole
):
    # the scan as one row: partitions of any count of frames (7, 7, 7, 3), not whole rows
    hdr, counts = write_scan(tmp_path, mode)
    ds = ltdask.open_mib(str(hdr), nav_shape=(1, 24))
    expected = ltdask.compute(ds, udfs(ds.sig_shape))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingFramesWarning)
        got, grid, _ = _live(
            hdr,
            udfs(ds.sig_shape),
            faults,
            nav_shape=(1, 24),
            frames_per_partition=frames_per_partition,
        )
    assert grid[1] == (frames_per_partition,) * (24 // frames_per_partition) + (
        (24 % frames_per_partition,) if 24 % frames_per_partition else ()
    )
    valid = np.ones(len(counts), bool)
    valid[list(missing)] = False
    np.testing.assert_array_equal(got[1]["intensity_valid"].values, valid[None])
    assert_same_results(got[1:], expected[1:], valid=valid[None])
    np.testing.assert_array_equal(
        got[0]["intensity"].values, counts[valid].sum(axis=0, dtype=np.int64)
    )


def test_lazy_results_with_missing_frames(tmp_path, never_whole):
    hdr, counts = write_scan(tmp_path, "raw12")
    with MerlinSimulator(hdr, port=0, drop=[2, 9]) as sim:
        with merlin("127.0.0.1", sim.port, frames_per_partition=4) as acq:
            with pytest.warns(MissingFramesWarning, match="frames never arrived"):
                (lazy,) = ltdask.lazy(acq, [SumSigUDF()])
                (computed,) = dask.compute(lazy)
            with pytest.warns(MissingFramesWarning, match=r"2 of 24 frames never arrived"):
                (settled,) = acq.settle([computed])
    arrived = ~np.isin(np.arange(24), [2, 9])
    sums = counts.sum(axis=(1, 2), dtype=np.int64)
    np.testing.assert_array_equal(computed["intensity"].values.ravel(), np.where(arrived, sums, 0))
    np.testing.assert_array_equal(settled["intensity_valid"].values.ravel(), arrived)


def test_sums_alone_come_from_the_decoder(tmp_path, monkeypatch, never_whole):
    summed = []
    add_sums = MibRawDecoder.add_sums

    def spy(self, buffers, ranges, slice_px, acc):
        summed.append(slice_px)
        return add_sums(self, buffers, ranges, slice_px, acc)

    monkeypatch.setattr(MibRawDecoder, "add_sums", spy)
    hdr, counts = write_scan(tmp_path, "raw12")
    (total,), _, _ = _live(hdr, [SumUDF()], frames_per_partition=5)
    assert summed
    np.testing.assert_array_equal(total["intensity"].values, counts.sum(axis=0, dtype=np.int64))


def test_a_roi(tmp_path, never_whole):
    hdr, counts = write_scan(tmp_path, "raw12-quad")
    roi = np.random.default_rng(4).random(24) < 0.4
    ds = ltdask.open_mib(str(hdr))
    expected = ltdask.compute(ds, udfs(ds.sig_shape)[:2], roi=roi.reshape(ds.nav_shape))
    with MerlinSimulator(hdr, port=0) as sim:
        with merlin("127.0.0.1", sim.port, frames_per_partition=5) as acq:
            got = ltdask.compute(acq, udfs(acq.sig_shape)[:2], roi=roi.reshape(acq.nav_shape))
    assert_same_results(got, expected)
    np.testing.assert_array_equal(
        got[0]["intensity"].values, counts[roi].sum(axis=0, dtype=np.int64)
    )


@pytest.mark.parametrize(
    "dtype, header, footer", [(">u2", 12, 4), ("<f4", 0, 8)], ids=["u16-bigendian", "f32"]
)
def test_a_raw_file_with_frame_headers_is_read_tile_by_tile(
    tmp_path, monkeypatch, tile_shapes, dtype, header, footer
):
    def whole(self, payloads):
        raise AssertionError("a partition was decoded into whole frames")

    monkeypatch.setattr(RawFollowSource, "decode", whole)
    frames = np.random.default_rng(9).integers(0, 3000, (12, 6, 5)).astype(dtype)
    records = [b"\xab" * header + f.tobytes() + b"\xcd" * footer for f in frames]
    path = tmp_path / "scan.raw"
    path.write_bytes(b"".join(records))
    options = dict(frame_header_bytes=header, frame_footer_bytes=footer)
    with follow(path, (3, 4), (6, 5), dtype, frames_per_partition=5, **options) as acq:
        total, per_frame = ltdask.compute(acq, [SumUDF(), SumSigUDF()])
    assert tile_shapes
    f64 = frames.astype(np.float64)
    np.testing.assert_array_equal(total["intensity"].values, f64.sum(axis=0))
    np.testing.assert_array_equal(per_frame["intensity"].values, f64.sum(axis=(1, 2)).reshape(3, 4))
