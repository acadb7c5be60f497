"""from_array: numpy and dask arrays as datasets."""

from __future__ import annotations

import pickle

import dask
import dask.array as da
import numpy as np
import pytest

import ltdask
from ltdask.io.tiling import TilingScheme

DATA = np.random.default_rng(0).standard_normal((6, 7, 5, 4)).astype(np.float32)


def as_input(kind):
    if kind == "numpy":
        return DATA
    if kind == "dask-frames":
        return da.from_array(DATA, chunks=(2, 3, 5, 4))
    if kind == "dask-sig-chunks":
        return da.from_array(DATA, chunks=(4, 7, 2, 3))
    raise ValueError(kind)


INPUTS = [pytest.param(k, id=k) for k in ("numpy", "dask-frames", "dask-sig-chunks")]


@pytest.mark.parametrize("kind", INPUTS)
@pytest.mark.parametrize(
    "dtype", [pytest.param(None, id="native"), "float64", "int32", "complex64"]
)
def test_from_array_to_dask(small_partitions, kind, dtype):
    ds = ltdask.from_array(as_input(kind))
    assert ds.shape == DATA.shape
    assert ds.nav_shape == (6, 7) and ds.sig_shape == (5, 4)
    arr = ds.to_dask(dtype=dtype)
    expected = DATA if dtype is None else DATA.astype(dtype)
    assert arr.dtype == expected.dtype
    assert arr.npartitions > 1
    np.testing.assert_array_equal(arr.compute(), expected)


@pytest.mark.parametrize("kind", INPUTS)
@pytest.mark.parametrize(
    "chunks",
    [
        pytest.param((3, 3, 5, 4), id="nav-blocks"),
        pytest.param((6, 7, 2, 4), id="sig-rows"),
        pytest.param(((1, 5), (7,), (1, 1, 3), (4,)), id="irregular"),
    ],
)
def test_from_array_chunks(kind, chunks):
    ds = ltdask.from_array(as_input(kind))
    arr = ds.to_dask(chunks=chunks)
    assert arr.chunks == da.core.normalize_chunks(chunks, DATA.shape)
    np.testing.assert_array_equal(arr.compute(), DATA)


@pytest.mark.parametrize("sig_dims", [1, 2, 3])
def test_from_array_sig_dims(sig_dims):
    ds = ltdask.from_array(DATA, sig_dims=sig_dims)
    assert ds.sig_shape == DATA.shape[4 - sig_dims :]
    assert len(ds.to_xarray().dims) == 4
    np.testing.assert_array_equal(ds.to_dask().compute(), DATA)


def test_from_array_xarray_dims():
    assert ltdask.from_array(DATA).to_xarray().dims == ("scan_y", "scan_x", "det_y", "det_x")
    ds = ltdask.from_array(DATA.reshape(42, 20), sig_dims=1)
    assert ds.to_xarray().dims == ("frame", "sig_0")


def test_from_array_names_deterministic():
    a = ltdask.from_array(DATA).to_dask()
    assert a.name == ltdask.from_array(DATA.copy()).to_dask().name
    assert a.name != ltdask.from_array(DATA).to_dask(dtype="float64").name
    assert a.name != ltdask.from_array(DATA + 1).to_dask().name
    lazy = as_input("dask-frames")
    assert ltdask.from_array(lazy).to_dask().name == ltdask.from_array(lazy).to_dask().name


def test_from_array_graph_size(small_partitions):
    data = np.zeros((32, 32, 4, 4), dtype=np.float32)
    ds = ltdask.from_array(data)
    arr = ds.to_dask(dtype="float64")
    # the array's chunks plus one conversion task per chunk
    assert len(arr.__dask_graph__()) <= 2 * arr.npartitions + 2


def test_from_array_lazy_input_not_computed():
    calls = []

    def record(block):
        calls.append(block.shape)
        return block

    lazy = da.from_array(DATA, chunks=(2, 7, 5, 4)).map_blocks(record, meta=DATA[:0, :0, :0, :0])
    ds = ltdask.from_array(lazy)
    ds.to_dask()
    ds.to_xarray()
    assert calls == []


