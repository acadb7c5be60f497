"""The graphs UDF runs compile to: lazy results, deterministic names, several UDFs in one
pass reading every tile once, and partial results."""

from __future__ import annotations

import math

import dask
import dask.array as da
import numpy as np
import pytest
from helpers import udf_examples as ex
from helpers.udf_helpers import (
    CountingRawDataSet,
    check_variable,
    make_roi,
    open_dataset,
    partitions,
    random_data,
    read_log,
)

import ltdask
from ltdask.udf import StdDevUDF, SumUDF

# the scan of the `data` and `ds` fixtures (conftest.py): 8 partitions
NAV, SIG, SEED, FRAMES_PER_PARTITION = (5, 6), (3, 4), 31, 4


def _udfs(ds_shape=None):
    return [
        ex.AverageUDF(),
        ex.PixelsumUDF(),
        ex.CoordUDF(),
        ex.CustomValidMask(),
        ex.TileSumUDF(),
        ex.PartitionUDF(),
        ex.TaskDataUDF(factor=3.0),
        ex.MergeAllUDF(),
        ex.MergeOnlyUDF(),
        ex.NavOnlyNoMergeUDF(),
    ]


def _assert_equal_datasets(a, b):
    assert set(a.data_vars) == set(b.data_vars)
    assert set(a.coords) == set(b.coords)
    for name in a.data_vars:
        assert a[name].dims == b[name].dims
        np.testing.assert_array_equal(a[name].values, b[name].values)
        np.testing.assert_array_equal(
            a.coords[f"{name}_valid"].values, b.coords[f"{name}_valid"].values
        )


# -- lazy results ---------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("roi_kind", ["none", "random", "all-false"])
def test_lazy_results_are_dask_backed(ds, roi_kind):
    roi = make_roi(roi_kind, NAV)
    udfs = _udfs()
    lazies = [udf.lazy(ds, roi=roi) for udf in udfs]
    for udf, lazy in zip(udfs, lazies, strict=True):
        for name in lazy.data_vars:
            assert isinstance(lazy[name].data, da.Array), (type(udf).__name__, name)
    computed = ltdask.compute(ds, udfs, roi=roi)
    for lazy, res in zip(lazies, computed, strict=True):
        _assert_equal_datasets(lazy.compute(), res)


def test_lazy_builds_without_running(ds):
    """Building the graph runs no partition task (ExplodingUDF fails in any of them)."""
    lazy = ex.ExplodingUDF().lazy(ds)
    with pytest.raises(RuntimeError, match="processed a frame") as info:
        lazy.compute()
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "ExplodingUDF" in notes


# -- several UDFs in one run ----------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("roi_kind", ["none", "random"])
def test_multi_udf_run_equals_separate_runs(ds, roi_kind):
    roi = make_roi(roi_kind, NAV)
    udfs = _udfs()
    together = ltdask.compute(ds, udfs, roi=roi)
    assert len(together) == len(udfs)
    lazies = ltdask.lazy(ds, udfs, roi=roi)
    computed = dask.compute(*lazies)
    for udf, res, lazy_res in zip(udfs, together, computed, strict=True):
        assert res.attrs["udf"] == type(udf).__name__
        alone = udf.compute(ds, roi=roi)
        _assert_equal_datasets(res, alone)
        _assert_equal_datasets(lazy_res, alone)


def test_same_udf_twice_in_one_run(ds, data):
    a, b = ltdask.compute(ds, [ex.SumUDF(), ex.SumUDF()])
    _assert_equal_datasets(a, b)
    check_variable(a, "sum", data.astype(np.float64).sum(axis=(0, 1)), True, ("det_y", "det_x"))


# -- deterministic graph names ------------------------------------------------------------------


def _keys(results):
    if not isinstance(results, list | tuple):
        results = [results]
    return {name: res[name].data.name for res in results for name in res.data_vars}


