"""open_raw: every stored layout reads back as the numpy reference cut from the bytes."""

from __future__ import annotations

import math

import dask
import dask.array as da
import numpy as np
import pytest
from helpers.rawfiles import (
    DTYPES,
    converted_dtype,
    expected_scan,
    make_frames,
    native,
    read_stream,
    write_scan,
)
from hypothesis import given
from hypothesis import strategies as st

import ltdask

SIG = (5, 6)

DTYPE_PARAMS = [pytest.param(dt, id=name) for name, dt in DTYPES.items()]

LAYOUTS = [
    pytest.param({}, id="plain"),
    pytest.param({"file_header": 13}, id="file-header"),
    pytest.param({"frame_header": 3, "frame_footer": 5}, id="frame-header-footer"),
    pytest.param({"file_header": 16, "frame_header": 8, "frame_footer": 8}, id="aligned-headers"),
    pytest.param(
        {"file_header": 7, "frame_header": 2, "frame_footer": 6, "last_footer": False},
        id="no-last-footer",
    ),
]

FILES = [pytest.param(1, id="1file"), pytest.param(3, id="3files")]

# (frames in the files, nav_shape, sync_offset)
FRAMES = [
    pytest.param((21, (3, 7), 0), id="exact"),
    pytest.param((21, (3, 7), 4), id="sync+4"),
    pytest.param((21, (3, 7), -4), id="sync-4"),
    pytest.param((21, (4, 7), 0), id="nav-larger"),
    pytest.param((21, (2, 5), 0), id="nav-smaller"),
    pytest.param((21, (4, 7), -5), id="nav-larger-sync-5"),
    pytest.param((21, (3, 7), 20), id="sync+20-one-frame-left"),
]


def open_layout(paths, nav_shape, sig_shape, dtype, sync_offset=0, **layout):
    return ltdask.open_raw(
        paths,
        nav_shape=nav_shape,
        sig_shape=sig_shape,
        dtype=dtype,
        file_header_bytes=layout.get("file_header", 0),
        frame_header_bytes=layout.get("frame_header", 0),
        frame_footer_bytes=layout.get("frame_footer", 0),
        sync_offset=sync_offset,
    )


def reference(paths, sig_shape, dtype, layout):
    keys = ("file_header", "frame_header", "frame_footer")
    return read_stream(paths, sig_shape, dtype, **{k: layout[k] for k in keys if k in layout})


@pytest.mark.parametrize("frames", FRAMES)
@pytest.mark.parametrize("files", FILES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPE_PARAMS)
def test_raw_reads_reference(tmp_path, small_partitions, dtype, layout, files, frames):
    n_frames, nav_shape, sync_offset = frames
    rng = np.random.default_rng(12345)
    stream = make_frames(rng, n_frames, SIG, dtype)
    paths = write_scan(tmp_path, stream, files=files, **layout)
    stream_ref = reference(paths, SIG, dtype, layout)
    # the bytes we wrote are the frames we meant to write
    np.testing.assert_array_equal(stream_ref, stream.astype(native(dtype)))
    expected, valid = expected_scan(stream_ref, nav_shape, sync_offset)

    ds = open_layout(paths, nav_shape, SIG, dtype, sync_offset, **layout)
    assert ds.shape == (*nav_shape, *SIG)
    assert ds.dtype == native(dtype)
    np.testing.assert_array_equal(ds.valid_nav_mask(), valid)

    arr = ds.to_dask()
    assert arr.dtype == native(dtype)
    assert arr.npartitions > 1
    got = arr.compute()
    assert got.dtype == native(dtype)
    np.testing.assert_array_equal(got, expected)

    target = converted_dtype(dtype)
    got = ds.to_dask(dtype=target).compute()
    assert got.dtype == target
    np.testing.assert_array_equal(got, expected.astype(target))


