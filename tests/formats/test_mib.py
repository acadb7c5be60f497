"""open_mib: Merlin files in every pixel mode and chip layout read back as the counts written.

The writer (``tests/mibfiles.py``) encodes counts with numpy alone; raw and integer files of
the same counts must decode identically. Hand-made bytes pin the raw bit layouts, and
RosettaSciIO's reader is an independent oracle for the integer modes.
"""

from __future__ import annotations

import math
import pickle
import re
import struct

import dask
import numpy as np
import pytest
from helpers.mibfiles import (
    GAP,
    expected_scan,
    header_bytes,
    make_counts,
    split_counts,
    write_hdr,
    write_mib,
    write_scan,
)
from hypothesis import given, settings
from hypothesis import strategies as st

import ltdask
from ltdask import DataSetError
from ltdask.io.formats.mib import open_mib

DEPTHS = [pytest.param(d, id=f"{d}bit") for d in (1, 6, 12, 24)]
# (quad, gap, sig_shape): chips of 8 x 64 pixels keep quad frames small
LAYOUTS = [
    pytest.param(False, 0, (6, 128), id="1x1"),
    pytest.param(True, 0, (16, 128), id="2x2"),
    pytest.param(True, GAP, (16 + GAP, 128 + GAP), id="2x2G"),
]
MODES = [pytest.param(False, id="int"), pytest.param(True, id="raw")]


@pytest.fixture
def few_frames_per_partition():
    """Partitions of a few small frames, tiles of a few rows."""
    with dask.config.set(
        {
            "ltdask.partition-bytes": 20000,
            "ltdask.min-partitions": 1,
            "ltdask.tile-bytes": 4096,
        }
    ):
        yield


@pytest.mark.parametrize("raw", MODES)
@pytest.mark.parametrize("quad, gap, sig", LAYOUTS)
@pytest.mark.parametrize("depth", DEPTHS)
def test_every_mode_reads_the_counts(
    tmp_path, few_frames_per_partition, depth, quad, gap, sig, raw
):
    counts = make_counts(np.random.default_rng(depth), 7, sig, depth, gap)
    path = tmp_path / "scan.mib"
    write_mib(path, counts, depth=depth, raw=raw, quad=quad, gap=gap)
    ds = open_mib(path)
    assert ds.nav_shape == (7,) and ds.sig_shape == sig
    assert ds.dtype == counts.dtype
    assert len(ds.get_partitions()) > 1
    np.testing.assert_array_equal(ds.to_dask().compute(), counts)
    # signal chunks that cut rows and chips anywhere, converted on the way
    got = ds.to_dask(dtype="float32", chunks=(3, 5, 7)).compute()
    np.testing.assert_array_equal(got, counts.astype(np.float32))
    res = ltdask.udf.SumUDF(dtype="float64").compute(ds)
    np.testing.assert_array_equal(res["intensity"].values, counts.sum(axis=0, dtype=np.float64))


# --- raw bit layouts checked by hand ----------------------------------------------------------


def w12(*px) -> bytes:
    """One raw 12-bit word holding pixels px[0..3]: pixel k is the k-th u16 from the end."""
    return struct.pack(">4H", *px[::-1])


def raw_file(path, width, height, depth, data: bytes, chips=1, layout="1x1") -> None:
    size = 384 if chips == 1 else 768
    head = header_bytes(
        1,
        size=size,
        chips=chips,
        width=width,
        height=height,
        pixel_type="R64",
        layout=layout,
        depth=depth,
    )
    path.write_bytes(head + data)


QUAD_12 = (
    # raw row 0: [chip 4 | chip 3 | chip 2 | chip 1], raw row 1 likewise
    w12(1, 2, 3, 4) + w12(5, 6, 7, 8) + w12(9, 10, 11, 12) + w12(13, 14, 15, 16)
    + w12(17, 18, 19, 20) + w12(21, 22, 23, 24) + w12(25, 26, 27, 28) + w12(29, 30, 31, 32)
)  # fmt: skip
QUAD_12_IMAGE = [
    [13, 14, 15, 16, 9, 10, 11, 12],  # chips 1, 2: raw row 0
    [29, 30, 31, 32, 25, 26, 27, 28],  # raw row 1
    [24, 23, 22, 21, 20, 19, 18, 17],  # chips 3, 4 turned by 180 degrees: raw row 1
    [8, 7, 6, 5, 4, 3, 2, 1],  # raw row 0
]