def test_graph_names_are_deterministic(ds, data, tmp_path):
    roi = make_roi("random", NAV)
    same = _keys(ex.TaskDataUDF(factor=2.0).lazy(ds, roi=roi))
    assert same == _keys(ex.TaskDataUDF(factor=2.0).lazy(ds, roi=roi.copy()))
    assert same == _keys(ex.TaskDataUDF(factor=2.0).lazy(ds, roi=roi.reshape(-1)))
    # different parameters, ROI, UDF class, or data: different names
    assert set(same.values()).isdisjoint(
        _keys(ex.TaskDataUDF(factor=3.0).lazy(ds, roi=roi)).values()
    )
    assert set(same.values()).isdisjoint(
        _keys(ex.TaskDataUDF(factor=2.0).lazy(ds, roi=~roi)).values()
    )
    assert set(same.values()).isdisjoint(_keys(ex.TaskDataUDF(factor=2.0).lazy(ds)).values())
    with partitions(4 * 12 * 4):
        other = open_dataset("raw", data + 1, tmp_path)
    assert set(same.values()).isdisjoint(
        _keys(ex.TaskDataUDF(factor=2.0).lazy(other, roi=roi)).values()
    )
    a = _keys(ex.MergeOnlyUDF().lazy(ds))
    assert a == _keys(ex.MergeOnlyUDF().lazy(ds))
    assert set(a.values()).isdisjoint(_keys(ex.MergeAllUDF().lazy(ds)).values())


def test_graph_names_for_reopened_files(data, tmp_path):
    path = tmp_path / "scan.raw"
    data.tofile(path)
    with partitions(4 * 12 * 4):
        a, b = (
            ltdask.open_raw(path, nav_shape=NAV, sig_shape=SIG, dtype="float32") for _ in range(2)
        )
    assert _keys(ex.MergeAllUDF().lazy(a)) == _keys(ex.MergeAllUDF().lazy(b))


def test_aux_data_in_graph_names(ds):
    aux = np.arange(np.prod(NAV) * 2, dtype=np.float64).reshape((*NAV, 2))

    def keys(values):
        udf = ex.AuxFrameUDF(
            aux=ltdask.UDF.aux_data(values, kind="nav", extra_shape=(2,), dtype=np.float64),
            scalar=ltdask.UDF.aux_data(np.zeros(NAV), kind="nav", dtype=np.float64),
        )
        return _keys(udf.lazy(ds))

    assert keys(aux) == keys(aux.copy())
    assert set(keys(aux).values()).isdisjoint(keys(aux + 1).values())


def test_a_fresh_run_id_per_run(ds):
    """``meta.run_id`` (the key of per-process caches of a run's derived data): one id in
    all partition tasks of a run, another in the next run; None on the main node."""
    first = ex.RunIdUDF().compute(ds)
    second = ex.RunIdUDF().compute(ds)
    ids = set(first["run_id"].values.ravel())
    assert len(ids) == 1 and len(ids.pop()) == 32
    assert set(second["run_id"].values.ravel()).isdisjoint(first["run_id"].values.ravel())
    assert first["main_run_id"].values.tolist() == ["none"]


# -- every tile read once ------------------------------------------------------------------------


def _counting_dataset(tmp_path, data, log):
    path = tmp_path / "counted.raw"
    data.tofile(path)
    ds = CountingRawDataSet(
        path, nav_shape=data.shape[:2], sig_shape=data.shape[2:], dtype=data.dtype, log_path=log
    )
    ds.get_partitions()
    return ds