def test_from_array_pickles_without_data():
    big = np.zeros((16, 16, 32, 32), dtype=np.float32)
    ds = ltdask.from_array(big)
    assert len(pickle.dumps(ds.for_task())) < 10_000


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("roi", [pytest.param(False, id="all"), pytest.param(True, id="roi")])
def test_from_array_iter_tiles(dtype, roi):
    rng = np.random.default_rng(1)
    with dask.config.set({"ltdask.partition-bytes": 5 * 4 * 4 * 9, "ltdask.min-partitions": 1}):
        ds = ltdask.from_array(DATA)
        blocks = ds.partition_blocks()
        flat = DATA.reshape(42, 5, 4)
        seen = np.zeros(flat.shape, dtype=int)
        out = np.zeros(flat.shape, dtype=dtype)
        scheme = TilingScheme.make_for_shape((4, 2, 4), (5, 4))
        selected = rng.random(42) < 0.5 if roi else np.ones(42, dtype=bool)
        for p in ds.get_partitions():
            positions = np.flatnonzero(selected[p.start : p.stop]) + p.start
            block = blocks.blocks[p.block].compute()
            for tile, first, s in ds.iter_tiles(positions, scheme, dtype, block=block):
                assert tile.dtype == np.dtype(dtype)
                assert tile.shape[0] <= scheme.depth
                pos = positions[first : first + tile.shape[0]]
                index = (pos, *scheme[s].get())
                seen[index] += 1
                out[index] = tile
    np.testing.assert_array_equal(seen[selected], 1)
    np.testing.assert_array_equal(seen[~selected], 0)
    np.testing.assert_array_equal(out[selected], flat[selected].astype(dtype))


# -- xarray DataArrays (issue 11, item 11: every UDF failed with "no attribute 'reshape'") --
def data_array(kind: str):
    import xarray as xr

    data = DATA if kind == "numpy" else da.from_array(DATA, chunks=(2, 7, 5, 4))
    return xr.DataArray(
        data,
        dims=("y", "x", "ky", "kx"),
        coords={
            "y": np.linspace(0.0, 1.0, 6),
            "x": np.arange(7) * 2,
            "dose": (("y", "x"), np.arange(42.0).reshape(6, 7)),
            "ky": ("ky", np.arange(5) - 2.0, {"units": "1/nm"}),
        },
        name="scan",
        attrs={"units": "counts"},
    )


@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_from_dataarray(small_partitions, kind):
    xa = data_array(kind)
    ds = ltdask.from_array(xa)
    assert ds.dims == ("y", "x", "ky", "kx")
    assert ds.nav_shape == (6, 7) and ds.sig_shape == (5, 4)
    assert set(ds.coords) == {"y", "x", "dose", "ky"}
    np.testing.assert_array_equal(ds.to_dask().compute(), DATA)
    sums, sig_sums, std = ltdask.compute(
        ds, [ltdask.udf.SumUDF(), ltdask.udf.SumSigUDF(), ltdask.udf.StdDevUDF()]
    )
    np.testing.assert_allclose(sums["intensity"].values, DATA.sum(axis=(0, 1)), rtol=1e-5)
    np.testing.assert_allclose(sig_sums["intensity"].values, DATA.sum(axis=(2, 3)), rtol=1e-5)
    np.testing.assert_allclose(std["std"].values, DATA.std(axis=(0, 1)), rtol=1e-5)
    assert sig_sums["intensity"].dims == ("y", "x")
    roi = np.zeros((6, 7), dtype=bool)
    roi[2, 3:6] = True
    picked = ltdask.udf.PickUDF().compute(ds, roi=roi)
    np.testing.assert_array_equal(picked["intensity"].values, DATA[roi])
    back = ds.to_xarray()
    assert back.dims == xa.dims
    for name in ("y", "x", "dose", "ky"):
        assert back[name].identical(xa[name]), name
    np.testing.assert_array_equal(back.values, DATA)


