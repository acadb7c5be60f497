"""Zarr: formats 2 and 3, shards, stores and arrays, chunk alignment, and clear errors."""

from __future__ import annotations

import pickle

import dask
import numpy as np
import pytest
import zarr
from helpers.formatfiles import make_data

import ltdask
from ltdask import DataSetError
from ltdask.io.formats.zarr import ZarrDataSet, open_zarr

DATA = make_data("<u2", nav=(6, 8), sig=(9, 11))


def create(store, data=DATA, **kw):
    z = zarr.create_array(str(store), shape=data.shape, dtype=data.dtype, **kw)
    z[...] = data
    return z


ARRAYS = [
    pytest.param({"chunks": (2, 3, 4, 6), "zarr_format": 2}, id="v2"),
    pytest.param({"chunks": (2, 3, 4, 6), "zarr_format": 2, "order": "F"}, id="v2-fortran"),
    pytest.param({"chunks": (2, 3, 9, 11)}, id="v3"),
    pytest.param({"chunks": (1, 2, 3, 11), "shards": (2, 4, 9, 11)}, id="v3-sharded"),
    pytest.param({"chunks": (6, 8, 9, 11), "compressors": None}, id="v3-one-chunk-raw"),
]


@pytest.mark.parametrize("kw", ARRAYS)
def test_read(tmp_path, kw):
    create(tmp_path / "scan.zarr", **kw)
    with dask.config.set({"ltdask.partition-bytes": 2000, "ltdask.min-partitions": 1}):
        ds = open_zarr(tmp_path / "scan.zarr")
        assert isinstance(ds, ZarrDataSet)
        assert ds.zarr_format == kw.get("zarr_format", 3)
        np.testing.assert_array_equal(ds.to_dask().compute(), DATA)
        np.testing.assert_array_equal(ds.to_dask("f8", chunks=(4, 5, 6, 7)).compute(), DATA)
        res = ltdask.udf.SumUDF().compute(ds, roi=DATA[..., 0, 0] % 2 == 0)
    np.testing.assert_allclose(res["intensity"].values, DATA[DATA[..., 0, 0] % 2 == 0].sum(0))


def test_partitions_follow_shards_and_tiles_follow_chunks(tmp_path):
    data = make_data("<u2", nav=(12, 10), sig=(16, 24))
    create(tmp_path / "scan.zarr", data, chunks=(1, 5, 8, 12), shards=(3, 10, 16, 24))
    with dask.config.set({"ltdask.partition-bytes": 16 * 24 * 4 * 12, "ltdask.min-partitions": 1}):
        ds = open_zarr(tmp_path / "scan.zarr")
        assert ds.chunks == (1, 5, 8, 12) and ds.shards == (3, 10, 16, 24)
        assert ds.get_nav_alignment() == (3, 10)
        parts = ds.get_partitions()
        assert len(parts) > 1
        assert all(p.nav_slices[0].start % 3 == 0 for p in parts)
        scheme = ds.negotiate([ltdask.TilingPreferences()], np.float32)
        assert all(sl.origin[0] % 8 == 0 and sl.origin[1] % 12 == 0 for sl in scheme)
        assert scheme.depth % 5 == 0
        res = ltdask.udf.SumSigUDF().compute(ds)
    np.testing.assert_allclose(res["intensity"].values, data.sum(axis=(2, 3)))


def test_metadata_document_and_dimension_names(tmp_path):
    create(tmp_path / "scan.zarr", chunks=(2, 4, 9, 11), dimension_names=("y", "x", "ky", "kx"))
    ds = open_zarr(tmp_path / "scan.zarr" / "zarr.json")
    assert ds.dims == ("y", "x", "ky", "kx")
    assert ds.to_xarray().dims == ("y", "x", "ky", "kx")
    create(tmp_path / "v2.zarr", chunks=(2, 4, 9, 11), zarr_format=2)
    assert open_zarr(tmp_path / "v2.zarr" / ".zarray").shape == DATA.shape


def test_group_path(tmp_path):
    group = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    group.create_array("entry/scan", shape=DATA.shape, dtype=DATA.dtype)[...] = DATA
    group.create_array("dark", shape=DATA.shape[2:], dtype=DATA.dtype)
    ds = open_zarr(tmp_path / "g.zarr", path="entry/scan")
    np.testing.assert_array_equal(ds.to_dask().compute(), DATA)
    # the only array with enough dims
    assert open_zarr(tmp_path / "g.zarr").array_path == "entry/scan"


def test_local_array_reopens_from_its_path(tmp_path):
    z = create(tmp_path / "scan.zarr", chunks=(2, 4, 9, 11))
    ds = open_zarr(z)
    assert ds.store == str(tmp_path / "scan.zarr") and ds._array is None
    again = pickle.loads(pickle.dumps(ds))
    np.testing.assert_array_equal(again.to_dask().compute(), DATA)


def test_memory_store_array_travels_with_the_tasks():
    z = zarr.create_array(zarr.storage.MemoryStore(), shape=DATA.shape, dtype=DATA.dtype)
    z[...] = DATA
    ds = open_zarr(z)
    assert ds.store is None
    np.testing.assert_array_equal(ds.to_dask().compute(scheduler="threads"), DATA)