CONVERSIONS = [
    pytest.param("<u2", "float64", id="u16-as-f64"),
    pytest.param(">u2", "int32", id="u16-bigendian-as-i32"),
    pytest.param("u1", "uint16", id="u8-as-u16"),
    pytest.param("<i2", "int64", id="i16-as-i64"),
    pytest.param("<f4", "float64", id="f32-as-f64"),
    pytest.param("<f8", "float32", id="f64-as-f32"),
    pytest.param(">f4", "float32", id="f32-bigendian-as-f32"),
    pytest.param("<u4", "float64", id="u32-as-f64"),
    pytest.param("<c8", "complex64", id="c64-as-c64"),
    pytest.param(">c8", "complex128", id="c64-bigendian-as-c128"),
    pytest.param("<f4", "int32", id="f32-as-i32-truncates"),
    pytest.param("?", "uint8", id="bool-as-u8"),
]


@pytest.mark.parametrize("stored, target", CONVERSIONS)
def test_raw_dtype_conversions(tmp_path, small_partitions, stored, target):
    rng = np.random.default_rng(7)
    stream = make_frames(rng, 11, SIG, stored)
    layout = {"file_header": 5, "frame_header": 1}
    paths = write_scan(tmp_path, stream, files=2, **layout)
    expected, _ = expected_scan(reference(paths, SIG, stored, layout), (11,), -2)
    ds = open_layout(paths, (11,), SIG, stored, sync_offset=-2, **layout)
    got = ds.to_dask(dtype=target).compute()
    assert got.dtype == np.dtype(target)
    np.testing.assert_array_equal(got, expected.astype(target))


# --- one-frame datasets and unusual dimensionality -------------------------------------------

# (frames in the file, nav_shape, sig_shape, sync_offset)
ONE_FRAME = [
    pytest.param(1, (1,), (4, 3), 0, id="nav1-sig2d"),
    pytest.param(1, (1, 1), (12,), 0, id="nav1x1-sig1d"),
    pytest.param(1, (1, 1, 1), (2, 3, 2), 0, id="nav1x1x1-sig3d"),
    pytest.param(1, (3,), (4, 3), 0, id="nav3-one-frame-file"),
    pytest.param(1, (2, 2), (4, 3), 0, id="nav2x2-one-frame-file"),
    pytest.param(5, (1,), (4, 3), 3, id="nav1-five-frame-file-sync+3"),
    pytest.param(5, (1,), (4, 3), -2, id="nav1-five-frame-file-sync-2-missing"),
]


@pytest.mark.parametrize("dtype", [pytest.param("<f4", id="f32"), pytest.param(">u2", id="u16-be")])
@pytest.mark.parametrize("n_stream, nav_shape, sig_shape, sync_offset", ONE_FRAME)
def test_one_frame(tmp_path, small_partitions, dtype, n_stream, nav_shape, sig_shape, sync_offset):
    stream = make_frames(np.random.default_rng(1), n_stream, sig_shape, dtype)
    paths = write_scan(tmp_path, stream, file_header=4)
    expected, valid = expected_scan(
        read_stream(paths, sig_shape, dtype, file_header=4), nav_shape, sync_offset
    )
    ds = ltdask.open_raw(
        paths[0], nav_shape, sig_shape, dtype, file_header_bytes=4, sync_offset=sync_offset
    )
    assert ds.image_count == n_stream
    np.testing.assert_array_equal(ds.valid_nav_mask(), valid)
    np.testing.assert_array_equal(ds.to_dask().compute(), expected)
    np.testing.assert_array_equal(ds.to_dask(dtype="float64").compute(), expected.astype("f8"))


