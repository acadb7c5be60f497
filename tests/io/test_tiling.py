"""Tiling negotiation: pinned tile shapes for known cases, invariants for random ones."""

from __future__ import annotations

import math
import pickle

import dask.array as da
import numpy as np
import pytest
from dask.base import tokenize
from hypothesis import given
from hypothesis import strategies as st

import ltdask
from ltdask import Negotiator, TilingPreferences, TilingScheme
from ltdask.common import Shape, Slice
from ltdask.io import ArrayDataSet
from ltdask.io.tiling import TILE_MAX, TILE_SIZE_BEST_FIT, VIEW_DEPTH

MIB = 2**20
TILE = TilingPreferences()
FRAME = TilingPreferences("frame")
PARTITION = TilingPreferences("partition")


def lazy_dataset(shape, dtype, sig_dims=2, cls=ArrayDataSet, **kwargs):
    """A dataset of `shape` that costs no memory (a lazy dask array of zeros)."""
    return cls(da.zeros(shape, dtype=dtype, chunks=-1), sig_dims=sig_dims, **kwargs)


class BaseShaped(ArrayDataSet):
    """A format that stores frames in `base`-sized blocks and always decodes them (so tiles
    are never views of the files and must follow the blocks)."""

    def __init__(self, array, sig_dims=2, base=(64, 64), decodes=True):
        self._base = tuple(base)
        self._decodes = decodes
        super().__init__(array, sig_dims=sig_dims)

    def get_base_shape(self, roi=None):
        return self._base

    def need_decode(self, read_dtype, roi=None):
        return self._decodes or super().need_decode(read_dtype, roi)


def case(nav, sig, dtype, consumers, read_dtype, frames, tileshape, intent, *, id, roi=False):
    return pytest.param(
        nav, sig, dtype, consumers, read_dtype, frames, roi, tileshape, intent, id=id
    )


F32, U8 = "f4", "u1"
NAV, SIG = (16, 16), (128, 128)
SMALL = TilingPreferences(total_size=2**16)
DEEP = TilingPreferences(depth=1000)

# Negotiator(tile_bytes=1 MiB). Without an ROI or a dtype change the tiles are views of the
# data and whole frames while a frame fits the tile size; with an ROI they are decoded into a
# buffer and cut into rows.
PINNED = [
    case(NAV, SIG, F32, [TILE], F32, 128, (64, 32, 128), "tile", roi=True, id="f32-roi"),
    case(NAV, SIG, F32, [TILE], F32, 128, (16, 128, 128), "tile", id="f32-views-whole-frames"),
    case(NAV, SIG, F32, [TILE], "f8", 128, (32, 32, 128), "tile", id="f32-read-as-f64"),
    case(NAV, SIG, F32, [FRAME], F32, 128, (16, 128, 128), "frame", id="f32-frame"),
    case(NAV, SIG, F32, [FRAME], F32, 128, (16, 128, 128), "frame", roi=True, id="f32-frame-roi"),
    case(NAV, SIG, F32, [PARTITION], F32, 128, (128, 128, 128), "partition", id="f32-partition"),
    case(NAV, SIG, F32, [TILE, PARTITION], F32, 128, (128, 128, 128), "partition", id="tile+part"),
    case(
        NAV,
        SIG,
        F32,
        [TilingPreferences(depth=TILE_MAX)],
        F32,
        128,
        (64, 32, 128),
        "tile",
        roi=True,
        id="f32-depth-max-roi",
    ),
    case(NAV, SIG, F32, [SMALL], F32, 128, (4, 32, 128), "tile", roi=True, id="f32-64k-roi"),
    case(NAV, SIG, F32, [SMALL], F32, 128, (1, 128, 128), "tile", id="f32-64k-views-one-frame"),
    case(NAV, SIG, F32, [DEEP], F32, 8, (8, 128, 128), "tile", id="depth-beyond-partition"),
    case(
        NAV, SIG, F32, [DEEP], F32, 8, (8, 128, 128), "tile", roi=True, id="depth-beyond-part-roi"
    ),
    case((4, 4), (37, 53), F32, [TILE], F32, 16, (16, 37, 53), "tile", id="odd-37x53"),
    case((4, 4), (37, 53), F32, [TILE], F32, 16, (16, 37, 53), "tile", roi=True, id="odd-roi"),
    case((4, 4), (37, 53), F32, [FRAME], F32, 16, (16, 37, 53), "frame", id="odd-frame"),
    # the minimum signal size (16 KiB) beats a tiny size preference
    case(
        (4, 4),
        (37, 53),
        F32,
        [TilingPreferences(total_size=1000)],
        F32,
        16,
        (1, 37, 53),
        "tile",
        roi=True,
        id="odd-tiny-tile-min-sig-size",
    ),
    case((8, 8), (256, 256), U8, [TILE], U8, 64, (64, 64, 256), "tile", roi=True, id="u8-roi"),
    case((8, 8), (256, 256), U8, [TILE], U8, 64, (16, 256, 256), "tile", id="u8-views"),
    case(
        (8, 8),
        (256, 256),
        U8,
        [TilingPreferences(total_size=4096)],
        U8,
        64,
        (1, 64, 256),
        "tile",
        roi=True,
        id="u8-min-sig-size-64-rows",
    ),
    # a frame larger than the tile size is cut into rows even on the view path
    case((8, 8), (1024, 1024), F32, [TILE], F32, 64, (64, 4, 1024), "tile", id="f32-1024x1024"),
    case((8, 8), (1024, 1024), F32, [FRAME], F32, 64, (1, 1024, 1024), "frame", id="1024-frame"),
    case((4,), (10, 20, 30), F32, [TILE], F32, 4, (4, 10, 20, 30), "tile", id="sig3d-fits"),
    case((100,), (1000,), F32, [TILE], F32, 100, (100, 1000), "tile", id="sig1d"),
]