def _with_gaps(image):
    out = np.zeros((6, 10), dtype=np.uint16)
    image = np.array(image)
    out[:2, :4], out[:2, 6:] = image[:2, :4], image[:2, 4:]
    out[4:, :4], out[4:, 6:] = image[2:, :4], image[2:, 4:]
    return out


def _bits(*positions, width=64):
    row = np.zeros(width, dtype=np.uint8)
    row[list(positions)] = 1
    return row


HAND = [
    pytest.param(
        # 0x80000000_00000103: bits 0, 1, 8 and 63
        dict(width=64, height=1, depth=1, data=bytes.fromhex("8000000000000103")),
        _bits(0, 1, 8, 63)[None],
        id="r1-bits",
    ),
    pytest.param(
        dict(width=16, height=1, depth=6, data=bytes(range(1, 17))),
        [[8, 7, 6, 5, 4, 3, 2, 1, 16, 15, 14, 13, 12, 11, 10, 9]],
        id="r6-bytes-reversed-per-word",
    ),
    pytest.param(
        dict(width=4, height=2, depth=12, data=bytes.fromhex("000100020003 0fff 0abc000000000005")),
        [[0xFFF, 3, 2, 1], [5, 0, 0, 0xABC]],
        id="r12-u16-reversed-per-word",
    ),
    pytest.param(
        # header width 8 = two sub-frames of 4 pixels: the high 12 bits, then the low ones
        dict(width=8, height=1, depth=24, data=w12(4, 3, 2, 1) + w12(1, 0x10, 0, 0xFFF)),
        [[4 << 12 | 1, 3 << 12 | 0x10, 2 << 12, 1 << 12 | 0xFFF]],
        id="r24-high-then-low",
    ),
    pytest.param(
        dict(width=16, height=2, depth=12, data=QUAD_12, chips=4, layout="2x2"),
        QUAD_12_IMAGE,
        id="quad-r12",
    ),
    pytest.param(
        dict(width=16, height=2, depth=12, data=QUAD_12, chips=4, layout="2x2G"),
        _with_gaps(QUAD_12_IMAGE),
        id="quad-r12-gap",
    ),
    pytest.param(
        # chips of 1 x 64 pixels, one word each: chip 4, chip 3, chip 2, chip 1
        dict(
            width=256,
            height=1,
            depth=1,
            chips=4,
            layout="2x2",
            data=bytes.fromhex("8000000000000000 0000000000000001")
            + bytes.fromhex("0000000000000020 0000000000000001"),
        ),
        [
            np.concatenate([_bits(0), _bits(5)]),  # chip 1 bit 0, chip 2 bit 5
            np.concatenate([_bits(63), _bits(0)]),  # chip 3 bit 0 and chip 4 bit 63, mirrored
        ],
        id="quad-r1",
    ),
]  # fmt: skip


@pytest.mark.parametrize("spec, expected", HAND)
def test_raw_bit_layout_by_hand(tmp_path, spec, expected):
    path = tmp_path / "hand.mib"
    raw_file(path, **spec)
    ds = open_mib(path)
    expected = np.asarray(expected)
    assert ds.sig_shape == expected.shape
    got = ds.to_dask().compute()[0]
    np.testing.assert_array_equal(got, expected)
    # one pixel at a time, which takes the pixel-by-pixel path of the decoders
    cut = ds.to_dask(chunks=(1, 1, 1)).compute()[0]
    np.testing.assert_array_equal(cut, expected)


# --- RosettaSciIO as an independent reader of the integer modes ----------------------------------


@pytest.mark.parametrize(
    "quad, sig",
    [pytest.param(False, (24, 40), id="1x1-non-square"), pytest.param(True, (512, 512), id="2x2")],
)
@pytest.mark.parametrize("depth", DEPTHS)
def test_integer_modes_match_rosettasciio(tmp_path, depth, quad, sig):
    # GPL-3: a test oracle only, imported here and nowhere in ltdask
    from rsciio.quantumdetector import file_reader

    counts = make_counts(np.random.default_rng(100 + depth), 6, sig, depth)
    path = tmp_path / "scan.mib"
    write_mib(path, counts, depth=depth, quad=quad)
    write_hdr(tmp_path / "scan.hdr", frames=6, per_trigger=3, depth=depth)
    ds = open_mib(path)
    theirs = np.asarray(file_reader(str(path))[0]["data"])
    assert ds.nav_shape == (2, 3) == theirs.shape[:2]
    # RosettaSciIO (and HyperSpy) show the detector image upside down
    np.testing.assert_array_equal(ds.to_dask().compute(), np.flip(theirs, axis=-2))


