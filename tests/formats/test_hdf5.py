"""HDF5: read paths by storage layout, chunk-aligned partitions and tiles, and clear errors."""

from __future__ import annotations

import math
import re

import dask
import numpy as np
import pytest
from helpers.formatfiles import make_data

import ltdask
from ltdask import DataSetError
from ltdask.io.formats.hdf5 import HDF5DataSet, open_hdf5
from ltdask.io.formats.hdf5.mapped import HDF5MappedDataSet

h5py = pytest.importorskip("h5py")

DATA = make_data("<u2", nav=(6, 8), sig=(9, 11))


def write(path, datasets: dict, **file_kw):
    with h5py.File(path, "w", **file_kw) as f:
        for key, (data, create) in datasets.items():
            if data is None:
                f.create_dataset(key, **create)
            else:
                f.create_dataset(key, data=data, **create)
    return path


# -- read paths by layout --------------------------------------------------------------
LAYOUTS = [
    pytest.param({}, True, HDF5MappedDataSet, "contiguous", id="contiguous-mmap"),
    pytest.param({}, False, HDF5DataSet, "contiguous", id="contiguous-h5py"),
    pytest.param({"chunks": (1, 8, 9, 11)}, True, HDF5MappedDataSet, "chunked", id="rows-mmap"),
    pytest.param({"chunks": (2, 3, 9, 11)}, True, HDF5MappedDataSet, "chunked", id="boxes-mmap"),
    pytest.param({"chunks": (2, 3, 9, 11)}, False, HDF5DataSet, "chunked", id="boxes-h5py"),
    pytest.param({"chunks": (1, 4, 5, 11)}, True, HDF5DataSet, "chunked", id="cut-frames"),
    pytest.param(
        {"chunks": (2, 3, 4, 6), "compression": "gzip"}, True, HDF5DataSet, "chunked", id="gzip"
    ),
    pytest.param(
        {"chunks": (3, 8, 9, 11), "compression": "lzf"}, True, HDF5DataSet, "chunked", id="lzf"
    ),
]


@pytest.mark.parametrize("create, mmap, cls, layout", LAYOUTS)
def test_layout_picks_read_path(tmp_path, create, mmap, cls, layout):
    path = write(tmp_path / "scan.h5", {"data": (DATA, create)})
    ds = open_hdf5(path, "data", mmap=mmap)
    assert type(ds) is cls
    assert ds.layout == layout and ds.key == "/data"
    with dask.config.set({"ltdask.partition-bytes": 3000, "ltdask.min-partitions": 1}):
        ds = open_hdf5(path, "data", mmap=mmap)
        np.testing.assert_array_equal(ds.to_dask().compute(), DATA)
        res = ltdask.udf.SumSigUDF().compute(ds)
    np.testing.assert_allclose(res["intensity"].values, DATA.sum(axis=(2, 3)))


# -- compression filters of hdf5plugin (pip install ltdask[hdf5]) -----------------------------
def _plugin_filters():
    """Name -> ``create_dataset`` keywords of filters detectors write, built lazily: the
    hdf5plugin package is an optional extra (ltdask[hdf5], in the test extra)."""
    hdf5plugin = pytest.importorskip("hdf5plugin")
    return {
        "bitshuffle-lz4": hdf5plugin.Bitshuffle(cname="lz4"),
        "lz4": hdf5plugin.LZ4(),
        "blosc-zstd": hdf5plugin.Blosc(cname="zstd", shuffle=hdf5plugin.Blosc.BITSHUFFLE),
        "zstd": hdf5plugin.Zstd(),
    }


@pytest.mark.parametrize("name", ["bitshuffle-lz4", "lz4", "blosc-zstd", "zstd"])
def test_compressed_by_hdf5plugin(tmp_path, name):
    compression = _plugin_filters()[name]
    path = write(
        tmp_path / "scan.h5", {"entry/data": (DATA, {"chunks": (2, 4, 9, 11), **compression})}
    )
    ds = ltdask.open(path, key="entry/data")
    assert isinstance(ds, HDF5DataSet)
    np.testing.assert_array_equal(ds.to_dask().compute(scheduler="sync"), DATA)
    res = ltdask.udf.SumSigUDF().compute(ds)
    np.testing.assert_allclose(res["intensity"].values, DATA.sum(axis=(2, 3)))


