"""LiberTEM's executor objects in `ltdask.compat.Context`: each runs the work on the dask
scheduler it names; anything else is refused with an error that says what to pass."""

from __future__ import annotations

import concurrent.futures
import subprocess
import sys
import threading

import dask
import numpy as np
import pytest

import ltdask
from ltdask import UDF
from ltdask.compat import (
    ConcurrentJobExecutor,
    Context,
    DaskJobExecutor,
    DelayedJobExecutor,
    InlineJobExecutor,
    PipelinedExecutor,
    UnsupportedError,
)
from ltdask.udf import SumUDF


class WhereAmI(UDF):
    """Records, per frame: in the main thread?, dask's num_workers, in a distributed worker?"""

    def get_result_buffers(self):
        # seen in a buffer too: on a cluster the parameters are copies
        return {"n": self.buffer(kind="nav"), "worker": self.buffer(kind="nav", dtype=bool)}

    def process_frame(self, frame):
        self.results.n[:] = frame.sum()
        try:
            from distributed import get_worker

            get_worker()
            on_worker = True
        except (ImportError, ValueError):
            on_worker = False
        self.results.worker[:] = on_worker
        self.params.seen.add(
            (
                threading.current_thread() is threading.main_thread(),
                dask.config.get("num_workers", None),
                on_worker,
            )
        )


@pytest.fixture
def data():
    return np.random.default_rng(0).random((3, 4, 5, 6)).astype(np.float32)


def where(executor, data) -> set:
    seen: set = set()
    ctx = Context(executor=executor)
    assert ctx.executor is executor
    res = ctx.run_udf(dataset=ltdask.from_array(data), udf=WhereAmI(seen=seen))
    np.testing.assert_allclose(res["n"].data, data.sum(axis=(2, 3)), rtol=1e-5)
    return seen


def test_inline_runs_in_this_thread(data):
    with dask.config.set(scheduler="threads"):  # the executor wins over the active one
        assert where(InlineJobExecutor(), data) == {(True, None, False)}


def test_concurrent_runs_on_threads(data):
    assert where(ConcurrentJobExecutor.make_local(n_threads=2), data) == {(False, 2, False)}
    with concurrent.futures.ThreadPoolExecutor(3, thread_name_prefix="mine") as pool:
        seen = where(ConcurrentJobExecutor(client=pool), data)
    assert {main for main, _, _ in seen} == {False}


@pytest.mark.parametrize("executor", [DelayedJobExecutor(), PipelinedExecutor()])
def test_delayed_and_pipelined_run_on_the_active_scheduler(data, executor):
    with dask.config.set(scheduler="synchronous"):
        assert where(executor, data) == {(True, None, False)}


@pytest.mark.slow  # a LocalCluster
def test_dask_executor_make_local_and_connect(data, monkeypatch):
    # the worker runs in this process: no gc.freeze() here (ltdask.runtime.worker_gc)
    monkeypatch.setitem(dask.config.config["ltdask"], "worker-gc-freeze", False)
    executor = DaskJobExecutor.make_local(
        cluster_kwargs=dict(n_workers=1, threads_per_worker=1, processes=False)
    )
    with Context(executor=executor) as ctx:
        ds = ltdask.from_array(data)
        res = ctx.run_udf(dataset=ds, udf=WhereAmI(seen=set()))
        assert res["worker"].data.all()
        np.testing.assert_allclose(res["n"].data, data.sum(axis=(2, 3)), rtol=1e-5)
        address = executor.client.scheduler.address
        with DaskJobExecutor.connect(address) as other:
            res = Context(executor=other).run_udf(dataset=ds, udf=WhereAmI(seen=set()))
            assert res["worker"].data.all()
        # runs without an executor of their own stay off the cluster (no default client)
        res = Context.make_with("inline").run_udf(dataset=ds, udf=WhereAmI(seen=set()))
        assert not res["worker"].data.any()
        assert other.client.status == "closed"
    # closing the context closed what make_local started
    assert executor.client.status == "closed"