@pytest.mark.parametrize(
    "nav, sig, dtype, consumers, read_dtype, partition_frames, roi, tileshape, intent", PINNED
)
def test_pinned_tile_shapes(
    nav, sig, dtype, consumers, read_dtype, partition_frames, roi, tileshape, intent
):
    ds = lazy_dataset(nav + sig, dtype, sig_dims=len(sig))
    roi = np.ones(math.prod(nav), dtype=bool) if roi else None
    scheme = Negotiator(tile_bytes=MIB).get_scheme(
        consumers, ds, read_dtype, partition_frames=partition_frames, roi=roi
    )
    assert scheme.tileshape == tileshape
    assert scheme.intent == intent
    assert_covers(scheme, ds.sig_shape)


def test_frame_and_tile_consumers_get_whole_frames():
    ds = lazy_dataset(NAV + SIG, F32)
    scheme = Negotiator(tile_bytes=MIB).get_scheme([TILE, FRAME], ds, F32, partition_frames=128)
    assert scheme.intent == "frame"
    assert scheme.tileshape[1:] == SIG
    assert scheme.depth * 128 * 128 * 4 <= MIB


@pytest.mark.parametrize(
    "sig, decodes, consumers, tileshape, n_slices",
    [
        pytest.param((256, 256), True, [TILE], (64, 64, 64), 16, id="base-64x64"),
        pytest.param(
            (256, 256),
            True,
            [TilingPreferences(total_size=2**14)],
            (1, 64, 64),
            16,
            id="base-64x64-small",
        ),
        pytest.param((1024, 1024), False, [TILE], (64, 64, 64), 256, id="base-64x64-views"),
        pytest.param((256, 256), True, [FRAME], (4, 256, 256), 1, id="base-ignored-by-frame"),
        pytest.param((256, 256), True, [PARTITION], (64, 256, 256), 1, id="base-ignored-by-part"),
    ],
)
def test_base_shape_forces_sig_slicing(sig, decodes, consumers, tileshape, n_slices):
    ds = lazy_dataset((8, 8) + sig, F32, cls=BaseShaped, decodes=decodes)
    scheme = Negotiator(tile_bytes=MIB).get_scheme(consumers, ds, F32, 64)
    assert scheme.tileshape == tileshape
    assert len(scheme) == n_slices
    assert_covers(scheme, ds.sig_shape)
    if n_slices > 1:
        for sl in scheme:
            assert all(o % 64 == 0 for o in sl.origin)


def test_base_shape_uneven_frame():
    """Base blocks that do not divide the frame: border slices are smaller."""
    ds = lazy_dataset((4, 4, 100, 70), F32, cls=BaseShaped, base=(16, 32))
    scheme = Negotiator(tile_bytes=2**14).get_scheme([TILE], ds, F32, 16)
    assert_covers(scheme, ds.sig_shape)
    for t, s, b in zip(scheme.tileshape[1:], (100, 70), (16, 32), strict=True):
        assert t == s or t % b == 0
    assert scheme.tileshape[1:] != (100, 70)
    assert sum(scheme.sig_chunks[1]) == 70 and sum(scheme.sig_chunks[0]) == 100