@pytest.mark.parametrize(
    "nav_shape, sig_shape",
    [
        pytest.param((30,), (7,), id="nav1d-sig1d"),
        pytest.param((2, 3, 5), (3, 4), id="nav3d-sig2d"),
        pytest.param((5, 6), (2, 3, 4), id="nav2d-sig3d"),
        pytest.param((2, 1, 3, 5), (3, 3), id="nav4d"),
        pytest.param((29,), (1, 1), id="prime-nav-1px-frames"),
    ],
)
def test_dimensionality(tmp_path, small_partitions, nav_shape, sig_shape):
    n = math.prod(nav_shape)
    stream = make_frames(np.random.default_rng(2), n, sig_shape, "<i2")
    paths = write_scan(tmp_path, stream, files=3, frame_header=2)
    expected, _ = expected_scan(read_stream(paths, sig_shape, "<i2", frame_header=2), nav_shape)
    ds = ltdask.open_raw(paths, nav_shape, sig_shape, "int16", frame_header_bytes=2)
    arr = ds.to_dask()
    assert arr.shape == (*nav_shape, *sig_shape)
    np.testing.assert_array_equal(arr.compute(), expected)


def test_partitions_uneven(tmp_path):
    """A nav shape that does not divide into partitions: chunks are uneven, data unchanged."""
    stream = make_frames(np.random.default_rng(3), 7 * 11, SIG, "<f4")
    paths = write_scan(tmp_path, stream)
    frame_bytes = math.prod(SIG) * 4
    with dask.config.set({"ltdask.partition-bytes": 4 * frame_bytes, "ltdask.min-partitions": 1}):
        ds = ltdask.open_raw(paths, (7, 11), SIG, "float32")
        arr = ds.to_dask()
    sizes = set(arr.chunks[1])
    assert len(sizes) > 1, arr.chunks
    assert sum(p.num_frames for p in ds.get_partitions()) == 77
    np.testing.assert_array_equal(arr.compute(), stream.reshape(7, 11, *SIG))


def test_min_partitions(tmp_path):
    stream = make_frames(np.random.default_rng(3), 12, SIG, "<u2")
    paths = write_scan(tmp_path, stream)
    with dask.config.set({"ltdask.min-partitions": 5}):
        ds = ltdask.open_raw(paths, (12,), SIG, "uint16")
        assert len(ds.get_partitions()) >= 5
        np.testing.assert_array_equal(ds.to_dask().compute(), stream)


# --- custom chunks -------------------------------------------------------------------------------

CHUNKS = [
    pytest.param((4, 7, 5, 6), id="flat-ranges"),
    pytest.param((2, 3, 5, 6), id="nav-blocks-not-flat-ranges"),
    pytest.param(((1, 2, 1), (3, 1, 3), (5,), (6,)), id="irregular-nav"),
    pytest.param((4, 7, 2, 6), id="sig-rows"),
    pytest.param((2, 4, 3, 4), id="sig-and-nav-blocks"),
    pytest.param((1, 1, 1, 1), id="single-pixels"),
    pytest.param("auto", id="auto"),
    pytest.param(-1, id="one-chunk"),
]


@pytest.mark.parametrize("chunks", CHUNKS)
@pytest.mark.parametrize(
    "dtype, layout",
    [
        pytest.param("<u2", {}, id="u16-straight"),
        pytest.param(">f4", {"frame_header": 3}, id="f32-bigendian-decode"),
    ],
)
def test_custom_chunks(tmp_path, dtype, layout, chunks):
    nav_shape = (4, 7)
    stream = make_frames(np.random.default_rng(4), 26, SIG, dtype)
    paths = write_scan(tmp_path, stream, files=2, **layout)
    expected, _ = expected_scan(reference(paths, SIG, dtype, layout), nav_shape, -1)
    ds = open_layout(paths, nav_shape, SIG, dtype, sync_offset=-1, **layout)
    arr = ds.to_dask(chunks=chunks)
    assert arr.chunks == da.core.normalize_chunks(chunks, arr.shape, dtype=arr.dtype)
    np.testing.assert_array_equal(arr.compute(), expected)
    got = ds.to_dask(dtype="float64", chunks=chunks).compute()
    np.testing.assert_array_equal(got, expected.astype("float64"))


def test_default_chunks_are_partitions_times_frames(tmp_path, small_partitions):
    stream = make_frames(np.random.default_rng(5), 21, SIG, "<u2")
    paths = write_scan(tmp_path, stream)
    ds = ltdask.open_raw(paths, (3, 7), SIG, "uint16")
    arr = ds.to_dask()
    assert arr.chunks[:2] == ds.nav_chunks
    assert arr.chunks[2:] == ((5,), (6,))
    starts = [p.start for p in ds.get_partitions()]
    assert starts == sorted(starts)
    assert arr.npartitions == len(ds.get_partitions())