def test_compressed_by_hdf5plugin_in_worker_processes(tmp_path, process_pool):
    """Spawned workers register hdf5plugin's filters themselves before they read."""
    compression = _plugin_filters()["bitshuffle-lz4"]
    path = write(tmp_path / "scan.h5", {"data": (DATA, {"chunks": (2, 4, 9, 11), **compression})})
    ds = open_hdf5(path, "data")
    with dask.config.set({"scheduler": "processes", "pool": process_pool}):
        np.testing.assert_array_equal(ds.to_dask().compute(), DATA)


def test_chunk_runs_are_merged(tmp_path):
    """Chunks of whole rows written in order are one run of frames in the file."""
    path = write(tmp_path / "scan.h5", {"data": (DATA, {"chunks": (1, 8, 9, 11)})})
    ds = open_hdf5(path, "data")
    assert len(ds.fileset.files) < 6  # 6 chunks
    assert sum(f.num_frames for f in ds.fileset.files) == 48


def test_userblock(tmp_path):
    """Offsets count from the start of the file, user block included."""
    path = write(
        tmp_path / "scan.h5",
        {"a": (DATA, {}), "b": (DATA, {"chunks": (1, 4, 9, 11)})},
        userblock_size=512,
    )
    for key in "ab":
        ds = open_hdf5(path, key)
        assert isinstance(ds, HDF5MappedDataSet)
        np.testing.assert_array_equal(ds.to_dask().compute(), DATA)


@pytest.mark.parametrize(
    "create",
    [
        pytest.param({"chunks": (2, 4, 9, 11)}, id="chunked"),
        pytest.param({"chunks": (2, 4, 9, 11), "compression": "gzip"}, id="gzip"),
    ],
)
def test_unwritten_chunks_read_fill_value(tmp_path, create):
    path = tmp_path / "scan.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("data", shape=DATA.shape, dtype=DATA.dtype, fillvalue=7, **create)
        d[:2] = DATA[:2]
    ds = open_hdf5(path, "data")
    assert isinstance(ds, HDF5DataSet)
    expected = np.full_like(DATA, 7)
    expected[:2] = DATA[:2]
    np.testing.assert_array_equal(ds.to_dask().compute(), expected)


def test_never_written_contiguous_dataset(tmp_path):
    path = write(tmp_path / "scan.h5", {"data": (None, {"shape": (2, 3, 4, 5), "dtype": "f4"})})
    ds = open_hdf5(path, "data")
    assert isinstance(ds, HDF5DataSet)  # no storage allocated: no offset to map
    np.testing.assert_array_equal(ds.to_dask().compute(), np.zeros((2, 3, 4, 5), "f4"))


@pytest.mark.parametrize("mmap", [True, False], ids=["mmap", "h5py"])
@pytest.mark.parametrize("dtype", [">f4", ">u2", "<c8", "i1"])
def test_dtypes(tmp_path, dtype, mmap):
    data = make_data(dtype if dtype != "<c8" else "<f4", nav=(3, 4), sig=(5, 6)).astype(dtype)
    path = write(tmp_path / "scan.h5", {"data": (data, {"chunks": (1, 2, 5, 6)})})
    ds = open_hdf5(path, "data", mmap=mmap)
    assert ds.dtype == np.dtype(dtype).newbyteorder("=")
    np.testing.assert_array_equal(ds.to_dask().compute(), data)
    np.testing.assert_array_equal(ds.to_dask(dtype="complex128").compute(), data)


# -- nav shape, sync offset, dims -------------------------------------------------------
def expected_scan(stream, nav_shape, sync_offset):
    n = math.prod(nav_shape)
    out = np.zeros((n, *stream.shape[1:]), stream.dtype)
    for p in range(n):
        if 0 <= p + sync_offset < len(stream):
            out[p] = stream[p + sync_offset]
    return out.reshape((*nav_shape, *stream.shape[1:]))