@pytest.fixture
def raw_u16(tmp_path):
    def open_(dtype):
        path = tmp_path / f"scan-{dtype.replace('<', 'le').replace('>', 'be')}.raw"
        np.zeros((32, 64, 64), dtype=dtype).tofile(path)
        return ltdask.open_raw(path, (32,), (64, 64), dtype)

    return open_


MAX = TilingPreferences(depth=TILE_MAX, total_size=TILE_MAX)


@pytest.mark.parametrize(
    "dtype, consumers, read_dtype, tileshape",
    [
        pytest.param("<u2", [TILE], "u2", (8, 64, 64), id="u16-views"),
        pytest.param("<u2", [TILE], "f4", (4, 64, 64), id="u16-as-f32"),
        pytest.param(">u2", [TILE], "u2", (8, 64, 64), id="u16-bigendian"),
        # as large as possible is still no larger than the tile size
        pytest.param("<u2", [MAX], "u2", (8, 64, 64), id="u16-views-max"),
        pytest.param(">u2", [MAX], "u2", (8, 64, 64), id="u16-bigendian-max"),
        pytest.param("<u2", [MAX], "f4", (4, 64, 64), id="u16-as-f32-max"),
        pytest.param(">u2", [FRAME], "f4", (4, 64, 64), id="u16-bigendian-frame"),
        pytest.param(">u2", [PARTITION], "f4", (32, 64, 64), id="u16-bigendian-partition"),
    ],
)
def test_pinned_raw(raw_u16, dtype, consumers, read_dtype, tileshape):
    ds = raw_u16(dtype)
    scheme = Negotiator(tile_bytes=2**16).get_scheme(consumers, ds, read_dtype, 32)
    assert scheme.tileshape == tileshape


@pytest.mark.parametrize(
    "max_io_size, tileshape",
    [
        pytest.param(2**14, (2, 64, 64), id="smaller"),
        pytest.param(2**18, (32, 64, 64), id="larger"),
    ],
)
def test_max_io_size_override(raw_u16, max_io_size, tileshape):
    ds = raw_u16("<u2")
    negotiator = Negotiator(tile_bytes=2**16)
    scheme = negotiator.get_scheme([MAX], ds, "u2", 32, max_io_size=max_io_size)
    assert scheme.tileshape == tileshape


def test_dataset_negotiate_uses_largest_partition(raw_u16):
    import dask

    with dask.config.set({"ltdask.partition-bytes": 64 * 64 * 4 * 12, "ltdask.min-partitions": 1}):
        ds = raw_u16("<u2")
        assert [p.num_frames for p in ds.get_partitions()] == [12, 12, 8]
        scheme = ds.negotiate([PARTITION], "u2", negotiator=Negotiator(tile_bytes=MIB))
    assert scheme.tileshape == (12, 64, 64)


def test_default_negotiator_uses_config():
    import dask

    ds = lazy_dataset(NAV + SIG, F32)
    roi = np.ones(256, dtype=bool)
    with dask.config.set({"ltdask.tile-bytes": "256KiB"}):
        assert Negotiator().tile_bytes == 2**18
        assert Negotiator().get_scheme([TILE], ds, F32, 128, roi=roi).tileshape == (16, 32, 128)
        assert Negotiator().get_scheme([TILE], ds, F32, 128).tileshape == (4, 128, 128)
    with dask.config.set({"ltdask.tile-bytes": "auto"}):
        assert MIB <= Negotiator().tile_bytes <= 8 * MIB


def test_no_consumers_means_default_tiles():
    ds = lazy_dataset((16, 16, 128, 128), "f4")
    negotiator = Negotiator(tile_bytes=MIB)
    assert negotiator.get_scheme([], ds, "f4", 128) == negotiator.get_scheme([TILE], ds, "f4", 128)


# --- TilingScheme --------------------------------------------------------------------------------


def assert_covers(scheme: TilingScheme, sig_shape):
    """Every pixel of the frame lies in exactly one slice of `scheme`."""
    count = np.zeros(sig_shape, dtype=int)
    for sl in scheme:
        assert sl.shape.sig_dims == len(sig_shape)
        assert not sl.is_null()
        count[sl.get()] += 1
    np.testing.assert_array_equal(count, 1)


def test_scheme_make_for_shape():
    scheme = TilingScheme.make_for_shape((4, 3, 5), (7, 10))
    assert scheme.depth == 4
    assert scheme.tileshape == (4, 3, 5)
    assert len(scheme) == 6
    assert scheme.sig_chunks == ((3, 3, 1), (5, 5))
    assert scheme[5] == Slice((6, 5), Shape((1, 5), sig_dims=2))
    assert_covers(scheme, (7, 10))
    assert scheme.slices_array.shape == (6, 2, 2)
    np.testing.assert_array_equal(scheme.slices_array[4], [[6, 0], [1, 5]])