# --- xarray --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "nav_shape, sig_shape, dims",
    [
        pytest.param((3, 4), (5, 6), ("scan_y", "scan_x", "det_y", "det_x"), id="4d"),
        pytest.param((12,), (5, 6), ("frame", "det_y", "det_x"), id="1d-nav"),
        pytest.param((2, 2, 3), (30,), ("nav_0", "nav_1", "nav_2", "sig_0"), id="3d-nav-1d-sig"),
        pytest.param(
            (3, 4), (2, 3, 5), ("scan_y", "scan_x", "sig_0", "sig_1", "sig_2"), id="3d-sig"
        ),
    ],
)
def test_to_xarray_dims(tmp_path, nav_shape, sig_shape, dims):
    stream = make_frames(np.random.default_rng(6), 12, sig_shape, "<f4")
    paths = write_scan(tmp_path, stream)
    ds = ltdask.open_raw(paths, nav_shape, sig_shape, "float32", sync_offset=1)
    xa = ds.to_xarray()
    assert xa.dims == dims
    assert xa.shape == (*nav_shape, *sig_shape)
    assert isinstance(xa.data, da.Array)
    assert xa.attrs["sync_offset"] == 1
    expected, _ = expected_scan(stream, nav_shape, 1)
    np.testing.assert_array_equal(xa.values, expected)
    assert ds.to_xarray(dtype="float64").dtype == np.float64


def test_to_xarray_custom_dims(tmp_path):
    stream = make_frames(np.random.default_rng(6), 12, (5, 6), "<f4")
    paths = write_scan(tmp_path, stream)
    ds = ltdask.open_raw(paths, (3, 4), (5, 6), "float32", dims=("y", "x", "ky", "kx"))
    assert ds.to_xarray().dims == ("y", "x", "ky", "kx")


# --- graphs --------------------------------------------------------------------------------------


def test_graph_names_deterministic(tmp_path, small_partitions):
    stream = make_frames(np.random.default_rng(8), 21, SIG, "<u2")
    paths = write_scan(tmp_path, stream, files=3)

    def open_(**kw):
        return ltdask.open_raw(paths, (3, 7), SIG, "uint16", **kw)

    a, b = open_(), open_()
    assert a.to_dask().name == b.to_dask().name
    assert a.to_dask().name == a.to_dask().name
    assert a.to_dask("float32").name == b.to_dask("float32").name
    assert a.to_dask(chunks=(1, 2, 5, 6)).name == b.to_dask(chunks=(1, 2, 5, 6)).name
    assert a.to_dask().name.startswith("ltdask-")

    names = {
        a.to_dask().name,
        a.to_dask("float32").name,
        a.to_dask("float64").name,
        a.to_dask(chunks=(1, 2, 5, 6)).name,
        open_(sync_offset=1).to_dask().name,
        open_(dims=("a", "b", "c", "d")).to_dask().name,
        ltdask.open_raw(paths, (3, 7), SIG, ">u2").to_dask().name,
        ltdask.open_raw(paths, (3, 7), (6, 5), "uint16").to_dask().name,
        ltdask.open_raw(paths[:2], (2, 4), SIG, "uint16").to_dask().name,
    }
    assert len(names) == 9


def test_graph_name_changes_with_file_contents(tmp_path):
    stream = make_frames(np.random.default_rng(9), 4, SIG, "<u2")
    paths = write_scan(tmp_path, stream)
    before = ltdask.open_raw(paths, (4,), SIG, "uint16").to_dask().name
    write_scan(tmp_path, np.concatenate([stream, stream]))
    after = ltdask.open_raw(paths, (4,), SIG, "uint16").to_dask().name
    assert before != after


