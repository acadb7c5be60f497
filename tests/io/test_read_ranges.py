"""strided_read_ranges against hand-computed ranges and a pure-Python reference."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from ltdask.io.read_ranges import strided_read_ranges

# two files: frames 0-1 after a 10-byte header, frames 2-4 after a 6-byte header
FILES = np.array([[0, 2, 10], [2, 5, 6]], dtype=np.int64)
SIG = np.array([3, 4], dtype=np.int64)
# uint16 pixels (24 bytes a frame) with a 2-byte header and footer: a stride of 28 bytes


def slices(*boxes):
    return np.array([[origin, shape] for origin, shape in boxes], dtype=np.int64)


def test_whole_frames_hand_computed():
    frames = np.array([1, 2, -1, 4], dtype=np.int64)
    tiles, ranges = strided_read_ranges(frames, 2, slices(((0, 0), (3, 4))), FILES, SIG, 16, 2, 2)
    np.testing.assert_array_equal(tiles, [[0, 2, 0], [2, 2, 0]])
    assert ranges.shape == (2, 2, 4)
    # frame 1: file 0, 10 + 1 * 28 + 2 = 40; frame 2: file 1, 6 + 0 + 2 = 8 (slot 1: px 12)
    np.testing.assert_array_equal(ranges[0], [[0, 40, 64, 0], [1, 8, 32, 12]])
    # slot 2 is empty (no row); frame 4: file 1, 6 + 2 * 28 + 2 = 64 into slot 1; then padding
    np.testing.assert_array_equal(ranges[1], [[1, 64, 88, 12], [0, 0, 0, 0]])


def test_column_slices_hand_computed():
    frames = np.array([0, 3], dtype=np.int64)
    boxes = slices(((0, 0), (3, 2)), ((0, 2), (3, 2)))
    tiles, ranges = strided_read_ranges(frames, 2, boxes, FILES, SIG, 16, 2, 2)
    np.testing.assert_array_equal(tiles, [[0, 2, 0], [0, 2, 1]])
    # frame 0 starts at 12 (file 0), frame 3 at 6 + 28 + 2 = 36 (file 1); rows are 8 bytes
    left = [
        [0, 12, 16, 0],
        [0, 20, 24, 2],
        [0, 28, 32, 4],
        [1, 36, 40, 6],
        [1, 44, 48, 8],
        [1, 52, 56, 10],
    ]
    right = [[f, a + 4, b + 4, d] for f, a, b, d in left]
    np.testing.assert_array_equal(ranges[0], left)
    np.testing.assert_array_equal(ranges[1], right)


def test_row_slices_are_one_run():
    frames = np.array([0], dtype=np.int64)
    boxes = slices(((0, 0), (2, 4)), ((2, 0), (1, 4)))
    tiles, ranges = strided_read_ranges(frames, 4, boxes, FILES, SIG, 16, 0, 0)
    np.testing.assert_array_equal(tiles, [[0, 1, 0], [0, 1, 1]])
    np.testing.assert_array_equal(ranges[:, 0], [[0, 10, 26, 0], [0, 26, 34, 0]])


def test_packed_pixels():
    """bits_per_px below 8 * itemsize: byte offsets scale with the bits."""
    files = np.array([[0, 3, 0]], dtype=np.int64)
    frames = np.array([2], dtype=np.int64)
    sig = np.array([4, 8], dtype=np.int64)
    tiles, ranges = strided_read_ranges(frames, 1, slices(((1, 0), (2, 8))), files, sig, 4, 0, 0)
    # 4-bit pixels: 16 bytes a frame; rows 1-2 of frame 2 are bytes 32 + 4 .. 32 + 12
    np.testing.assert_array_equal(ranges[0], [[0, 36, 44, 0]])


# --- against a pure-Python reference ------------------------------------------------------------


def reference_ranges(frames, depth, boxes, files, sig, itemsize, header, footer):
    """One row per contiguous pixel run, in the same order as the numba generator."""
    frame_px = math.prod(sig)
    stride = header + frame_px * itemsize + footer
    out = []
    for first in range(0, len(frames), depth):
        block = frames[first : first + depth]
        for origin, shape in boxes:
            rows = []
            slice_px = math.prod(shape)
            # pixel offsets of the slice in C order, grouped into runs of consecutive offsets
            index = np.indices(shape).reshape(len(sig), -1).T + np.array(origin)
            offsets = np.ravel_multi_index(index.T, sig)
            breaks = np.flatnonzero(np.diff(offsets) != 1) + 1
            runs = np.split(np.arange(offsets.size), breaks)
            for i, frame in enumerate(block):
                if frame < 0:
                    continue
                f = next(k for k, (a, b, _) in enumerate(files) if a <= frame < b)
                start = files[f][2] + (frame - files[f][0]) * stride + header
                for run in runs:
                    px = offsets[run[0]]
                    rows.append(
                        (
                            f,
                            start + px * itemsize,
                            start + (px + run.size) * itemsize,
                            i * slice_px + run[0],
                        )
                    )
            out.append(((first, len(block)), rows))
    return out


def grid_boxes(sig, tile):
    """``(origin, shape)`` of `tile`-sized boxes covering `sig` (smaller at the far borders)."""
    boxes = []
    for idx in np.ndindex(*(-(-s // t) for s, t in zip(sig, tile, strict=True))):
        origin = tuple(i * t for i, t in zip(idx, tile, strict=True))
        shape = tuple(min(t, s - o) for t, s, o in zip(tile, sig, origin, strict=True))
        boxes.append((origin, shape))
    return boxes


@st.composite
def layouts(draw):
    sig = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    tile = tuple(draw(st.integers(1, s)) for s in sig)
    counts = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    headers = draw(st.lists(st.integers(0, 9), min_size=len(counts), max_size=len(counts)))
    total = sum(counts)
    frames = draw(st.lists(st.integers(-1, total - 1), min_size=1, max_size=9))
    return (
        sig,
        tile,
        counts,
        headers,
        frames,
        draw(st.integers(1, 4)),
        draw(st.sampled_from([1, 2, 4, 8])),
        draw(st.integers(0, 5)),
        draw(st.integers(0, 5)),
    )


@given(layout=layouts())
def test_against_reference(layout):
    sig, tile, counts, headers, frames, depth, itemsize, header, footer = layout
    starts = np.cumsum([0, *counts])
    files = np.array([[starts[i], starts[i + 1], h] for i, h in enumerate(headers)], dtype=np.int64)
    boxes = grid_boxes(sig, tile)
    frames_arr = np.array(frames, dtype=np.int64)
    tiles, ranges = strided_read_ranges(
        frames_arr,
        depth,
        slices(*boxes),
        files,
        np.array(sig, dtype=np.int64),
        8 * itemsize,
        header,
        footer,
    )
    expected = reference_ranges(frames, depth, boxes, files.tolist(), sig, itemsize, header, footer)
    assert tiles.shape[0] == len(expected)
    for t, ((first, n), rows) in enumerate(expected):
        assert tuple(tiles[t]) == (first, n, t % len(boxes))
        got = ranges[t]
        used = got[: len(rows)]
        np.testing.assert_array_equal(used, np.array(rows, dtype=np.int64).reshape(-1, 4))
        # the rest is padding
        assert (got[len(rows) :, 1] == got[len(rows) :, 2]).all()