def test_scheme_equality_token_pickle():
    a = TilingScheme.make_for_shape((4, 3, 5), (7, 10))
    b = TilingScheme.make_for_shape((4, 3, 5), (7, 10))
    c = TilingScheme.make_for_shape((4, 3, 5), (7, 10), intent="frame")
    d = TilingScheme.make_for_shape((2, 3, 5), (7, 10))
    assert a == b and hash(a) == hash(b)
    assert a != c and a != d
    assert tokenize(a) == tokenize(b)
    assert len({tokenize(a), tokenize(c), tokenize(d)}) == 3
    assert pickle.loads(pickle.dumps(a)) == a
    assert "(4, 3, 5)" in repr(a)


def test_scheme_errors():
    with pytest.raises(ValueError, match="at least one signal slice"):
        TilingScheme([], depth=1)
    with pytest.raises(ValueError, match="tile depth must be >= 1, got 0"):
        TilingScheme.make_for_shape((0, 3, 5), (7, 10))


# --- invariants on random cases ------------------------------------------------------------------

DTYPES = ["u1", "<u2", "<i4", "<f4", "<f8", "<c16", ">u2"]


@st.composite
def preferences(draw):
    method = draw(st.sampled_from(["tile", "tile", "frame", "partition"]))
    depth = draw(st.one_of(st.just(32), st.just(TILE_MAX), st.integers(1, 400)))
    total = draw(st.one_of(st.just(TILE_SIZE_BEST_FIT), st.just(TILE_MAX), st.integers(1, 8 * MIB)))
    return TilingPreferences(method, depth=depth, total_size=total)


@st.composite
def negotiation_cases(draw):
    sig_dims = draw(st.integers(1, 3))
    limit = {1: 5000, 2: 300, 3: 40}[sig_dims]
    sig = tuple(draw(st.lists(st.integers(1, limit), min_size=sig_dims, max_size=sig_dims)))
    nav = (draw(st.integers(1, 500)),)
    dtype = draw(st.sampled_from(DTYPES))
    read_dtype = draw(st.sampled_from([dtype, "<f4", "<f8"]))
    if np.dtype(dtype).kind == "c":
        read_dtype = draw(st.sampled_from([dtype, "<c8"]))
    base = None
    if draw(st.booleans()):
        base = (tuple(draw(st.integers(1, s)) for s in sig), draw(st.booleans()))
    consumers = draw(st.lists(preferences(), min_size=1, max_size=3))
    partition_frames = draw(st.integers(1, nav[0]))
    tile_bytes = draw(st.integers(256, 4 * MIB))
    max_io = draw(st.one_of(st.none(), st.integers(1, 16 * MIB)))
    return nav, sig, dtype, read_dtype, base, consumers, partition_frames, tile_bytes, max_io