@pytest.mark.parametrize("dtype", [pytest.param(None, id="native"), pytest.param("f4", id="f32")])
def test_graph_size_is_linear_in_chunks(tmp_path, dtype):
    sig = (4, 4)
    stream = make_frames(np.random.default_rng(10), 64 * 64, sig, "<u2")
    paths = write_scan(tmp_path, stream)
    with dask.config.set({"ltdask.partition-bytes": 64 * 4 * 16, "ltdask.min-partitions": 1}):
        ds = ltdask.open_raw(paths, (64, 64), sig, "uint16")
        arr = ds.to_dask(dtype=dtype)
    assert arr.npartitions == 64
    assert len(arr.__dask_graph__()) <= arr.npartitions + 2
    custom = ds.to_dask(dtype=dtype, chunks=(8, 8, 2, 4))
    assert custom.npartitions == 8 * 8 * 2
    assert len(custom.__dask_graph__()) <= custom.npartitions + 2
    np.testing.assert_array_equal(custom.compute(), stream.reshape(64, 64, *sig))


def test_dataset_pickles_small(tmp_path):
    import pickle

    stream = make_frames(np.random.default_rng(11), 21, SIG, ">f4")
    paths = write_scan(tmp_path, stream, files=3, file_header=4)
    ds = ltdask.open_raw(paths, (3, 7), SIG, ">f4", file_header_bytes=4, sync_offset=2)
    data = pickle.dumps(ds)
    assert len(data) < 4096
    back = pickle.loads(data)
    assert back.to_dask().name == ds.to_dask().name
    np.testing.assert_array_equal(back.to_dask().compute(), ds.to_dask().compute())


def test_paths_may_be_pathlike(tmp_path):
    stream = make_frames(np.random.default_rng(11), 6, SIG, "<u2")
    write_scan(tmp_path, stream)
    ds = ltdask.open_raw(tmp_path / "scan-0.raw", (6,), SIG, "uint16")
    np.testing.assert_array_equal(ds.to_dask().compute(), stream)


# --- property test over random layouts -----------------------------------------------------------


@st.composite
def raw_layouts(draw):
    dtype = draw(st.sampled_from(sorted(DTYPES.values())))
    sig_shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    n_stream = draw(st.integers(1, 24))
    files = draw(st.integers(1, min(3, n_stream)))
    nav_shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
    sync_offset = draw(st.integers(-n_stream + 1, n_stream - 1))
    layout = {
        "file_header": draw(st.integers(0, 9)),
        "frame_header": draw(st.integers(0, 9)),
        "frame_footer": draw(st.integers(0, 9)),
    }
    layout["last_footer"] = draw(st.booleans()) or layout["frame_footer"] == 0
    partition_bytes = draw(st.integers(1, 4000))
    chunked = draw(st.booleans())
    chunks = None
    if chunked:
        shape = nav_shape + sig_shape
        chunks = tuple(draw(st.integers(1, n)) for n in shape)
    return (
        dtype,
        sig_shape,
        n_stream,
        files,
        nav_shape,
        sync_offset,
        layout,
        partition_bytes,
        chunks,
    )


@given(case=raw_layouts(), seed=st.integers(0, 2**32 - 1))
def test_raw_property(tmp_path_factory, case, seed):
    dtype, sig_shape, n_stream, files, nav_shape, sync_offset, layout, partition_bytes, chunks = (
        case
    )
    tmp_path = tmp_path_factory.mktemp("raw")
    stream = make_frames(np.random.default_rng(seed), n_stream, sig_shape, dtype)
    paths = write_scan(tmp_path, stream, files=files, **layout)
    stream_ref = reference(paths, sig_shape, dtype, layout)
    np.testing.assert_array_equal(stream_ref, stream.astype(native(dtype)))
    expected, valid = expected_scan(stream_ref, nav_shape, sync_offset)
    with dask.config.set({"ltdask.partition-bytes": partition_bytes, "ltdask.min-partitions": 1}):
        ds = open_layout(paths, nav_shape, sig_shape, dtype, sync_offset, **layout)
        np.testing.assert_array_equal(ds.valid_nav_mask(), valid)
        np.testing.assert_array_equal(ds.to_dask(chunks=chunks).compute(), expected)
        target = converted_dtype(dtype)
        got = ds.to_dask(dtype=target, chunks=chunks).compute()
    np.testing.assert_array_equal(got, expected.astype(target))


