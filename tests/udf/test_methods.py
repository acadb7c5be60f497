"""Processing methods, tiles and coordinates: method precedence and ``get_method`` errors,
tile depths that never span partitions, signal slices in ``process_tile``, whole partitions,
``meta.coordinates`` (with ROI and ``sync_offset``), and frames missing from the files
(LiberTEM architecture notes, 4.2 "Methods and tiling", "Coordinates and sync_offset")."""

from __future__ import annotations

import math

import dask
import numpy as np
import pytest
from helpers import udf_examples as ex
from helpers.udf_helpers import (
    PartialFrameArrayDataSet,
    SlicedArrayDataSet,
    check_variable,
    fill_nav,
    make_roi,
    nav_dims,
    open_dataset,
    partitions,
    random_data,
    roi_mask,
    selected,
)

import ltdask
from ltdask import UDFError

# -- method precedence --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    data = random_data((3, 5, 4, 3), "float32", seed=8)
    with partitions(4 * 12 * 4):
        ds = open_dataset("raw", data, tmp_path_factory.mktemp("methods"))
    return data, ds


@pytest.mark.parametrize(
    ("choice", "used"),
    [(None, "tile"), ("tile", "tile"), ("frame", "frame"), ("partition", "partition")],
)
def test_method_precedence_and_get_method(small, choice, used):
    data, ds = small
    udf = ex.AllMethodsUDF(method=choice)
    assert udf.get_method() is ltdask.UDF.UDF_METHOD(used)
    res = udf.compute(ds)
    assert (res["method"].values == used).all()


def test_get_method_errors(small):
    _, ds = small
    with pytest.raises(UDFError, match=r"get_method\(\) returned 42"):
        ex.AllMethodsUDF(method=42).lazy(ds)
    with pytest.raises(UDFError, match="chose 'tile' but the class has no process_tile"):
        ex.FrameOnlyUDF(method="tile").lazy(ds)
    with pytest.raises(UDFError, match="no process_partition"):
        ex.FrameOnlyUDF(method="partition").lazy(ds)
    assert ex.FrameOnlyUDF(method="frame").compute(ds)["x"].values.sum() == 15
    with pytest.raises(TypeError, match="implements none of process_tile"):
        ex.NoMethodUDF().get_method()
    with pytest.raises(TypeError, match="implements none of process_tile"):
        ex.NoMethodUDF().lazy(ds)


# -- tiles ----------------------------------------------------------------------------------------


def _check_tiles(res, data, roi, nav_shape, depth=None):
    """Tiles stay inside their partition (ROI-compressed), have the asked depth except at a
    partition's end, and cover every ROI frame and pixel exactly once."""
    mask = roi_mask(roi, nav_shape)
    count = int(mask.sum())
    nav_names = ("depth", "tile_origin", "partition_first", "partition_len", "visits")
    values = {k: res[k].values[mask] for k in nav_names}
    first, length = values["partition_first"], values["partition_len"]
    origin, d = values["tile_origin"], values["depth"]
    assert (origin >= first).all()
    assert (origin + d <= first + length).all()
    assert (values["visits"] == 1).all()
    if depth is not None:
        for p0, plen in set(zip(first.tolist(), length.tolist(), strict=True)):
            in_p = first == p0
            full, rest = divmod(plen, depth)
            want = sorted([depth] * full * depth + [rest] * rest)
            assert sorted(d[in_p].tolist()) == want, (p0, plen)
    # compressed positions are consecutive: the tile origin is the ROI index of its first frame
    index = np.arange(count)
    assert ((index >= origin) & (index < origin + d)).all()
    check_variable(res, "sig_visits", np.full(data.shape[-2:], count), True, ("det_y", "det_x"))
    sel = selected(data, roi, len(nav_shape)).astype(np.float64)
    check_variable(res, "sig_sum", sel.sum(axis=0), True, ("det_y", "det_x"))


@pytest.mark.parametrize("kind", ["memory", "raw"])
@pytest.mark.parametrize("roi_kind", ["none", "random"])
def test_tile_depths_never_span_partitions(kind, roi_kind, tmp_path):
    nav_shape, sig_shape = (2, 32), (4, 4)
    data = random_data((*nav_shape, *sig_shape), "float32", seed=2)
    with partitions(32 * 16 * 4):  # 2 partitions of 32 frames
        ds = open_dataset(kind, data, tmp_path)
    assert [p.num_frames for p in ds.get_partitions()] == [32, 32]
    roi = make_roi(roi_kind, nav_shape)
    udf = ex.FixedTileUDF(depth=7, total_size=7 * 16 * 4)
    res = udf.compute(ds, roi=roi)
    assert res["slices"].values.tolist() == [1]
    _check_tiles(res, data, roi, nav_shape, depth=7)