# --- scans: several files, sync_offset, nav shapes, .hdr ------------------------------------------

# (frames in the files, files, nav_shape, sync_offset)
SCANS = [
    pytest.param(15, 1, (3, 5), 0, id="one-file"),
    pytest.param(15, 3, (3, 5), 0, id="3files"),
    pytest.param(15, 3, (3, 5), 4, id="3files-sync+4"),
    pytest.param(15, 2, (4, 4), -3, id="2files-sync-3-nav-larger"),
    pytest.param(17, 3, (2, 3), 2, id="nav-smaller"),
    pytest.param(13, 3, (13,), 0, id="1d-nav"),
    pytest.param(12, 2, (2, 3, 2), -1, id="3d-nav"),
]


@pytest.mark.parametrize("raw", MODES)
@pytest.mark.parametrize("n, files, nav_shape, sync_offset", SCANS)
def test_scans(tmp_path, few_frames_per_partition, n, files, nav_shape, sync_offset, raw):
    sig = (16 + GAP, 128 + GAP)
    counts = make_counts(np.random.default_rng(n), n, sig, 12, GAP)
    paths = write_scan(tmp_path, counts, files=files, depth=12, raw=raw, quad=True, gap=GAP)
    ds = open_mib(paths[::-1], nav_shape=nav_shape, sync_offset=sync_offset)
    expected = expected_scan(counts, nav_shape, sync_offset)
    assert ds.shape == (*nav_shape, *sig)
    np.testing.assert_array_equal(ds.to_dask().compute(), expected)

    valid = np.zeros(math.prod(nav_shape), dtype=bool)
    valid[max(0, -sync_offset) : max(0, min(valid.size, n - sync_offset))] = True
    np.testing.assert_array_equal(ds.valid_nav_mask(), valid.reshape(nav_shape))
    res = ltdask.udf.SumUDF(dtype="float64").compute(ds)
    np.testing.assert_array_equal(
        res["intensity"].values, expected.reshape(-1, *sig).sum(axis=0, dtype=np.float64)
    )
    roi = np.random.default_rng(1).random(nav_shape) > 0.4
    res = ltdask.udf.SumUDF(dtype="float64").compute(ds, roi=roi)
    np.testing.assert_array_equal(res["intensity"].values, expected[roi].sum(axis=0, dtype="f8"))
    assert sum(p.num_frames for p in ds.get_partitions()) == math.prod(nav_shape)
    assert len(ds.get_partitions()) > 1


@pytest.mark.parametrize("quad, gap, sig", LAYOUTS)
@pytest.mark.parametrize("raw", MODES)
@pytest.mark.parametrize("tile_bytes", [4096, 1 << 20])
def test_sum_from_the_decoder(tmp_path, monkeypatch, quad, gap, sig, raw, tile_bytes):
    """SumUDF alone on 12-bit raw frames and on U16 frames (big-endian) adds the pixels up
    as the decoder reads them, four frames at a time, never decoding a tile: equal to
    numpy over several files, with a sync offset, a ROI and any tiling."""
    from ltdask.io import decode
    from ltdask.io.formats.mib import layout as mib_layout

    counts = make_counts(np.random.default_rng(5), 23, sig, 12, gap)
    paths = write_scan(tmp_path, counts, files=3, depth=12, raw=raw, quad=quad, gap=gap)
    roi = np.random.default_rng(2).random((4, 6)) > 0.3
    expected = expected_scan(counts, (4, 6), -2)
    config = {"ltdask.tile-bytes": tile_bytes, "ltdask.partition-bytes": 1 << 20}
    with dask.config.set({**config, "ltdask.min-partitions": 1}):
        ds = open_mib(paths, nav_shape=(4, 6), sync_offset=-2)
        plan_ok = ds.decoder.can_sum(ds.negotiate([], np.float32))
        assert plan_ok
        for module, name in ((decode, "decode_swapped"), (mib_layout, "decode_raw")):
            monkeypatch.setattr(module, name, _refuse_decoding)
        res = ltdask.udf.SumUDF(dtype="float64").compute(ds, roi=roi)
    np.testing.assert_array_equal(res["intensity"].values, expected[roi].sum(0, dtype="f8"))