@pytest.mark.parametrize("roi_kind", ["none", "random"])
@pytest.mark.parametrize(
    "sig_shape", [pytest.param((3, 4), id="whole-frames"), pytest.param((64, 128), id="sliced")]
)
def test_three_udfs_read_each_tile_once(tmp_path, roi_kind, sig_shape):
    """Three UDFs in one run share every tile: each (frame, signal slice) is read once, and
    the run reads exactly what a run of one of them reads."""
    nav = (3, 5)
    data = random_data((*nav, *sig_shape), "float32", seed=3)
    roi = make_roi(roi_kind, nav)
    selected = np.flatnonzero(roi) if roi is not None else np.arange(np.prod(nav))
    config = {"scheduler": "sync", "ltdask.tile-bytes": "16KiB"}
    with partitions(max(400, 4 * 4 * int(np.prod(sig_shape)))), dask.config.set(config):
        single_log = tmp_path / "single.log"
        ds = _counting_dataset(tmp_path, data, single_log)
        assert len(ds.get_partitions()) > 1
        ex.TileSumUDF().compute(ds, roi=roi)
        single = read_log(single_log)

        log = tmp_path / "three.log"
        ds = _counting_dataset(tmp_path, data, log)
        # tile UDFs only: a frame UDF would ask for whole frames
        udfs = [ex.TileSumUDF(), ex.TaskDataUDF(factor=1.0), ex.CoordUDF()]
        results = ltdask.compute(ds, udfs, roi=roi)
        rows = read_log(log)

        lazy_log = tmp_path / "lazy.log"
        ds = _counting_dataset(tmp_path, data, lazy_log)
        dask.compute(*ltdask.lazy(ds, udfs, roi=roi))
        lazy_rows = read_log(lazy_log)

    n_slices = int(rows[:, 0].max()) + 1
    assert n_slices == (1 if sig_shape == (3, 4) else 2)
    # every selected frame, in every signal slice, exactly once
    reads = np.zeros((n_slices, np.prod(nav)), dtype=int)
    for s, first, n, last in rows:
        span = selected[(selected >= first) & (selected <= last)]
        assert span.size == n
        reads[s, span] += 1
    expected = np.zeros_like(reads)
    expected[:, selected] = 1
    np.testing.assert_array_equal(reads, expected)
    assert sorted(map(tuple, rows)) == sorted(map(tuple, single))
    assert sorted(map(tuple, lazy_rows)) == sorted(map(tuple, single))
    # and the results are right
    sums = data.astype(np.float64).sum(axis=(2, 3))
    mask = np.ones(nav, bool) if roi is None else roi
    np.testing.assert_array_equal(results[0]["nav_sum"].values[mask], sums[mask])
    np.testing.assert_array_equal(results[1]["dots"].values[mask][:, 0], sums[mask])
    coords = np.stack(np.indices(nav), axis=-1)
    np.testing.assert_array_equal(results[2]["coords"].values[mask], coords[mask])


# -- partial results ----------------------------------------------------------------------------


def test_iter_partial_results(ds):
    roi = make_roi("random", NAV)
    mask = np.ones(NAV, bool) if roi is None else roi
    steps = list(ex.TileSumUDF().iter(ds, roi=roi))
    assert steps
    done = [s.coords["nav_sum_valid"].values for s in steps]
    for before, after in zip(done, done[1:], strict=False):
        assert (after >= before).all()  # the valid region only grows
    for valid in done:
        assert not (valid & ~mask).any()
    _assert_equal_datasets(steps[-1], ex.TileSumUDF().compute(ds, roi=roi))
    # one partition with ROI frames a step (those without any go with the next: every step
    # adds positions), and the dataset's own partitions (no finer cut for updates)
    with dask.config.set({"ltdask.min-partitions": 1, "ltdask.iter-updates": 1}):
        steps = list(ltdask.iter(ds, [ex.TileSumUDF(), ex.MergeOnlyUDF()], roi=roi))
    flat = mask.reshape(-1)
    holding = [p for p in ds.get_partitions() if flat[p.start : p.stop].any()]
    assert len(steps) == max(1, len(holding))
    final = ltdask.compute(ds, [ex.TileSumUDF(), ex.MergeOnlyUDF()], roi=roi)
    for a, b in zip(steps[-1], final, strict=True):
        _assert_equal_datasets(a, b)


@pytest.mark.parametrize(
    "others",
    [
        pytest.param([], id="alone"),
        pytest.param([ex.TileSumUDF()], id="tree-merge"),
        pytest.param([ex.MergeAllUDF()], id="merge-all"),
        pytest.param([ex.CoordUDF()], id="nav-only"),
        pytest.param(
            [ex.TileSumUDF(), ex.MergeAllUDF(), ex.CoordUDF(), ex.AverageUDF()], id="all-kinds"
        ),
    ],
)
@pytest.mark.parametrize("roi_kind", ["none", "random"])
def test_partition_tasks_run_once(ds, others, roi_kind, tmp_path):
    """However the UDFs of a run are merged, each partition task runs once (and, as in
    LiberTEM, a partition without ROI frames runs none of the UDFs' methods)."""
    log = tmp_path / "partitions.log"
    roi = make_roi(roi_kind, NAV)
    with dask.config.set(scheduler="sync"):
        ltdask.compute(ds, [ex.PartitionLogUDF(log=str(log)), *others], roi=roi)
    lines = log.read_text().splitlines()
    flat = np.ones(math.prod(NAV), bool) if roi is None else roi.reshape(-1)
    with_frames = [p for p in ds.get_partitions() if flat[p.start : p.stop].any()]
    assert len(lines) == len(with_frames)
    assert len(set(lines)) == len(lines)