@given(case=negotiation_cases())
def test_negotiation_invariants(case):
    nav, sig, dtype, read_dtype, base, consumers, partition_frames, tile_bytes, max_io = case
    if base is None:
        ds = lazy_dataset(nav + sig, dtype, sig_dims=len(sig))
    else:
        shape, decodes = base
        ds = lazy_dataset(
            nav + sig, dtype, sig_dims=len(sig), cls=BaseShaped, base=shape, decodes=decodes
        )
    negotiator = Negotiator(tile_bytes=tile_bytes)
    scheme = negotiator.get_scheme(consumers, ds, read_dtype, partition_frames, max_io_size=max_io)

    assert_covers(scheme, sig)
    assert 1 <= scheme.depth <= partition_frames
    itemsize = np.dtype(read_dtype).itemsize
    frame_px = math.prod(sig)
    tile_px = scheme.depth * math.prod(scheme.tileshape[1:])
    methods = {c.method for c in consumers}

    if "partition" in methods:
        assert scheme.intent == "partition"
        assert scheme.tileshape == (partition_frames, *sig)
        return
    frame_bytes = frame_px * itemsize
    if "frame" in methods:
        assert scheme.intent == "frame"
        assert scheme.tileshape[1:] == sig
        assert tile_px * itemsize <= max(tile_bytes, frame_bytes)
        return

    assert scheme.intent == "tile"
    base_shape = tuple(min(b, s) for b, s in zip(ds.get_base_shape(), sig, strict=True))
    base_px = math.prod(base_shape)
    for t, s, b in zip(scheme.tileshape[1:], sig, base_shape, strict=True):
        assert t == s or t % b == 0, (scheme.tileshape, base_shape)
    for sl in scheme:
        for o, b in zip(sl.origin, base_shape, strict=True):
            assert o % b == 0

    # reads are no larger than the tile size unless the consumer or the dataset says otherwise
    io_max = max_io if max_io is not None else tile_bytes
    targets = [
        min(tile_bytes if c.total_size == TILE_SIZE_BEST_FIT else c.total_size, io_max)
        for c in consumers
    ]
    target = max(min(targets), base_px * itemsize)
    # views of the data are not cut below a whole frame where VIEW_DEPTH of them fit the
    # tile size (larger frames are cut, so that tiles are several frames deep)
    views = not ds.need_decode(read_dtype) and VIEW_DEPTH * frame_bytes <= min(tile_bytes, io_max)
    if views:
        assert scheme.tileshape[1:] == sig
    min_sig_px = min(ds.get_min_sig_size(), frame_px)
    if scheme.depth > 1:
        assert tile_px * itemsize <= target
    else:
        # one frame deep: the signal extent is the target or the smallest allowed block
        bound = max(target // itemsize, 2 * max(min_sig_px, base_px))
        assert tile_px <= (max(bound, frame_px) if views else bound)
    if target >= partition_frames * frame_bytes:
        assert scheme.tileshape == (partition_frames, *sig)
    if math.prod(scheme.tileshape[1:]) < frame_px:
        # the signal is sliced only to meet the size target
        assert (scheme.depth + 1) * math.prod(scheme.tileshape[1:]) * itemsize > target or (
            scheme.depth == partition_frames
        )


def test_large_frames_make_deep_tiles_and_partitions(tmp_path):
    """Frames of several MiB (a K2 camera's 1860 x 2048 uint16): partitions of at least
    32 frames, and tiles cut into rows so that they are several frames deep -- not
    partitions and tiles of one or a few whole frames, whose frame-sized per-pixel state
    (sums, results) costs more than reading them."""
    from ltdask.io.partition import MIN_FRAMES

    sig = (600, 1024)  # 1.2 MiB of uint16, 2.4 MiB as float32
    path = tmp_path / "big.raw"
    with open(path, "wb") as f:
        f.truncate(100 * math.prod(sig) * 2)
    import dask

    ds = ltdask.open_raw(path, (100,), sig, "uint16")
    with dask.config.set({"ltdask.partition-bytes": "32MiB"}):  # (13 frames as float32)
        parts = [p.num_frames for p in ds.get_partitions()]
    assert min(parts[:-1]) >= MIN_FRAMES and sum(parts) == 100
    tile_bytes = 2 * 2**20  # (fits one frame, not VIEW_DEPTH of them)
    scheme = ds.negotiate([TilingPreferences()], "uint16", negotiator=Negotiator(tile_bytes))
    assert scheme.depth >= VIEW_DEPTH
    assert scheme.tileshape[1] < sig[0]
    small = ltdask.open_raw(path, (100 * 75,), (80, 64), "uint16")  # (small frames: whole)
    assert small.negotiate([TilingPreferences()], "uint16").tileshape[1:] == (80, 64)


@pytest.mark.parametrize("fraction", [0.001, 0.01], ids=["0.1%", "1%"])
def test_slices_widened_around_excluded_pixels_keep_the_tile_size(fraction):
    """Excluded pixels' 3x3 neighbourhoods stay within one tile, so slices grow around
    them: the tiles get shallower and keep their bytes (they grew to 36 MiB at 1 %)."""
    ds = ltdask.from_array(np.zeros((64, 64, 256, 256), np.uint16))
    rng = np.random.default_rng(1)
    n = int(fraction * 256 * 256)
    excluded = np.array([rng.integers(0, 256, n), rng.integers(0, 256, n)])
    negotiator = Negotiator(8 * 2**20)
    plain = ds.negotiate([TilingPreferences()], np.float32, negotiator=negotiator)
    scheme = ds.negotiate(
        [TilingPreferences()], np.float32, negotiator=negotiator, excluded=excluded
    )
    assert scheme.tileshape[1] > plain.tileshape[1]  # (widened)
    size = scheme.depth * math.prod(scheme.tileshape[1:]) * 4
    assert size <= plain.depth * math.prod(plain.tileshape[1:]) * 4
    # no boundary between two tiles next to an excluded pixel
    rows = scheme.tileshape[1]
    cuts = set(range(rows, 256, rows))
    assert not cuts & (set(excluded[0].tolist()) | set((excluded[0] + 1).tolist()))
