"""DataSet.iter_tiles: tiles cover every (frame, pixel) of the requested positions exactly once
and hold the data, on the straight-view path and the decode path, with and without an ROI."""

from __future__ import annotations

import dask
import numpy as np
import pytest
from helpers.rawfiles import (
    DTYPES,
    converted_dtype,
    expected_scan,
    make_frames,
    read_stream,
    write_scan,
)
from hypothesis import given
from hypothesis import strategies as st

import ltdask
from ltdask import Negotiator, TilingPreferences, TilingScheme
from ltdask.io.tiling import TILE_MAX


def open_raw(paths, nav_shape, sig_shape, dtype, sync_offset, layout):
    return ltdask.open_raw(
        paths,
        nav_shape,
        sig_shape,
        dtype,
        file_header_bytes=layout.get("file_header", 0),
        frame_header_bytes=layout.get("frame_header", 0),
        frame_footer_bytes=layout.get("frame_footer", 0),
        sync_offset=sync_offset,
    )


def collect(ds, scheme, dtype, selected):
    """Run iter_tiles over every partition's selected present positions; returns
    ``(count, data, tiles)`` indexed by flat nav position."""
    sig = ds.sig_shape
    count = np.zeros((ds.num_frames, *sig), dtype=np.int64)
    data = np.zeros((ds.num_frames, *sig), dtype=dtype)
    tiles = []
    for p in ds.get_partitions():
        positions = np.flatnonzero(selected[p.start : p.stop]) + p.start
        for tile, first, s in ds.iter_tiles(positions, scheme, dtype):
            assert tile.dtype == np.dtype(dtype)
            assert 1 <= tile.shape[0] <= scheme.depth
            assert tile.shape[1:] == tuple(scheme[s].shape)
            pos = positions[first : first + tile.shape[0]]
            index = (pos, *scheme[s].get())
            count[index] += 1
            data[index] = tile
            tiles.append((tile.flags.writeable, first, s))
    return count, data, tiles


def check_tiles(ds, expected, scheme, dtype, selected):
    count, data, _ = collect(ds, scheme, dtype, selected)
    flat = expected.reshape(count.shape).astype(dtype)
    assert (count[selected] == 1).all()
    assert (count[~selected] == 0).all()
    np.testing.assert_array_equal(data[selected], flat[selected])


@st.composite
def tile_cases(draw):
    dtype = draw(st.sampled_from(sorted(DTYPES.values())))
    sig_shape = tuple(draw(st.lists(st.integers(1, 9), min_size=1, max_size=3)))
    n_stream = draw(st.integers(1, 30))
    files = draw(st.integers(1, min(3, n_stream)))
    nav_shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=2)))
    sync_offset = draw(st.integers(-n_stream + 1, n_stream - 1))
    aligned = draw(st.booleans())
    if aligned:
        # multiples of every itemsize: the straight-view path applies to native dtypes
        layout = {k: 8 * draw(st.integers(0, 2)) for k in ("file_header", "frame_header")}
        layout["frame_footer"] = 8 * draw(st.integers(0, 1))
    else:
        layout = {k: draw(st.integers(0, 7)) for k in ("file_header", "frame_header")}
        layout["frame_footer"] = draw(st.integers(0, 7))
    if draw(st.booleans()):
        scheme = (
            "negotiated",
            draw(st.integers(64, 4096)),
            draw(st.sampled_from(["tile", "frame"])),
        )
    else:
        tileshape = (draw(st.integers(1, 8)), *(draw(st.integers(1, s)) for s in sig_shape))
        scheme = ("explicit", tileshape)
    partition_bytes = draw(st.integers(64, 2000))
    roi = draw(st.booleans())
    return (
        dtype,
        sig_shape,
        n_stream,
        files,
        nav_shape,
        sync_offset,
        layout,
        scheme,
        partition_bytes,
        roi,
    )


@given(case=tile_cases(), seed=st.integers(0, 2**32 - 1))
def test_iter_tiles_property(tmp_path_factory, case, seed):
    (dtype, sig_shape, n_stream, files, nav_shape, sync_offset, layout, how, pbytes, roi) = case
    rng = np.random.default_rng(seed)
    stream = make_frames(rng, n_stream, sig_shape, dtype)
    paths = write_scan(tmp_path_factory.mktemp("tiles"), stream, files=files, **layout)
    expected, valid = expected_scan(
        read_stream(paths, sig_shape, dtype, **layout), nav_shape, sync_offset
    )
    # iter_tiles is asked only for positions whose frames exist
    selected = valid.reshape(-1).copy()
    if roi:
        selected &= rng.random(selected.size) < 0.6
    with dask.config.set({"ltdask.partition-bytes": pbytes, "ltdask.min-partitions": 1}):
        ds = open_raw(paths, nav_shape, sig_shape, dtype, sync_offset, layout)
        for read_dtype in (ds.dtype, converted_dtype(dtype)):
            if how[0] == "negotiated":
                consumer = TilingPreferences(how[2], depth=TILE_MAX)
                scheme = ds.negotiate([consumer], read_dtype, negotiator=Negotiator(how[1]))
            else:
                scheme = TilingScheme.make_for_shape(how[1], sig_shape)
            check_tiles(ds, expected, scheme, read_dtype, selected)


SIG = (6, 8)