def test_make_with_gives_executor_objects():
    assert isinstance(Context.make_with("inline").executor, InlineJobExecutor)
    assert isinstance(Context.make_with("threads", cpus=2).executor, ConcurrentJobExecutor)
    assert isinstance(Context.make_with("dask").executor, DaskJobExecutor)
    assert isinstance(Context.make_with("delayed").executor, DelayedJobExecutor)
    assert isinstance(Context().executor, DaskJobExecutor)
    ctx = Context()
    ctx.executor = InlineJobExecutor()
    assert isinstance(ctx.executor, InlineJobExecutor)


def test_debug_checks_that_the_run_pickles(data):
    class Unpicklable(SumUDF):
        def __reduce__(self):
            raise TypeError("no pickling here")

    ctx = Context(executor=InlineJobExecutor(debug=True))
    ds = ltdask.from_array(data)
    with pytest.raises(ltdask.LtdaskError, match=r"debug=True.*does not survive pickling"):
        ctx.run_udf(dataset=ds, udf=Unpicklable())
    # without debug the same UDF runs (nothing is pickled in this thread)
    res = Context(executor=InlineJobExecutor()).run_udf(dataset=ds, udf=Unpicklable())
    np.testing.assert_allclose(res["intensity"].data, data.sum(axis=(0, 1)), rtol=1e-5)


class ForeignExecutor:
    """An executor of another library (its own class, not ltdask's)."""


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        pytest.param(
            lambda: Context(executor=ForeignExecutor()),
            UnsupportedError,
            r"executor=<.*ForeignExecutor.*> \(a .*ForeignExecutor\) is not supported by "
            r"ltdask: .*pass one of ltdask.compat's executors \(InlineJobExecutor\(\)",
            id="foreign-executor",
        ),
        pytest.param(
            lambda: Context(executor=concurrent.futures.ThreadPoolExecutor(1)),
            UnsupportedError,
            r"ThreadPoolExecutor\) is not supported .*ConcurrentJobExecutor",
            id="bare-pool",
        ),
        pytest.param(
            lambda: ConcurrentJobExecutor(client=object()),
            TypeError,
            r"expected a concurrent.futures.Executor",
            id="concurrent-not-a-pool",
        ),
        pytest.param(
            lambda: DaskJobExecutor(client="tcp://1.2.3.4:8786"),
            TypeError,
            r"expected a distributed.Client or None",
            id="dask-address-as-client",
        ),
        pytest.param(
            lambda: DaskJobExecutor.make_local(spec={"w": {}}),
            UnsupportedError,
            r"spec=.*pass LocalCluster keywords",
            id="make-local-spec",
        ),
        pytest.param(
            lambda: PipelinedExecutor(pin_workers=True),
            UnsupportedError,
            r"pin_workers=True is not supported .*DaskJobExecutor.make_local",
            id="pipelined-workers",
        ),
        pytest.param(
            lambda: InlineJobExecutor(inline_threads=0),
            ValueError,
            r"inline_threads=0; expected None or a count of at least 1",
            id="inline-threads-0",
        ),
    ],
)
def test_bad_executors(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_import_ltdask_compat_does_not_import_distributed():
    code = (
        "import sys, ltdask.compat; "
        "e = ltdask.compat.DaskJobExecutor(); "
        "assert 'distributed' not in sys.modules, 'imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    "executor",
    [InlineJobExecutor(), ConcurrentJobExecutor.make_local(2), DelayedJobExecutor()],
    ids=["inline", "concurrent", "delayed"],
)
def test_run_function(executor):
    def where(a, b=0):
        return a + b, threading.current_thread() is threading.main_thread()

    total, main = executor.run_function(where, 2, b=3)
    assert total == 5
    assert main == isinstance(executor, InlineJobExecutor)


def test_inline_threads_limits_thread_pools(monkeypatch, data):
    """inline_threads goes to threadpoolctl (faked here: it need not be installed)."""
    import contextlib
    import types

    seen = []

    @contextlib.contextmanager
    def threadpool_limits(limits):
        seen.append(("enter", limits))
        yield
        seen.append(("exit", limits))

    fake = types.ModuleType("threadpoolctl")
    fake.threadpool_limits = threadpool_limits  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "threadpoolctl", fake)
    where(InlineJobExecutor(inline_threads=2), data)
    assert seen == [("enter", 2), ("exit", 2)]
    seen.clear()
    where(InlineJobExecutor(), data)
    assert seen == []