def test_sums_of_slices_cut_inside_words(tmp_path):
    """Tiles whose columns cut a raw word are decoded and summed (`FileDataSet.tile_sums`
    falls back tile by tile); the others are summed by the decoder."""
    from ltdask.common import Shape, Slice
    from ltdask.io.tiling import TilingScheme

    counts = make_counts(np.random.default_rng(1), 10, (6, 128), 12, 0)
    ds = open_mib(write_scan(tmp_path, counts, depth=12, raw=True), nav_shape=(10,))
    cuts = [Slice((0, x), Shape((6, min(6, 128 - x)), sig_dims=2)) for x in range(0, 128, 6)]
    scheme = TilingScheme(cuts, depth=4)
    total = np.zeros((6, 128))
    frames = np.zeros(len(cuts), int)
    for _first, n, s, sums in ds.tile_sums(np.arange(10), scheme):
        total[scheme.slices[s].get()] += sums.reshape(scheme.slices[s].shape)
        frames[s] += n
    np.testing.assert_array_equal(total, counts.sum(0))
    assert (frames == 10).all()


def _refuse_decoding(*args):
    raise AssertionError("a tile was decoded")


def test_files_sorted_by_sequence_number(tmp_path):
    counts = make_counts(np.random.default_rng(2), 12, (6, 128), 6)
    paths = write_scan(tmp_path, counts, files=3, depth=6, raw=True)
    # names in the wrong order: the sequence numbers in the headers decide
    renamed = [tmp_path / f"z{9 - i}.mib" for i in range(3)]
    for src, dst in zip(paths, renamed, strict=True):
        (tmp_path / src).rename(dst)
    ds = open_mib([str(p) for p in renamed])
    np.testing.assert_array_equal(ds.to_dask().compute(), counts)
    assert ds.path.startswith(str(renamed[0]))


@pytest.mark.parametrize("raw", MODES)
@pytest.mark.parametrize("name", ["scan", "scan_", "run-07_"])
def test_one_file_opens_the_whole_acquisition(tmp_path, name, raw):
    counts = make_counts(np.random.default_rng(3), 11, (6, 128), 12)
    paths = write_scan(tmp_path, counts, files=3, name=name, depth=12, raw=raw)
    # not part of the acquisition: another name, or another counter-less prefix
    write_mib(tmp_path / "other1.mib", counts[:2], depth=12, raw=raw)
    write_mib(tmp_path / f"{name}x1.mib", counts[:2], depth=12, raw=raw)
    for path in paths:
        ds = open_mib(path)
        assert ds.nav_shape == (11,)
        np.testing.assert_array_equal(ds.to_dask().compute(), counts)
    first, second, _ = split_counts(11, 3)
    alone = open_mib(paths[1], disable_glob=True)
    np.testing.assert_array_equal(alone.to_dask().compute(), counts[first : first + second])


HDRS = [
    pytest.param(dict(frames=12, per_trigger=4), (3, 4), id="frames-per-trigger"),
    pytest.param(dict(frames=12, per_trigger=1), (12,), id="one-per-trigger"),
    pytest.param(dict(frames=12, per_trigger=5), (2, 5), id="incomplete-line-dropped"),
    pytest.param(dict(frames=16, per_trigger=4), (4, 4), id="interrupted-zeros"),
    pytest.param(dict(frames=12, per_trigger=4, scan=(2, 6)), (2, 6), id="scanx-scany"),
    pytest.param(dict(frames=0, per_trigger=6), (2, 6), id="frames-unknown"),
]


@pytest.mark.parametrize("raw", MODES)
@pytest.mark.parametrize("hdr, nav_shape", HDRS)
def test_nav_shape_from_hdr(tmp_path, hdr, nav_shape, raw):
    counts = make_counts(np.random.default_rng(5), 12, (6, 128), 12)
    write_scan(tmp_path, counts, files=3, name="acq", depth=12, raw=raw)
    write_hdr(tmp_path / "acq.hdr", **hdr)
    (tmp_path / "other.mib").write_bytes(b"not part of acq")
    ds = open_mib(tmp_path / "acq.hdr")
    assert ds.nav_shape == nav_shape
    if hdr["frames"]:
        # one file of the acquisition finds the header by its name without the counter
        assert open_mib(tmp_path / "acq2.mib").nav_shape == nav_shape
    assert ds.image_count == 12
    np.testing.assert_array_equal(ds.to_dask().compute(), expected_scan(counts, nav_shape))
    # an explicit nav_shape wins
    assert open_mib(tmp_path / "acq.hdr", nav_shape=(4, 3)).nav_shape == (4, 3)
    assert ds.to_xarray().attrs["mib_pixel_type"] == ("R64" if raw else "U16")