def test_dask_dataarray_stays_lazy(small_partitions):
    import xarray as xr

    computed = []

    def count(block):
        computed.append(block.shape)
        return block

    meta = np.empty((0, 0, 0, 0), DATA.dtype)
    lazy = da.from_array(DATA, chunks=(3, 7, 5, 4)).map_blocks(count, meta=meta)
    ds = ltdask.from_array(xr.DataArray(lazy, dims=("a", "b", "c", "d")))
    arr = ds.to_dask()
    assert computed == [] and ds.dims == ("a", "b", "c", "d")
    np.testing.assert_array_equal(arr.compute(), DATA)
    assert computed


def test_dataarray_dims_renamed_and_sig_dims(small_partitions):
    xa = data_array("numpy")
    ds = ltdask.from_array(xa, dims=("p", "q", "u", "v"))
    assert ds.dims == ("p", "q", "u", "v")
    back = ds.to_xarray()
    np.testing.assert_array_equal(back["p"].values, xa["y"].values)
    assert back["dose"].dims == ("p", "q")
    flat = ltdask.from_array(
        xa.stack(pos=("y", "x")).transpose("pos", "ky", "kx").drop_vars(["pos", "y", "x", "dose"]),
        sig_dims=2,
    )
    assert flat.dims == ("pos", "ky", "kx") and flat.nav_shape == (42,)
    three = ltdask.from_array(xa.isel(kx=0), sig_dims=1)
    assert three.dims == ("y", "x", "ky") and three.sig_shape == (5,)
    res = ltdask.udf.SumUDF().compute(three)
    np.testing.assert_allclose(res["intensity"].values, DATA[..., 0].sum(axis=(0, 1)), rtol=1e-5)


def test_dataarray_bad_dims():
    xa = data_array("numpy")
    with pytest.raises(ltdask.DataSetError, match=r"dims=\('a', 'b'\) must be 4 names, one per"):
        ltdask.from_array(xa, dims=("a", "b"))
    with pytest.raises(ltdask.DataSetError, match=r"sig_dims=4 does not fit the array shape"):
        ltdask.from_array(xa, sig_dims=4)


def test_dataarray_coords_stay_out_of_tasks():
    xa = data_array("numpy")
    ds = ltdask.from_array(xa)
    assert ds.for_task().coords == {}
    assert ds.coords  # the dataset itself keeps them


@pytest.mark.parametrize("nav", [(40, 6), (240,)])
def test_tasks_find_their_partition_from_the_grid(monkeypatch, nav):
    """A partition task finds its partition's first frame from the nav grid's bounds, not
    from a list of every partition (3 ms a task in 256 partitions): the list is made a few
    times per run, not once per task; with a ROI that skips partitions' first frames, the
    results are numpy's."""
    from ltdask.io import dataset as dataset_module
    from ltdask.udf import SumSigUDF

    listed = []
    real = dataset_module.partitions_for_grid
    monkeypatch.setattr(
        dataset_module, "partitions_for_grid", lambda chunks: listed.append(1) or real(chunks)
    )
    data = np.random.default_rng(3).random((*nav, 5, 4)).astype(np.float32)
    roi = np.random.default_rng(4).random(nav) < 0.4
    roi.reshape(-1)[::6] = False  # (the first frame of each 6-frame partition skipped)
    with dask.config.set({"ltdask.partition-bytes": 6 * 5 * 4 * 4, "ltdask.min-partitions": 1}):
        ds = ltdask.from_array(data)
        assert len(ds.get_partitions()) == 40
        listed.clear()
        (res,) = ltdask.compute(ds, [SumSigUDF()], roi=roi, scheduler="sync")
    assert len(listed) < 10, len(listed)
    expected = np.where(roi, data.sum(axis=(-2, -1)), np.nan)
    np.testing.assert_allclose(res["intensity"].values, expected, rtol=1e-6)