def test_graph_for_a_million_frames(tmp_path):
    """Building the graph of a 1024 x 1024 scan reads nothing and makes one task per chunk."""
    path = tmp_path / "big.raw"
    with open(path, "wb") as f:
        f.truncate(1024 * 1024 * 2 * 2)  # sparse: 2 x 2 uint8 frames, never written
    # 16 bytes a frame (counted as float32): 4096 frames, four scan rows, a partition
    with dask.config.set({"ltdask.partition-bytes": 4 * 1024 * 16, "ltdask.min-partitions": 1}):
        ds = ltdask.open_raw(path, (1024, 1024), (2, 2), "uint8")
        arr = ds.to_dask()
    assert arr.npartitions == 256
    assert len(arr.__dask_graph__()) == arr.npartitions
    assert arr.chunks[:2] == ((4,) * 256, (1024,))
    assert int(arr[1000, 5].sum().compute()) == 0


def test_copied_chunks_stay_small(tmp_path, monkeypatch):
    """Chunks that are copies of whole frames (another dtype, or decoded) are cut to at most
    `COPY_CHUNK_BYTES` (fresh allocations above it are zeroed pages for every chunk);
    views and frames cut into signal chunks keep their grid."""
    from ltdask.io import dask_array

    monkeypatch.setattr(dask_array, "COPY_CHUNK_BYTES", 3 * 6 * 16 * 8)
    data = np.arange(16 * 6 * 4 * 4, dtype=np.uint16).reshape(16, 6, 4, 4)
    path = tmp_path / "scan.raw"
    data.tofile(path)
    with dask.config.set({"ltdask.partition-bytes": 1 << 20, "ltdask.min-partitions": 1}):
        ds = ltdask.open_raw(path, nav_shape=(16, 6), sig_shape=(4, 4), dtype="uint16")
        copied = ds.to_dask(dtype="float64")
        views = ds.to_dask()
        tiled = ds.to_dask(dtype="float64", chunks=(16, 6, 2, 4))
    assert max(copied.chunks[0]) * 6 * 16 * 8 <= dask_array.COPY_CHUNK_BYTES
    assert len(copied.chunks[0]) > 1 and views.chunks[0] == (16,)
    assert tiled.chunks[:2] == ((16,), (6,))
    for arr in (copied, views, tiled):
        np.testing.assert_array_equal(arr.compute(), data)


def test_view_chunks_join_partitions(tmp_path, monkeypatch):
    """Chunks that are views of the files join several partitions (fewer, larger tasks:
    ``ltdask.partition-bytes`` ``auto`` makes them 4x the dataset's partitions); chunks that
    need decoding stay one partition each."""
    from ltdask.runtime import settings

    data = np.arange(16 * 6 * 4 * 4, dtype=np.float32).reshape(16, 6, 4, 4)
    path = tmp_path / "scan.raw"
    data.tofile(path)
    row = 6 * 16 * 4  # one scan row of float32 frames
    auto = {**settings.AUTO_PARTITION_BYTES, "dataset": row, "views": 4 * row}
    monkeypatch.setattr(settings, "AUTO_PARTITION_BYTES", auto)
    with dask.config.set({"ltdask.min-partitions": 1}):
        ds = ltdask.open_raw(path, nav_shape=(16, 6), sig_shape=(4, 4), dtype="float32")
        assert len(ds.get_partitions()) == 16
        views = ds.to_dask()
        decoded = ds.to_dask(dtype="float64")
    assert views.chunks[0] == (4, 4, 4, 4)
    assert decoded.chunks[0] == (1,) * 16
    np.testing.assert_array_equal(views.compute(), data)
    np.testing.assert_array_equal(decoded.compute(), data)