def test_shipped_udfs_share_one_task_per_partition(tmp_path):
    """Every shipped UDF's results hang off the same partition tasks: a run of all of them
    has one task per partition and one shared job node (no UDF's ``get_results`` makes
    dask rename and so repeat them)."""
    from ltdask.udf import ApplyMasksUDF, CoMUDF, PickUDF, StdDevUDF, SumSigUDF, SumUDF

    data = random_data((6, 7, 8, 9), "float32", seed=2)
    data.tofile(tmp_path / "scan.raw")
    ds = ltdask.open_raw(tmp_path / "scan.raw", nav_shape=(6, 7), sig_shape=(8, 9), dtype="f4")
    roi = np.zeros((6, 7), bool)
    roi[:, 3] = True
    udfs = [
        SumUDF(),
        SumSigUDF(),
        StdDevUDF(),
        CoMUDF.with_params(r=3),
        ApplyMasksUDF(lambda: np.ones((2, 8, 9), np.float32)),
        PickUDF(),
    ]
    with partitions(60):
        results = ltdask.lazy(ds, udfs, roi=roi)
        n = len(ds.get_partitions())
    assert n > 1
    graph = dict(dask.base.collections_to_expr(results).__dask_graph__())
    keys = [k if isinstance(k, str) else k[0] for k in graph]
    partition_tasks = [k for k in graph if isinstance(k, tuple) and k[0].startswith("ltdask-udf-")]
    # one layer of partition tasks, one task for each partition with ROI frames (the
    # others are needed by no result)
    assert len({k[0] for k in partition_tasks}) == 1
    assert len(partition_tasks) == 6
    assert sum(k.startswith("ltdask-job-") for k in keys) == 1


def test_partition_results_report_their_size_to_dask():
    """distributed's memory accounting (``dask.sizeof``) sees the partial buffers that a
    partition task returns, not the 8 bytes of an object array; the blocks pickle as
    themselves."""
    import pickle

    from dask.sizeof import sizeof

    from ltdask.udf import StdDevUDF, SumUDF
    from ltdask.udf.graph import PartitionCell, Run
    from ltdask.udf.tasks import leading_block

    data = random_data((4, 5, 16, 16), "float32")
    run = Run(ltdask.from_array(data), [SumUDF(), StdDevUDF()])
    (cell,) = dask.compute(leading_block(run.partition_results, 0), scheduler="sync")
    assert isinstance(cell, PartitionCell)
    buffers = sum(a.nbytes for partials in cell[0] for a in partials.values())
    assert buffers >= 16 * 16 * (4 + 8 + 8)  # a float32 sum; float64 sum and varsum
    assert buffers <= sizeof(cell) < buffers + 1000
    again = pickle.loads(pickle.dumps(cell))
    assert isinstance(again, PartitionCell) and again[0][0].keys() == cell[0][0].keys()


@pytest.mark.parametrize(
    "udf", [SumUDF(dtype="float64"), StdDevUDF()], ids=lambda u: type(u).__name__
)
def test_graphs_carry_no_dataset_sized_buffers(tmp_path, udf):
    """A cluster gets the graph through its scheduler: no task may carry a result-sized
    array (the merge's initial buffers once did: 32 MiB for 2048 x 2048 float64 frames)."""
    import pickle

    path = tmp_path / "scan.npy"
    np.save(path, np.zeros((2, 3, 512, 512), np.uint16))
    (res,) = ltdask.lazy(ltdask.open(path), [udf])
    sig_bytes = 512 * 512 * 8
    for var in res.data_vars.values():
        for key, task in dict(var.data.__dask_graph__()).items():
            assert len(pickle.dumps(task, protocol=5)) < sig_bytes / 10, key