@pytest.mark.parametrize("roi_kind", ["none", "random"])
@pytest.mark.parametrize("tile_bytes", [28, 64, 100])
def test_sig_slices_in_process_tile_memory(roi_kind, tile_bytes):
    """Tiles cut into signal slices: ``tile.shape[1:] == meta.sig_slice.shape``, the
    ``meta.slice`` signal part and the tiling scheme agree, sig views are the slice."""
    nav_shape, sig_shape = (3, 5), (5, 7)
    data = random_data((*nav_shape, *sig_shape), "float32", seed=4)
    roi = make_roi(roi_kind, nav_shape)
    with partitions(4 * 35 * 4), dask.config.set({"ltdask.tile-bytes": tile_bytes}):
        ds = SlicedArrayDataSet(data)
        res = ex.TileRecorderUDF().compute(ds, roi=roi)
    assert res["slices"].values[0] > 1
    _check_tiles(res, data, roi, nav_shape)


@pytest.mark.parametrize("roi_kind", ["none", "random"])
def test_sig_slices_in_process_tile_raw(roi_kind, tmp_path):
    nav_shape, sig_shape = (3, 4), (64, 128)
    data = random_data((*nav_shape, *sig_shape), "float32", seed=5)
    roi = make_roi(roi_kind, nav_shape)
    with partitions("100KiB"), dask.config.set({"ltdask.tile-bytes": "16KiB"}):
        ds = open_dataset("raw", data, tmp_path)
        assert len(ds.get_partitions()) > 1
        res = ex.TileRecorderUDF().compute(ds, roi=roi)
        coords = ex.CoordAnyUDF(method="tile").compute(ds, roi=roi)
    assert res["slices"].values[0] == 2
    _check_tiles(res, data, roi, nav_shape)
    mask = roi_mask(roi, nav_shape)
    check_variable(
        coords, "visits", fill_nav(np.ones(nav_shape), mask, np.int64), mask, nav_dims(2)
    )


def test_whole_frame_methods_refuse_partial_frames():
    data = random_data((3, 4, 4, 5), "float32")
    ds = PartialFrameArrayDataSet(data)
    res = ex.CoordAnyUDF(method="tile").compute(ds)
    np.testing.assert_array_equal(res["visits"].values, 1)
    np.testing.assert_array_equal(res["sums"].values, data.sum(axis=(2, 3)))
    for method in ("frame", "partition"):
        # the negotiator refuses before the graph builder's own "need whole frames" check
        with pytest.raises(ValueError, match="need whole frames|not a multiple of the base"):
            ex.CoordAnyUDF(method=method).lazy(ds)


# -- methods, coordinates, ROI ---------------------------------------------------------------


def _corners(nav_shape):
    roi = np.zeros(nav_shape, dtype=bool)
    for corner in np.ndindex(*(2,) * len(nav_shape)):
        roi[tuple(c * (n - 1) for c, n in zip(corner, nav_shape, strict=True))] = True
    return roi


@pytest.mark.parametrize("method", ["tile", "frame", "partition"])
@pytest.mark.parametrize("kind", ["memory", "raw"])
@pytest.mark.parametrize("roi_kind", ["none", "random", "corners"])
@pytest.mark.parametrize("nav_shape", [(8, 8), (13,), (2, 3, 5)], ids=["2d", "1d", "3d"])
def test_coordinates_and_visits(method, kind, roi_kind, nav_shape, tmp_path):
    """Every ROI position is processed exactly once, with its true nav coordinates."""
    data = random_data((*nav_shape, 3, 4), "float32", seed=len(nav_shape))
    with partitions(4 * 12 * 4):
        ds = open_dataset(kind, data, tmp_path)
    roi = _corners(nav_shape) if roi_kind == "corners" else make_roi(roi_kind, nav_shape)
    mask = roi_mask(roi, nav_shape)
    res = ex.CoordAnyUDF(method=method).compute(ds, roi=roi)
    dims = nav_dims(len(nav_shape))
    coords = np.stack(np.indices(nav_shape), axis=-1)
    check_variable(
        res, "coords", fill_nav(coords, mask, np.int64), mask[..., None], dims + ("coords_0",)
    )
    check_variable(res, "visits", fill_nav(np.ones(nav_shape), mask, np.int64), mask, dims)
    sums = data.astype(np.float64).sum(axis=(-2, -1))
    check_variable(res, "sums", fill_nav(sums, mask, np.float64), mask, dims)


def test_several_methods_in_one_run(small):
    """A partition, a frame and a tile UDF share one pass; each sees its own method."""
    data, ds = small
    roi = make_roi("random", data.shape[:2])
    udfs = [ex.CoordAnyUDF(method=m) for m in ("partition", "frame", "tile")]
    together = ltdask.compute(ds, udfs, roi=roi)
    for udf, res in zip(udfs, together, strict=True):
        alone = udf.compute(ds, roi=roi)
        for name in res.data_vars:
            np.testing.assert_array_equal(res[name].values, alone[name].values)
            np.testing.assert_array_equal(
                res.coords[f"{name}_valid"].values, alone.coords[f"{name}_valid"].values
            )