@pytest.mark.parametrize("nav_shape, sync_offset", [((6, 8), -3), ((4, 12), 5)])
def test_frame_stream(tmp_path, nav_shape, sync_offset):
    stream = DATA.reshape(48, 9, 11)
    create(tmp_path / "f.zarr", stream, chunks=(5, 9, 11))
    ds = open_zarr(tmp_path / "f.zarr", nav_shape=nav_shape, sync_offset=sync_offset)
    assert ds.get_nav_alignment() is None
    flat = np.zeros((48, 9, 11), DATA.dtype)
    for p in range(48):
        if 0 <= p + sync_offset < 48:
            flat[p] = stream[p + sync_offset]
    np.testing.assert_array_equal(ds.to_dask().compute(), flat.reshape((*nav_shape, 9, 11)))


def test_errors_list_candidate_arrays(tmp_path):
    group = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    group.create_array("a/scan", shape=(2, 3, 4, 5), dtype="u2")
    group.create_array("b", shape=(3, 4, 5), dtype="f4")
    group.create_array("flat", shape=(3, 4), dtype="f4")
    listed = r"arrays with at least 3 dims: 'a/scan' \(2, 3, 4, 5\) uint16, 'b' \(3, 4, 5\)"
    with pytest.raises(DataSetError, match=r"g.zarr': the store is a group; pass path=.*" + listed):
        open_zarr(tmp_path / "g.zarr")
    with pytest.raises(DataSetError, match=r"path='nope' is not in the store; " + listed):
        open_zarr(tmp_path / "g.zarr", path="nope")
    with pytest.raises(DataSetError, match=r"path='a' is a group; .*" + listed):
        open_zarr(tmp_path / "g.zarr", path="a")
    with pytest.raises(DataSetError, match=r"sig_dims=2 does not fit the array shape \(3, 4\)"):
        open_zarr(tmp_path / "g.zarr", path="flat")


def test_not_a_store(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.zarr' does not exist"):
        open_zarr(tmp_path / "nope.zarr")
    (tmp_path / "plain").mkdir()
    with pytest.raises(DataSetError, match="plain' is not a Zarr array or group"):
        open_zarr(tmp_path / "plain")


def test_missing_chunks_read_fill_value(tmp_path):
    z = zarr.create_array(
        str(tmp_path / "s.zarr"),
        shape=DATA.shape,
        dtype=DATA.dtype,
        chunks=(3, 4, 9, 11),
        fill_value=5,
    )
    z[:3] = DATA[:3]
    expected = np.full_like(DATA, 5)
    expected[:3] = DATA[:3]
    np.testing.assert_array_equal(open_zarr(tmp_path / "s.zarr").to_dask().compute(), expected)


@pytest.mark.parametrize(
    "kw, message",
    [
        pytest.param(
            {"nav_shape": (-1, 48)}, r"nav_shape=\(-1, 48\) has zero or negative", id="neg"
        ),
        pytest.param({"sig_dims": 4}, r"sig_dims=4 does not fit the array shape", id="sig-dims"),
        pytest.param({"sync_offset": -48}, r"sync_offset=-48 is beyond the data", id="offset"),
    ],
)
def test_wrong_shapes(tmp_path, kw, message):
    create(tmp_path / "scan.zarr", chunks=(2, 4, 9, 11))
    with pytest.raises(DataSetError, match=message):
        open_zarr(tmp_path / "scan.zarr", **kw)


# -- calibrations kept by DataSet.to_zarr ------------------------------------------------------
NAV_CAL = [(1.5, -3.0, "nm"), (2.0, 0.0, "nm")]
SIG_CAL = [(0.2, -0.9, "mrad"), (0.25, 0.0, "mrad")]


def test_to_zarr_keeps_the_calibrations(tmp_path):
    path = tmp_path / "scan.zarr"
    ltdask.from_array(DATA, nav_calibration=NAV_CAL, sig_calibration=SIG_CAL).to_zarr(path)
    ds = open_zarr(path)
    assert [tuple(vars(a).values()) for a in ds.nav_calibration] == NAV_CAL
    assert [tuple(vars(a).values()) for a in ds.sig_calibration] == SIG_CAL
    coords = ds.to_xarray().coords
    np.testing.assert_allclose(coords["scan_y"], -3.0 + 1.5 * np.arange(6))
    np.testing.assert_allclose(coords["det_y"], -0.9 + 0.2 * np.arange(9))
    assert coords["det_x"].attrs["units"] == "mrad"
    # another nav shape: the scan steps no longer apply; the keywords override the file
    assert not any(a.calibrated for a in open_zarr(path, nav_shape=(48,)).nav_calibration)
    assert open_zarr(path, sig_calibration=(3.0, "px")).sig_calibration[1].units == "px"


def test_no_calibration_no_attribute(tmp_path):
    ltdask.from_array(DATA).to_zarr(tmp_path / "scan.zarr")
    assert "calibration" not in zarr.open_array(tmp_path / "scan.zarr").attrs["ltdask"]
    assert not any(a.calibrated for a in open_zarr(tmp_path / "scan.zarr").sig_calibration)


def test_a_calibration_that_cannot_be_used_warns(tmp_path):
    z = create(tmp_path / "scan.zarr", chunks=(2, 3, 9, 11))
    z.attrs["ltdask"] = {"sig_dims": 2, "calibration": {"sig": [{"scale": 0}, {"scale": 1}]}}
    with pytest.warns(
        ltdask.MetadataWarning,
        match=r"scan.zarr'?: the calibration .* \(calibration scale=0: .*read without it",
    ):
        ds = open_zarr(tmp_path / "scan.zarr")
    assert not any(a.calibrated for a in ds.sig_calibration)