def test_single_file_without_hdr_is_one_dim(tmp_path):
    counts = make_counts(np.random.default_rng(6), 5, (6, 128), 1)
    write_mib(tmp_path / "a.mib", counts, depth=1, raw=True)
    ds = open_mib(str(tmp_path / "a.mib"), dims=("t", "y", "x"))
    assert ds.nav_shape == (5,)
    assert ds.to_xarray().dims == ("t", "y", "x")


SIG_SHAPES = [
    pytest.param(False, False, (12, 64), id="int-1x1-rows"),
    pytest.param(False, True, (768,), id="int-quad-1d"),
    pytest.param(True, False, (3, 256), id="raw-1x1-rows"),
    pytest.param(True, False, (768,), id="raw-1x1-1d"),
    pytest.param(True, False, (2, 3, 128), id="raw-1x1-3d"),
]


@pytest.mark.parametrize("raw, quad, sig_shape", SIG_SHAPES)
def test_sig_shape_reinterprets_frames(tmp_path, raw, quad, sig_shape, few_frames_per_partition):
    sig = (24, 32) if quad else (6, 128)
    # 24 x 32 integer quad frames: the integer modes take any chip size
    counts = make_counts(np.random.default_rng(7), 6, sig, 12)
    write_mib(tmp_path / "s.mib", counts, depth=12, raw=raw, quad=quad)
    ds = open_mib(tmp_path / "s.mib", sig_shape=sig_shape)
    expected = counts.reshape(6, *sig_shape)
    np.testing.assert_array_equal(ds.to_dask().compute(), expected)
    np.testing.assert_array_equal(
        ds.to_dask(chunks=(2,) + (5,) * len(sig_shape)).compute(), expected
    )
    res = ltdask.udf.SumUDF(dtype="float64").compute(ds)
    np.testing.assert_array_equal(res["intensity"].values, expected.sum(axis=0, dtype="f8"))


@settings(max_examples=20)
@given(
    chunks=st.tuples(st.integers(1, 7), st.integers(3, 16 + GAP), st.integers(9, 128 + GAP)),
    depth=st.sampled_from([1, 6, 12, 24]),
    native=st.booleans(),
)
def test_any_chunking_of_raw_quad(tmp_path_factory, chunks, depth, native):
    # native: 6- and 12-bit pixels as wide as their fields, moved a word at a time where
    # the chunk's rows are whole words (`move_rows`), else decoded pixel by pixel
    # one folder per depth: files of one folder that differ in a trailing number are one scan
    folder = tmp_path_factory.getbasetemp() / f"quad-{depth}bit"
    folder.mkdir(exist_ok=True)
    path = folder / "quad.mib"
    counts = make_counts(np.random.default_rng(depth), 7, (16 + GAP, 128 + GAP), depth, GAP)
    if not path.exists():
        write_mib(path, counts, depth=depth, raw=True, quad=True, gap=GAP)
    got = open_mib(path).to_dask(dtype=None if native else "float64", chunks=chunks).compute()
    assert got.dtype == (counts.dtype if native else np.float64)
    np.testing.assert_array_equal(got, counts)