@pytest.mark.parametrize(
    "dtype, layout, files, views",
    [
        pytest.param("<u2", {}, 1, True, id="u16-straight"),
        pytest.param("<f4", {"file_header": 8, "frame_header": 4}, 1, True, id="f32-aligned"),
        pytest.param("<f4", {}, 3, True, id="f32-3files-straight"),
        pytest.param("<f4", {"frame_header": 2}, 1, False, id="f32-misaligned-decode"),
        pytest.param(">u2", {}, 1, False, id="u16-bigendian-decode"),
    ],
)
@pytest.mark.parametrize("roi", [pytest.param(False, id="all"), pytest.param(True, id="roi")])
def test_straight_and_decode_paths(tmp_path, dtype, layout, files, views, roi):
    """Native, aligned data is handed out as read-only views; everything else is decoded."""
    nav_shape = (4, 6)
    stream = make_frames(np.random.default_rng(0), 24, SIG, dtype)
    paths = write_scan(tmp_path, stream, files=files, **layout)
    expected, _ = expected_scan(read_stream(paths, SIG, dtype, **layout), nav_shape)
    selected = np.ones(24, dtype=bool)
    if roi:
        selected[[0, 3, 4, 11, 17, 20]] = False
    with dask.config.set({"ltdask.partition-bytes": 6 * 8 * 4 * 12, "ltdask.min-partitions": 1}):
        ds = open_raw(paths, nav_shape, SIG, dtype, 0, layout)
    scheme = TilingScheme.make_for_shape((5, 4, 8), SIG)
    count, data, tiles = collect(ds, scheme, ds.dtype, selected)
    assert (count[selected] == 1).all() and (count[~selected] == 0).all()
    np.testing.assert_array_equal(data[selected], expected.reshape(24, *SIG)[selected])
    writeable = [w for w, _, _ in tiles]
    if views and not roi and files == 1:
        assert not any(writeable)
    elif not views:
        assert all(writeable)
    # reading as another dtype always decodes
    check_tiles(ds, expected, scheme, "float64", selected)


def test_tiles_end_where_files_end(tmp_path):
    """On the straight path tiles are views that end where a file ends (no copies)."""
    stream = make_frames(np.random.default_rng(1), 10, SIG, "<f4")
    paths = write_scan(tmp_path, stream, files=3)  # 3, 1 and 6 frames
    ds = ltdask.open_raw(paths, (10,), SIG, "float32")
    scheme = TilingScheme.make_for_shape((4, 6, 8), SIG)
    got = list(ds.iter_tiles(np.arange(10), scheme, ds.dtype))
    assert [(first, t.shape[0]) for t, first, _ in got] == [(0, 3), (3, 1), (4, 4), (8, 2)]
    assert not any(t.flags.owndata for t, _, _ in got)
    np.testing.assert_array_equal(np.concatenate([t for t, _, _ in got]), stream)


def test_files_much_shorter_than_tiles_are_copied_into_whole_tiles(tmp_path):
    stream = make_frames(np.random.default_rng(1), 40, SIG, "<f4")
    paths = write_scan(tmp_path, stream, files=20)
    ds = ltdask.open_raw(paths, (40,), SIG, "float32")
    scheme = TilingScheme.make_for_shape((16, 6, 8), SIG)
    # (copied as they come: the tiles share one reused buffer)
    got = [(t.copy(), first) for t, first, _ in ds.iter_tiles(np.arange(40), scheme, ds.dtype)]
    assert [(first, t.shape[0]) for t, first in got] == [(0, 16), (16, 16), (32, 8)]
    np.testing.assert_array_equal(np.concatenate([t for t, _ in got]), stream)


def test_short_files_between_long_ones_are_copied_the_long_ones_viewed(tmp_path):
    """A run of short files between long ones (as runs of HDF5 chunks in Velox EMD files)
    is copied into whole tiles; the long files give views of themselves."""
    stream = make_frames(np.random.default_rng(3), 46, SIG, "<f4")
    sizes = [20, 2, 2, 2, 20]
    paths, start = [], 0
    for i, n in enumerate(sizes):
        paths += write_scan(tmp_path, stream[start : start + n], name=f"part{i}")
        start += n
    ds = ltdask.open_raw(paths, (46,), SIG, "float32")
    scheme = TilingScheme.make_for_shape((16, 6, 8), SIG)
    tiles = [(t.copy(), first, t) for t, first, _ in ds.iter_tiles(np.arange(46), scheme, ds.dtype)]
    assert [(first, len(t)) for t, first, _ in tiles] == [
        (0, 16),
        (16, 4),
        (20, 6),
        (26, 16),
        (42, 4),
    ]
    np.testing.assert_array_equal(np.concatenate([t for t, _, _ in tiles]), stream)
    mapped = [not t.flags.writeable for _, _, t in tiles]  # (views of the files: read-only)
    assert mapped == [True, True, False, True, True]


def test_read_frames_missing_are_zero(tmp_path):
    stream = make_frames(np.random.default_rng(2), 5, SIG, ">u2")
    paths = write_scan(tmp_path, stream)
    ds = ltdask.open_raw(paths, (9,), SIG, ">u2", sync_offset=-2)
    sig = ltdask.Slice((1, 2), ltdask.Shape((3, 4), sig_dims=2))
    got = ds.read_frames(np.arange(9), sig, "uint16")
    expected = np.zeros((9, 3, 4), dtype="uint16")
    expected[2:7] = stream[:, 1:4, 2:6]
    np.testing.assert_array_equal(got, expected)