@pytest.mark.parametrize(
    "create",
    [
        pytest.param({}, id="contiguous"),
        pytest.param({"chunks": (4, 9, 11), "compression": "gzip"}, id="gzip"),
    ],
)
@pytest.mark.parametrize(
    "nav_shape, sync_offset",
    [
        pytest.param((6, 8), 3, id="skip-3"),
        pytest.param((6, 8), -5, id="insert-5"),
        pytest.param((5, 9), 0, id="reshaped"),
        pytest.param((5, 9), -2, id="reshaped-insert-2"),
    ],
)
def test_frame_stream(tmp_path, create, sync_offset, nav_shape):
    stream = DATA.reshape(48, 9, 11)
    path = write(tmp_path / "scan.h5", {"frames": (stream, create)})
    with dask.config.set({"ltdask.partition-bytes": 2000, "ltdask.min-partitions": 1}):
        ds = open_hdf5(path, "frames", nav_shape=nav_shape, sync_offset=sync_offset)
        expected = expected_scan(stream, nav_shape, sync_offset)
        np.testing.assert_array_equal(ds.to_dask().compute(), expected)
        roi = np.random.default_rng(3).random(nav_shape) < 0.5
        res = ltdask.udf.SumSigUDF().compute(ds, roi=roi)
    valid = ds.valid_nav_mask() & roi
    np.testing.assert_array_equal(res["intensity"]["intensity_valid"].values, valid)
    np.testing.assert_allclose(
        res["intensity"].values[valid], expected.sum(axis=(2, 3))[valid].astype("f4")
    )


def test_dimension_labels_name_dims(tmp_path):
    path = tmp_path / "scan.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("data", data=DATA)
        for dim, label in zip(d.dims, ("y", "x", "ky", "kx"), strict=True):
            dim.label = label
    assert open_hdf5(path, "data").dims == ("y", "x", "ky", "kx")
    assert open_hdf5(path, "data", dims=("a", "b", "c", "d")).to_xarray().dims == (
        "a",
        "b",
        "c",
        "d",
    )


def test_sig_dims(tmp_path):
    path = write(tmp_path / "scan.h5", {"data": (DATA, {"chunks": (2, 4, 9, 11)})})
    ds = open_hdf5(path, "data", sig_dims=1)
    assert ds.nav_shape == (6, 8, 9) and ds.sig_shape == (11,)
    np.testing.assert_array_equal(ds.to_dask().compute(), DATA)


# -- chunk alignment ----------------------------------------------------------------------
def test_partitions_and_tiles_follow_chunks(tmp_path):
    data = make_data("<u2", nav=(10, 12), sig=(16, 24))
    chunks = (2, 3, 8, 12)
    path = write(tmp_path / "scan.h5", {"data": (data, {"chunks": chunks, "compression": "gzip"})})
    with dask.config.set({"ltdask.partition-bytes": 16 * 24 * 4 * 12, "ltdask.min-partitions": 1}):
        ds = open_hdf5(path, "data")
        parts = ds.get_partitions()
        assert len(parts) > 1
        for p in parts:
            rows = p.nav_slices[0]
            assert rows.start % 2 == 0  # no chunk shared by two partitions
            assert p.nav_slices[1] == slice(0, 12)
        assert ds.get_base_shape() == (8, 12)
        scheme = ds.negotiate([ltdask.TilingPreferences()], np.float32)
        for sl in scheme:
            assert sl.origin[0] % 8 == 0 and sl.origin[1] % 12 == 0
        assert scheme.depth % 3 == 0
        res = ltdask.udf.SumUDF().compute(ds)
    np.testing.assert_allclose(res["intensity"].values, data.sum(axis=(0, 1)))


def test_chunk_cache_holds_a_band_of_chunks(tmp_path):
    path = write(
        tmp_path / "scan.h5",
        {"data": (DATA, {"chunks": (1, 4, 5, 11), "compression": "gzip"})},
    )
    ds = open_hdf5(path, "data")
    per_chunk = 4 * 5 * 11 * 2
    assert ds.cache_bytes >= 2 * 2 * per_chunk  # the 2 x 2 chunks of one row of frames


# -- errors -------------------------------------------------------------------------------
@pytest.fixture
def multi(tmp_path):
    return write(
        tmp_path / "multi.h5",
        {
            "entry/data/raw": (DATA, {}),
            "entry/data/binned": (DATA[:, :, :4, :4], {"chunks": (1, 8, 4, 4)}),
            "entry/dark": (DATA[0, 0], {}),
        },
    )