@pytest.mark.parametrize("field_bits", [8, 16], ids=["6bit", "12bit"])
@pytest.mark.parametrize("reverse", [False, True], ids=["forwards", "reversed"])
def test_whole_words_decode_as_words(field_bits, reverse):
    # a row of raw words whose pixels are as wide as their fields, decoded a word at a time,
    # against numpy: pixel k of a big-endian 64-bit word is its field k from the least
    # significant bit; a reversed row (quad chips 3 and 4) is read last pixel first
    from ltdask.io.formats.mib.rows import words_as_pixels

    stored = np.random.default_rng(5).integers(0, 256, 8 * 7, dtype=np.uint8)
    values = stored.view(">u8").astype(np.uint64)
    shifts = (field_bits * np.arange(64 // field_bits)).astype(np.uint64)
    expected = ((values[:, None] >> shifts) & np.uint64(2**field_bits - 1)).reshape(-1)
    out = np.zeros(expected.size, dtype=f"u{field_bits // 8}")
    words_as_pixels(stored.view(np.uint64), out.view(np.uint64), field_bits, reverse)
    np.testing.assert_array_equal(out, expected[::-1] if reverse else expected)


def test_pickles_small_and_tokenizes(tmp_path):
    counts = make_counts(np.random.default_rng(8), 6, (16, 128), 12)
    write_mib(tmp_path / "p.mib", counts, depth=12, raw=True, quad=True)
    ds = open_mib(tmp_path / "p.mib")
    blob = pickle.dumps(ds)
    assert len(blob) < 4000
    back = pickle.loads(blob)
    np.testing.assert_array_equal(back.to_dask().compute(), counts)
    assert dask.base.tokenize(ds) == dask.base.tokenize(back)
    other = open_mib(tmp_path / "p.mib", sync_offset=1)
    assert dask.base.tokenize(ds) != dask.base.tokenize(other)


def test_on_scheduler(scheduler, tmp_path, few_frames_per_partition):
    counts = make_counts(np.random.default_rng(9), 10, (16 + GAP, 128 + GAP), 24, GAP)
    paths = write_scan(tmp_path, counts, files=2, depth=24, raw=True, quad=True, gap=GAP)
    ds = open_mib(paths, nav_shape=(2, 5), sync_offset=-1)
    expected = expected_scan(counts, (2, 5), -1)
    np.testing.assert_array_equal(ds.to_dask().compute(), expected)
    res = ltdask.udf.SumUDF(dtype="float64").compute(ds)
    np.testing.assert_array_equal(
        res["intensity"].values, expected.reshape(-1, *counts.shape[1:]).sum(0, dtype="f8")
    )


# --- errors ------------------------------------------------------------------------------------


def named(path) -> str:
    return "'?" + re.escape(str(path)) + "'?"


def _header(**changes) -> bytes:
    fields = dict(size=384, chips=1, width=4, height=2, pixel_type="U16", layout="1x1", depth=12)
    fields.update(changes)
    return header_bytes(1, **fields)


def _replace_field(head: bytes, idx: int, value: str) -> bytes:
    parts = head.rstrip(b"\x00").split(b",")
    parts[idx] = value.encode()
    text = b",".join(parts)
    return text + b"\x00" * (len(head) - len(text))


FRAME = bytes(16)  # 2 x 4 pixels of U16
ERRORS = [
    pytest.param(
        b"HDR,\tstuff" + bytes(400), r"is not a Merlin \.mib file: it starts with", id="not-mib"
    ),
    pytest.param(b"", r"is not a Merlin \.mib file", id="empty"),
    pytest.param(
        _replace_field(_header(), 2, "abc") + FRAME,
        r"frame header field 2 \(header size\) is 'abc'; expected an integer",
        id="header-size-text",
    ),
    pytest.param(
        _replace_field(_header(), 2, "99999") + FRAME,
        r"field 2 \(header size\) is 99999; expected the header size in bytes",
        id="header-size-too-large",
    ),
    pytest.param(
        _replace_field(_header(), 4, "wide") + FRAME,
        r"frame header field 4 \(width\) is 'wide'; expected an integer >= 1",
        id="width-text",
    ),
    pytest.param(
        _replace_field(_header(), 5, "0000") + FRAME,
        r"field 5 \(height\) is '0000'; expected an integer >= 1",
        id="height-zero",
    ),
    pytest.param(
        _replace_field(_header(), 6, "F16") + FRAME,
        r"field 6 \(pixel type\) is 'F16'; expected one of U01, U08, U16, U32, U64, R64",
        id="pixel-type",
    ),
    pytest.param(
        _replace_field(_header(), 7, "3x3x3") + FRAME,
        r"field 7 \(chip layout\) is '3x3x3'",
        id="layout",
    ),
    pytest.param(
        b"MQ1,000001,00384,01,0004".ljust(384, b"\x00") + FRAME,
        r"the frame header ends before field 5 \(height\)|has 5 fields, expected at least 8",
        id="too-few-fields",
    ),
    pytest.param(
        _header(depth=7) + FRAME,
        r"field \d+ \(counter depth\) is 7; expected one of \(1, 6, 12, 24\)",
        id="counter-depth",
    ),
    pytest.param(
        _header(pixel_type="R64", depth=None, width=64, height=1) + bytes(8),
        r"raw \(R64\) frames, but the frame header has no counter depth",
        id="raw-without-depth",
    ),
    pytest.param(
        _header(pixel_type="R64", chips=2, layout="Nx1", width=128, height=1) + bytes(256),
        r"raw \(R64\) frames with chip layout 'Nx1' and 2 chips cannot be decoded",
        id="raw-nx1",
    ),
    pytest.param(
        _header(pixel_type="R64", depth=1, width=10, height=3) + bytes(8),
        r"a raw 1-bit frame of 3 x 10 pixels is not a whole number of 64-bit words",
        id="raw-not-words",
    ),
    pytest.param(
        (_header() + FRAME) * 3 + _header()[:100],
        r"is truncated or not what its header says: 1300 bytes is not a whole number of frames "
        r"of 400 bytes \(384 header \+ 16 pixel bytes for U16 4 x 2, 12-bit\); 100 bytes left "
        r"over after 3 frames",
        id="truncated",
    ),
    pytest.param(
        _header(),
        r"is truncated .* 384 bytes left over after 0 frames",
        id="header-only",
    ),
    pytest.param(
        _header() + FRAME + b"XXXX" + _header()[4:] + FRAME,
        r"frame 1 does not start with a frame header \(b'XXXX' at byte 400\)",
        id="frame-sizes-differ",
    ),
]


@pytest.mark.parametrize("content, message", ERRORS)
def test_malformed_files(tmp_path, content, message):
    path = tmp_path / "bad.mib"
    path.write_bytes(content)
    with pytest.raises(DataSetError, match=named(path) + ".*" + message):
        open_mib(path)


def test_files_that_do_not_match(tmp_path):
    write_mib(tmp_path / "a1.mib", make_counts(np.random.default_rng(0), 2, (6, 128), 12), depth=12)
    write_mib(
        tmp_path / "a2.mib",
        make_counts(np.random.default_rng(0), 2, (6, 64), 12),
        depth=12,
        first_seq=3,
    )
    with pytest.raises(DataSetError, match=named(tmp_path / "a2.mib") + r" does not match .*width"):
        open_mib([tmp_path / "a1.mib", tmp_path / "a2.mib"])


def test_other_bad_input(tmp_path):
    counts = make_counts(np.random.default_rng(0), 4, (16, 128), 12)
    write_mib(tmp_path / "q.mib", counts, depth=12, raw=True, quad=True)
    with pytest.raises(
        DataSetError,
        match=r"sig_shape=\(128, 16\) does not fit the frames; "
        r"expected \(16, 128\) \(raw quad frames cannot be reshaped\)",
    ):
        open_mib(tmp_path / "q.mib", sig_shape=(128, 16))
    write_mib(tmp_path / "i.mib", counts, depth=12)
    with pytest.raises(DataSetError, match=r"sig_shape=\(5, 5\) does not fit .* 2048 pixels"):
        open_mib(tmp_path / "i.mib", sig_shape=(5, 5))
    with pytest.raises(FileNotFoundError):
        open_mib(tmp_path / "missing.mib")
    with pytest.raises(DataSetError, match=r"sync_offset=9 is beyond the data"):
        open_mib(tmp_path / "q.mib", sync_offset=9)
    (tmp_path / "lonely.hdr").write_text("HDR,\t\r\nFrames per Trigger (Number):\t4\r\nEnd\t\r\n")
    with pytest.raises(DataSetError, match=named(tmp_path / "lonely.hdr") + ": no .mib files"):
        open_mib(tmp_path / "lonely.hdr")
    (tmp_path / "q.hdr").write_text("Frames per Trigger (Number):\t4\r\n")
    with pytest.raises(DataSetError, match=named(tmp_path / "q.hdr") + " is not a Merlin .hdr"):
        open_mib(tmp_path / "q.hdr")
    (tmp_path / "q.hdr").write_text("HDR,\t\r\nFrames per Trigger (Number):\tmany\r\nEnd\t\r\n")
    with pytest.raises(DataSetError, match=r"'Frames per Trigger \(Number\)' is 'many'"):
        open_mib(tmp_path / "q.mib")
    with pytest.raises(DataSetError, match=r"is an acquisition header; pass either"):
        open_mib([tmp_path / "q.mib", tmp_path / "q.hdr"])