# -- sync_offset and frames missing from the files ----------------------------------------------


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    """64 frames in a raw file."""
    frames = random_data((64, 3, 4), "float32", seed=11) + 1  # no frame sums to 0
    path = tmp_path_factory.mktemp("sync") / "stream.raw"
    frames.tofile(path)
    return frames, path


def _scan(frames, nav_shape, sync_offset):
    """Position p holds stream frame p + sync_offset; zeros where it does not exist."""
    n = math.prod(nav_shape)
    out = np.zeros((n, *frames.shape[1:]), frames.dtype)
    present = np.zeros(n, bool)
    for p in range(n):
        if 0 <= p + sync_offset < len(frames):
            out[p] = frames[p + sync_offset]
            present[p] = True
    return out.reshape((*nav_shape, *frames.shape[1:])), present.reshape(nav_shape)


def _open(path, nav_shape, sync_offset):
    with partitions(4 * 12 * 16):  # 16 frames per partition
        ds = ltdask.open_raw(
            path, nav_shape=nav_shape, sig_shape=(3, 4), dtype="float32", sync_offset=sync_offset
        )
        ds.get_partitions()
    return ds


SYNC_CASES = [
    pytest.param((8, 8), 0, id="8x8"),
    pytest.param((8, 8), 2, id="8x8-sync+2"),
    pytest.param((8, 8), -2, id="8x8-sync-2"),
    pytest.param((8, 8), 62, id="8x8-sync+62"),
    pytest.param((8, 8), -62, id="8x8-sync-62"),
    pytest.param((10, 8), 0, id="10x8-longer-than-file"),
    pytest.param((6, 8), 0, id="6x8-shorter-than-file"),
    pytest.param((10, 8), -5, id="10x8-sync-5"),
    pytest.param((64,), 3, id="64-sync+3"),
    pytest.param((2, 4, 8), -3, id="2x4x8-sync-3"),
]


@pytest.mark.parametrize(("nav_shape", "sync_offset"), SYNC_CASES)
@pytest.mark.parametrize("roi_kind", ["none", "random"])
@pytest.mark.parametrize("method", ["tile", "frame", "partition"])
def test_missing_frames_are_zero_and_invalid(stream, nav_shape, sync_offset, roi_kind, method):
    """ltdask, unlike LiberTEM, marks positions whose frame is not in the files invalid:
    their nav values are 0 (never NaN) and ``NAME_valid`` is False there."""
    frames, path = stream
    ds = _open(path, nav_shape, sync_offset)
    scan, present = _scan(frames, nav_shape, sync_offset)
    roi = make_roi(roi_kind, nav_shape)
    mask = roi_mask(roi, nav_shape)
    valid = mask & present
    res = ex.CoordAnyUDF(method=method).compute(ds, roi=roi)
    dims = nav_dims(len(nav_shape))
    sums = scan.astype(np.float64).sum(axis=(-2, -1))
    check_variable(res, "sums", fill_nav(sums, mask, np.float64), valid, dims)
    assert (res["sums"].values[mask & ~present] == 0).all()
    coords = np.stack(np.indices(nav_shape), axis=-1)
    expected = fill_nav(np.where(present[..., None], coords, 0), mask, np.int64)
    check_variable(res, "coords", expected, valid[..., None], dims + ("coords_0",))
    visits = fill_nav(present.astype(np.int64), mask, np.int64)
    check_variable(res, "visits", visits, valid, dims)


@pytest.mark.parametrize(("nav_shape", "sync_offset"), SYNC_CASES[1:5] + SYNC_CASES[7:8])
@pytest.mark.parametrize("roi_kind", ["none", "random"])
def test_missing_frames_in_merged_and_custom_results(stream, nav_shape, sync_offset, roi_kind):
    frames, path = stream
    ds = _open(path, nav_shape, sync_offset)
    scan, present = _scan(frames, nav_shape, sync_offset)
    roi = make_roi(roi_kind, nav_shape)
    mask = roi_mask(roi, nav_shape)
    sel = selected(scan, roi, len(nav_shape)).astype(np.float64)
    tiles, merged, custom = ltdask.compute(
        ds, [ex.TileSumUDF(), ex.MergeOnlyUDF(), ex.CustomValidMask()], roi=roi
    )
    dims = nav_dims(len(nav_shape))
    sums = scan.astype(np.float64).sum(axis=(-2, -1))
    # sig sums: missing frames contribute nothing (they read as zeros)
    check_variable(tiles, "sig_sum", sel.sum(axis=0), True, ("det_y", "det_x"))
    check_variable(tiles, "nav_sum", fill_nav(sums, mask, np.float64), mask & present, dims)
    check_variable(merged, "nav", fill_nav(sums, mask, np.float64), mask & present, dims)
    # get_valid_nav_mask() in get_results says which positions hold data that was read
    custom_sums = sums.astype(np.float32)
    if roi is None:
        expected, valid = custom_sums, present
    else:
        expected, valid = custom_sums[roi], present[roi]
    names = tuple(f"custom_2d_{i}" for i in range(expected.ndim))
    check_variable(custom, "custom_2d", expected, valid, names)
