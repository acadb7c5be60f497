"""LiberTEM's ``MemoryDataSet``: `num_partitions` and `tileshape` as LiberTEM honours them;
tiles are plain arrays (LiberTEM's `DataTile` attributes point to ``self.meta``)."""

from __future__ import annotations

import numpy as np
import pytest

from ltdask.common import Shape, Slice
from ltdask.compat import Context, InlineJobExecutor
from ltdask.compat.datasets import MemoryDataSet
from ltdask.compat.tiles import DataTile
from ltdask.exceptions import DataSetError
from ltdask.udf import UDF


@pytest.fixture
def ctx():
    return Context(executor=InlineJobExecutor())


def _bounds(ds):
    return [(p.start, p.stop) for p in ds.get_partitions()]


@pytest.mark.parametrize(
    ("nav", "count", "bounds"),
    [
        pytest.param((16, 16), 2, [(0, 128), (128, 256)], id="halves"),
        pytest.param((30,), 2, [(0, 15), (15, 30)], id="1d"),
        # LiberTEM's boundaries 13, 26 rounded to whole rows of 8
        pytest.param((5, 8), 3, [(0, 16), (16, 24), (24, 40)], id="rounded-to-rows"),
        pytest.param((2, 3), 4, [(0, 2), (2, 3), (3, 5), (5, 6)], id="cut-rows"),
    ],
)
def test_num_partitions(ctx, nav, count, bounds):
    data = np.zeros((*nav, 2, 2), dtype=np.float32)
    assert _bounds(MemoryDataSet(data=data, num_partitions=count)) == bounds
    assert _bounds(ctx.load("memory", data=data, num_partitions=count)) == bounds


def test_more_partitions_than_frames_gives_one_per_frame():
    with pytest.warns(UserWarning, match=r"num_partitions=9 is more than the 6 frames"):
        ds = MemoryDataSet(data=np.zeros((2, 3, 2, 2)), num_partitions=9)
    assert _bounds(ds) == [(i, i + 1) for i in range(6)]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"num_partitions": 0}, ValueError, r"num_partitions=0; expected at least 1"),
        ({"num_partitions": 2.5}, ValueError, r"num_partitions=2.5; expected a whole number"),
        ({"tileshape": (4, 4)}, DataSetError, r"tileshape=\(4, 4\); expected 3 numbers"),
        ({"tileshape": (1, 9, 4)}, DataSetError, r"signal extent of 1 up to the frame's"),
        ({"tileshape": (0, 4, 4)}, DataSetError, r"expected at least one frame"),
    ],
)
def test_bad_settings(kwargs, error, match):
    with pytest.raises(error, match=match):
        MemoryDataSet(data=np.zeros((2, 2, 8, 8)), **kwargs)


#: what the UDFs below saw (they run in this process: the inline executor)
SEEN: list = []


class _TileSumUDF(UDF):
    """Per-frame sums, recording the shapes of the tiles it gets."""

    def get_result_buffers(self):
        return {"frame_sum": self.buffer(kind="nav", dtype=np.float64)}

    def process_tile(self, tile):
        SEEN.append(tile.shape)
        assert self.results.frame_sum.shape == (tile.shape[0],)
        assert self.meta.slice.shape.nav[0] == tile.shape[0]
        self.results.frame_sum[:] += tile.sum(axis=(1, 2))


def _run_tiles(ctx, ds, roi=None):
    SEEN.clear()
    res = ctx.run_udf(dataset=ds, udf=_TileSumUDF(), roi=roi)
    return res["frame_sum"].data, set(SEEN)


def test_tileshape_is_every_tile_shape(ctx):
    data = np.random.default_rng(3).random((2, 8, 10, 10)).astype(np.float32)
    ds = MemoryDataSet(data=data, tileshape=(3, 4, 4), num_partitions=2)
    sums, shapes = _run_tiles(ctx, ds)
    # partitions of 8 frames: depths 3, 3, 2; a 10-pixel side: extents 4, 4, 2
    assert shapes == {(d, h, w) for d in (3, 2) for h in (4, 2) for w in (4, 2)}
    np.testing.assert_allclose(sums, data.sum(axis=(2, 3)), rtol=1e-5)


