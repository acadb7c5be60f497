"""The UDF engine on every dask scheduler: synchronous, threads, a process pool and a
two-process ``distributed.LocalCluster``. The UDFs live in :mod:`udf_examples` and the hooked
datasets in :mod:`udf_helpers`, so worker processes import them by name (the tests directory
is put on their ``PYTHONPATH``)."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

import dask
import numpy as np
import pytest
from helpers import udf_examples as ex
from helpers.udf_helpers import (
    SlicedArrayDataSet,
    check_variable,
    fill_nav,
    make_roi,
    open_dataset,
    partitions,
    roi_mask,
    selected,
)

import ltdask

#: where udf_examples and udf_helpers are, for worker processes to import them
TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# the scan of the `data` fixture (conftest.py); `datasets` has 9 partitions
NAV, SIG, SEED, FRAMES_PER_PARTITION = (5, 7), (3, 4), 41, 4


def _with_tests_on_path():
    """Environment for worker processes: this directory importable, one thread each."""
    env = {
        "PYTHONPATH": os.pathsep.join(p for p in (TESTS_DIR, os.environ.get("PYTHONPATH")) if p),
        "OMP_NUM_THREADS": "1",
    }
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    return old


def _restore(old):
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


# the conftest's `scheduler` fixture picks these overrides up: the same pools, with this
# directory importable in the worker processes


@pytest.fixture(scope="module")
def process_pool():
    old = _with_tests_on_path()
    try:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
            yield pool
    finally:
        _restore(old)


@pytest.fixture(scope="module")
def distributed_client():
    distributed = pytest.importorskip("distributed")
    old = _with_tests_on_path()
    try:
        with (
            distributed.LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
            ) as cluster,
            distributed.Client(cluster, set_as_default=False) as client,
        ):
            yield client
    finally:
        _restore(old)
    assert client.status == "closed"


@pytest.fixture(scope="module")
def datasets(data, tmp_path_factory):
    with partitions(4 * 12 * FRAMES_PER_PARTITION):
        tmp = tmp_path_factory.mktemp("schedulers")
        return {kind: open_dataset(kind, data, tmp) for kind in ("memory", "raw")}


def _reference(name, data, roi):
    """``{variable: (expected, valid)}`` of the doc example `name` (numpy)."""
    mask = roi_mask(roi, NAV)
    sel = selected(data, roi, 2).astype(np.float64)
    sums = data.astype(np.float64).sum(axis=(2, 3))
    count = len(sel)
    coords = np.stack(np.indices(NAV), axis=-1)
    if name == "average":
        total = sel.sum(axis=0)
        with np.errstate(invalid="ignore"):
            return {
                "sum": (total, True),
                "num_frames": ([count], True),
                "average": (total / count, True),
            }
    if name == "pixelsum":
        return {"pixelsum_nav_raw": (sums[mask], True)}
    if name == "coords":
        return {"coords": (fill_nav(coords, mask, np.int64), mask[..., None])}
    if name == "custom-valid":
        return {"custom_2d": ((sums if roi is None else sums[mask]), True)}
    if name == "tile-sig":
        return {"sig_sum": (sel.sum(axis=0), True), "nav_sum": (fill_nav(sums, mask, float), mask)}
    if name == "merge-all":
        per_frame = data.max(axis=(2, 3)).astype(np.float64)
        return {
            "intensity": (sel.sum(axis=0), True),
            "per_frame": (fill_nav(per_frame, mask, float), mask),
        }
    if name == "merge-only":
        order = (np.cumsum(mask.reshape(-1)) - 1).reshape(NAV)
        maximum = sel.max(axis=0) if count else np.full(SIG, -np.inf)
        return {
            "maximum": (maximum, True),
            "count": ([count], True),
            "nav": (fill_nav(sums, mask, float), mask),
            "order": (fill_nav(order, mask, np.int64), mask),
        }
    raise KeyError(name)


CHECKED = ["average", "pixelsum", "coords", "custom-valid", "tile-sig", "merge-all", "merge-only"]


def _check(res, name, data, roi):
    expected = _reference(name, data, roi)
    assert set(res.data_vars) == set(expected)
    for var, (values, valid) in expected.items():
        check_variable(res, var, values, valid, res[var].dims)


SLOW = ("processes", "distributed")


def _cases(all_cases, short_cases):
    """(scheduler, *case) params: every case on the fast schedulers, a short subset on the
    slow ones (generated, not skipped)."""
    out = [
        pytest.param(s, *c, id=f"{s}-{'-'.join(c)}") for s in ("sync", "threads") for c in all_cases
    ]
    out += [
        pytest.param(s, *c, id=f"{s}-{'-'.join(c)}", marks=pytest.mark.slow)
        for s in SLOW
        for c in short_cases
    ]
    return out


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize(
    ("scheduler", "kind", "roi_kind"),
    _cases(
        [
            ("memory", "none"),
            ("raw", "random"),
            ("memory", "random"),
            ("raw", "none"),
            ("raw", "all-false"),
        ],
        [("memory", "none"), ("raw", "random")],
    ),
    indirect=["scheduler"],
)
def test_doc_examples_on_scheduler(scheduler, datasets, data, kind, roi_kind):
    roi = make_roi(roi_kind, NAV)
    udfs = [ex.DOC_UDFS[name]() for name in CHECKED]
    together = ltdask.compute(datasets[kind], udfs, roi=roi)
    for name, res in zip(CHECKED, together, strict=True):
        _check(res, name, data, roi)
    if scheduler not in SLOW:
        # one at a time, and lazily
        for name, udf in zip(CHECKED, udfs, strict=True):
            _check(udf.lazy(datasets[kind], roi=roi).compute(), name, data, roi)


@pytest.mark.parametrize(
    ("scheduler", "roi_kind"),
    _cases([("none",), ("random",)], [("random",)]),
    indirect=["scheduler"],
)
def test_aux_task_data_partition_on_scheduler(scheduler, datasets, data, roi_kind):
    roi = make_roi(roi_kind, NAV)
    mask = roi_mask(roi, NAV)
    aux = np.arange(np.prod(NAV) * 2, dtype=np.float64).reshape((*NAV, 2))
    sig_mask = (np.arange(np.prod(SIG)) % 2).reshape(SIG).astype(np.float32)
    udfs = [
        ex.AuxTileUDF(
            aux=ltdask.UDF.aux_data(aux, kind="nav", extra_shape=(2,), dtype=np.float64),
            mask=ltdask.UDF.aux_data(sig_mask, kind="sig", dtype=np.float32),
        ),
        ex.TaskDataUDF(factor=2.0),
        ex.PartitionUDF(),
    ]
    aux_res, task_res, part_res = ltdask.compute(datasets["raw"], udfs, roi=roi)
    sums = data.astype(np.float64).sum(axis=(2, 3))
    check_variable(
        aux_res,
        "weighted",
        fill_nav(sums[..., None] * aux, mask, float),
        mask[..., None],
        ("scan_y", "scan_x", "weighted_0"),
    )
    masked = (data * sig_mask).astype(np.float64).sum(axis=(2, 3))
    check_variable(aux_res, "masked", fill_nav(masked, mask, float), mask, ("scan_y", "scan_x"))
    flat = data.reshape((*NAV, -1)).astype(np.float64)
    dots = np.stack([flat.sum(-1), (flat * np.arange(flat.shape[-1])).sum(-1)], axis=-1) * 2
    check_variable(
        task_res,
        "dots",
        fill_nav(dots, mask, float),
        mask[..., None],
        ("scan_y", "scan_x", "dots_0"),
    )
    sel = selected(data, roi, 2)
    check_variable(part_res, "frames", [len(sel)], True, ("frames_0",))
    check_variable(part_res, "sig_max", sel.max(axis=0).astype(float), True, ("det_y", "det_x"))


def test_sliced_tiles_and_sync_offset_on_scheduler(scheduler, data, tmp_path):
    """Hooked in-memory dataset class and a raw file with a negative sync_offset."""
    roi = make_roi("random", NAV)
    with partitions(4 * 12 * 4), dask.config.set({"ltdask.tile-bytes": 28}):
        sliced = SlicedArrayDataSet(data)
        res = ex.TileRecorderUDF().compute(sliced, roi=roi)
    assert res["slices"].values[0] > 1
    check_variable(
        res, "sig_sum", selected(data, roi, 2).astype(float).sum(axis=0), True, ("det_y", "det_x")
    )
    path = tmp_path / "scan.raw"
    data.tofile(path)
    with partitions(4 * 12 * 4):
        ds = ltdask.open_raw(path, nav_shape=NAV, sig_shape=SIG, dtype="float32", sync_offset=-3)
        res = ex.CoordAnyUDF(method="frame").compute(ds, roi=roi)
    flat = data.reshape((-1, *SIG))
    shifted = np.zeros_like(flat)
    shifted[3:] = flat[:-3]
    present = np.arange(flat.shape[0]).reshape(NAV) >= 3
    sums = shifted.astype(np.float64).sum(axis=(1, 2)).reshape(NAV)
    check_variable(res, "sums", fill_nav(sums, roi, float), roi & present, ("scan_y", "scan_x"))


def test_errors_raised_in_tasks_reach_the_caller(scheduler, datasets):
    with pytest.raises(RuntimeError, match="processed a frame"):
        ex.ExplodingUDF().compute(datasets["raw"])


class _ThreadNames(ltdask.udf.UDF):
    """Records the name of the thread that runs each partition (a nav buffer of codes)."""

    NAMES: set = set()

    def get_result_buffers(self):
        return {"n": self.buffer(kind="nav", dtype="int64")}

    def process_frame(self, frame):
        import threading

        _ThreadNames.NAMES.add(threading.current_thread().name)
        self.results.n[:] = 1


@pytest.mark.parametrize("active, asked", [("threads", "sync"), ("sync", "threads")])
def test_compute_runs_on_the_scheduler_given(datasets, active, asked):
    """``ltdask.compute(..., scheduler=...)`` plans for and runs on that scheduler, whatever
    is active (as ``dask.compute(scheduler=...)``), and changes no setting."""
    import threading

    ds = datasets["raw"]
    _ThreadNames.NAMES = set()
    with dask.config.set(scheduler=active):
        (res,) = ltdask.compute(ds, [_ThreadNames()], scheduler=asked)
        assert dask.config.get("scheduler") == active
    assert int(res["n"].sum()) == ds.num_frames
    main = {threading.current_thread().name}
    if asked == "sync":
        assert _ThreadNames.NAMES == main
    else:
        assert _ThreadNames.NAMES and _ThreadNames.NAMES.isdisjoint(main)