CANDIDATES = (
    r"datasets with at least 3 dims: '/entry/data/binned' \(6, 8, 4, 4\) uint16, "
    r"'/entry/data/raw' \(6, 8, 9, 11\) uint16"
)


@pytest.mark.parametrize(
    "key, message",
    [
        pytest.param("entry/data/nope", r"key='entry/data/nope' does not exist; ", id="missing"),
        pytest.param("entry/data", r"key='entry/data' is a group, not a dataset; ", id="group"),
        pytest.param("entry/dark", r"dataset 'entry/dark' has shape \(9, 11\)", id="2-d"),
        pytest.param(None, r"several datasets could be the scan; pass key=", id="no-key"),
    ],
)
def test_key_errors_list_candidates(multi, key, message):
    with pytest.raises(DataSetError, match=re.escape(str(multi)) + ".*" + message) as info:
        open_hdf5(multi, key)
    assert re.search(CANDIDATES, str(info.value))


def test_key_none_picks_the_only_candidate(tmp_path):
    path = write(tmp_path / "one.h5", {"scan": (DATA, {}), "dark": (DATA[0, 0], {})})
    assert open_hdf5(path).key == "/scan"


def test_no_candidates(tmp_path):
    path = write(tmp_path / "flat.h5", {"dark": (DATA[0, 0], {})})
    with pytest.raises(DataSetError, match="holds no dataset with at least 3 dims"):
        open_hdf5(path, "nope")


def test_not_hdf5(tmp_path):
    path = tmp_path / "scan.h5"
    path.write_bytes(b"not HDF5 at all" * 10)
    with pytest.raises(DataSetError, match=r"scan.h5' is not an HDF5 file"):
        open_hdf5(path, "data")


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.h5"):
        open_hdf5(tmp_path / "nope.h5", "data")


@pytest.mark.parametrize(
    "create",
    [
        pytest.param({}, id="contiguous"),
        pytest.param({"chunks": (1, 8, 9, 11)}, id="chunked"),
        pytest.param({"chunks": (1, 8, 9, 11), "compression": "gzip"}, id="gzip"),
    ],
)
def test_truncated_file(tmp_path, create):
    path = write(tmp_path / "scan.h5", {"data": (DATA, create)})
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size - 200)
    with pytest.raises(DataSetError, match=r"scan.h5'.*truncated"):
        open_hdf5(path, "data")


def test_bad_sig_dims(tmp_path):
    path = write(tmp_path / "scan.h5", {"data": (DATA, {})})
    with pytest.raises(DataSetError, match=r"has shape \(6, 8, 9, 11\), which has no nav dims"):
        open_hdf5(path, "data", sig_dims=4)
    with pytest.raises(DataSetError, match=r"sig_dims=0 must be a positive integer"):
        open_hdf5(path, "data", sig_dims=0)


def test_mapped_file_shrunk_after_opening(tmp_path):
    path = write(tmp_path / "scan.h5", {"data": (DATA, {"chunks": (2, 3, 9, 11)})})
    ds = open_hdf5(path, "data")
    assert isinstance(ds, HDF5MappedDataSet) and len(ds.fileset.files) > 1
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size - 300)
    with pytest.raises(DataSetError, match=r"scan.h5' changed since it was opened \(its size"):
        ds.to_dask().compute()


@pytest.mark.parametrize(
    "kw, message",
    [
        pytest.param({"nav_shape": (6, 0)}, r"nav_shape=\(6, 0\) has zero or negative", id="zero"),
        pytest.param({"nav_shape": "6x8"}, r"nav_shape='6x8' is not a sequence", id="text"),
        pytest.param({"sync_offset": 48}, r"sync_offset=48 is beyond the data", id="offset"),
        pytest.param({"dims": ("a", "b")}, r"dims=\('a', 'b'\) must be 4 distinct", id="dims"),
    ],
)
def test_wrong_shapes(tmp_path, kw, message):
    path = write(tmp_path / "scan.h5", {"data": (DATA, {"chunks": (2, 4, 9, 11)})})
    for mmap in (True, False):
        with pytest.raises(DataSetError, match=message):
            open_hdf5(path, "data", mmap=mmap, **kw)