def test_tileshape_with_roi(ctx):
    data = np.random.default_rng(4).random((4, 4, 6, 6)).astype(np.float32)
    roi = np.random.default_rng(5).random((4, 4)) > 0.5
    ds = ctx.load("memory", data=data, tileshape=(1, 6, 6), num_partitions=2)
    sums, shapes = _run_tiles(ctx, ds, roi=roi)
    assert shapes == {(1, 6, 6)}
    np.testing.assert_allclose(sums, np.where(roi, data.sum(axis=(2, 3)), np.nan), rtol=1e-5)


class _PartitionUDF(UDF):
    def get_result_buffers(self):
        return {"frame_sum": self.buffer(kind="nav", dtype=np.float64)}

    def process_partition(self, partition):
        SEEN.append(partition.shape[0])
        assert self.meta.slice == self.meta._partition_slice
        self.results.frame_sum[:] = partition.sum(axis=(1, 2))


def test_partition_udfs_get_whole_partitions_whatever_the_tileshape(ctx):
    data = np.random.default_rng(6).random((30, 3, 7)).astype(np.float32)
    ds = MemoryDataSet(data=data, tileshape=(3, 3, 7), num_partitions=2)
    SEEN.clear()
    res = ctx.run_udf(dataset=ds, udf=_PartitionUDF())
    assert sorted(SEEN) == [15, 15]
    np.testing.assert_allclose(res["frame_sum"].data, data.sum(axis=(1, 2)), rtol=1e-5)


class _FrameUDF(UDF):
    def get_result_buffers(self):
        return {"frame_sum": self.buffer(kind="nav", dtype=np.float64)}

    def process_frame(self, frame):
        self.results.frame_sum[:] = frame.sum()


def test_frame_udfs_refuse_a_tileshape_that_cuts_the_frame(ctx):
    data = np.zeros((30, 3, 7), dtype=np.float32)
    ds = MemoryDataSet(data=data, tileshape=(3, 3, 5), num_partitions=2)
    with pytest.raises(ValueError, match=r"tile shape \(3, 3, 5\) is not a multiple"):
        ctx.run_udf(dataset=ds, udf=_FrameUDF())
    whole = MemoryDataSet(data=data + 1, tileshape=(3, 3, 7), num_partitions=2)
    np.testing.assert_array_equal(ctx.run_udf(dataset=whole, udf=_FrameUDF())["frame_sum"].data, 21)


class _TileAttributeUDF(UDF):
    def get_result_buffers(self):
        return {"x": self.buffer(kind="nav")}

    def process_tile(self, tile):
        getattr(tile, self.params.attribute)


@pytest.mark.parametrize(
    ("attribute", "where"),
    [("tile_slice", "self.meta.slice"), ("scheme_idx", "self.meta.tiling_scheme_idx")],
)
def test_tile_attributes_point_to_meta(ctx, attribute, where):
    ds = ctx.load("memory", data=np.ones((2, 2, 4, 4)))
    with pytest.raises(AttributeError, match=rf"{attribute} of a tile: .* use {where} "):
        ctx.run_udf(dataset=ds, udf=_TileAttributeUDF(attribute=attribute))


def test_data_tile():
    where = Slice((6, 0, 2), Shape((2, 3, 2), sig_dims=2))
    data = np.arange(12.0).reshape((2, 3, 2))
    tile = DataTile(data, tile_slice=where, scheme_idx=1)
    assert (tile.shape, tile.size, tile.dtype, tile.scheme_idx) == ((2, 3, 2), 12, data.dtype, 1)
    np.testing.assert_array_equal(tile.flat_data, data.reshape((2, 6)))
    assert DataTile(tile, where, 1).data is data
    with pytest.raises(ValueError, match=r"data of shape \(2, 3\) does not fit tile_slice"):
        DataTile(np.zeros((2, 3)), where, 0)
