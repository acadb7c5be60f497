"""`ltdask.compat.Context`: LiberTEM's Context API over ltdask; every argument is honoured
or refused by name, never dropped."""

from __future__ import annotations

import asyncio
import threading

import dask
import numpy as np
import pytest

import ltdask
from ltdask import UDF
from ltdask.compat import Context, UnsupportedError
from ltdask.udf import StdDevUDF, SumSigUDF, SumUDF


@pytest.fixture
def data():
    return np.random.default_rng(0).random((5, 7, 6, 4)).astype(np.float32)


@pytest.fixture
def ctx():
    return Context.make_with("inline")


def test_load_and_run_like_libertem(tmp_path, data, ctx):
    path = tmp_path / "scan.npy"
    np.save(path, data)
    for ds in (
        ctx.load("auto", path=str(path)),
        ctx.load("auto", str(path)),
        ctx.load("npy", path=str(path)),
        ctx.load("memory", data=data, sig_dims=2),
    ):
        roi = np.random.default_rng(1).random((5, 7)) > 0.5
        total, frames = ctx.run_udf(dataset=ds, udf=[SumUDF(), SumSigUDF()], roi=roi)
        np.testing.assert_allclose(total["intensity"].data, data[roi].sum(axis=0), rtol=1e-5)
        np.testing.assert_allclose(
            frames["intensity"].raw_data, data[roi].sum(axis=(1, 2)), rtol=1e-5
        )
        np.testing.assert_array_equal(frames["intensity"].valid_mask, roi)
        mapped = ctx.map(dataset=ds, f=lambda frame: frame.max())
        np.testing.assert_allclose(mapped.data, data.max(axis=(2, 3)))


REFUSED = [
    pytest.param(dict(corrections=object()), "corrections=", id="corrections"),
]


@pytest.mark.parametrize("method", ["run_udf", "run_udf_iter"])
def test_backends_that_no_udf_can_use_are_refused(ctx, data, method):
    ds = ctx.load("memory", data=data)
    with pytest.raises(ltdask.UDFError, match=r"StdDevUDF processes .*backends=\('cuda',\)"):
        result = getattr(ctx, method)(dataset=ds, udf=StdDevUDF(), backends=("cuda",))
        list(result)


@pytest.mark.parametrize("method", ["run_udf", "run_udf_iter"])
@pytest.mark.parametrize("kwargs, named", REFUSED)
def test_unsupported_arguments_are_refused_by_name(ctx, data, method, kwargs, named):
    ds = ctx.load("memory", data=data)
    with pytest.raises(UnsupportedError, match=rf"Context.{method}: {named}.* not supported"):
        result = getattr(ctx, method)(dataset=ds, udf=SumUDF(), **kwargs)
        list(result)


@pytest.mark.parametrize(
    "kwargs",
    [dict(backends=("numpy", "cupy")), dict(backends="numpy"), dict(plots=False), dict()],
    ids=["numpy-first", "numpy", "no-plots", "defaults"],
)
def test_arguments_that_ltdask_honours(ctx, data, kwargs):
    ds = ctx.load("memory", data=data)
    res = ctx.run_udf(dataset=ds, udf=SumUDF(), **kwargs)
    np.testing.assert_allclose(res["intensity"].data, data.sum(axis=(0, 1)), rtol=1e-5)


def test_run_udf_sync_false_is_awaitable(ctx, data):
    ds = ctx.load("memory", data=data)
    pending = ctx.run_udf(dataset=ds, udf=SumSigUDF(), sync=False)
    res = asyncio.run(pending)
    np.testing.assert_allclose(res["intensity"].data, data.sum(axis=(2, 3)), rtol=1e-5)


def test_run_udf_iter_async(data):
    ctx = Context.make_with("inline")
    ds = ctx.load("memory", data=data)

    async def collect():
        steps = []
        async for step in ctx.run_udf_iter(dataset=ds, udf=SumSigUDF(), sync=False):
            steps.append(step)
        return steps

    with dask.config.set({"ltdask.partition-bytes": 4 * 7 * 24, "ltdask.min-partitions": 1}):
        steps = asyncio.run(collect())
    assert len(steps) > 1
    assert steps[-1].damage.data.all()
    final = steps[-1].buffers[0]["intensity"].data
    np.testing.assert_allclose(final, data.sum(axis=(2, 3)), rtol=1e-5)


def test_run_udf_iter_async_close_early(data, ctx):
    ds = ctx.load("memory", data=data)

    async def first_only():
        steps = ctx.run_udf_iter(dataset=ds, udf=SumSigUDF(), sync=False)
        step = await steps.__anext__()
        await steps.aclose()
        return step

    with dask.config.set({"ltdask.partition-bytes": 4 * 7 * 24, "ltdask.min-partitions": 1}):
        step = asyncio.run(first_only())
    assert 0 < step.damage.data.sum() < step.damage.data.size


class WhereAmI(UDF):
    """Records the thread and dask's worker count in the task."""

    def get_result_buffers(self):
        return {"n": self.buffer(kind="nav")}

    def process_frame(self, frame):
        self.results.n[:] = 1
        self.params.seen.add(
            (
                threading.current_thread() is threading.main_thread(),
                dask.config.get("num_workers", None),
            )
        )


def test_make_with_picks_the_scheduler(data):
    ds = ltdask.from_array(data)
    seen: set = set()
    Context.make_with("inline").run_udf(dataset=ds, udf=WhereAmI(seen=seen))
    assert seen == {(True, None)}
    seen.clear()
    Context.make_with("threads", cpus=3).run_udf(dataset=ds, udf=WhereAmI(seen=seen))
    assert {workers for _, workers in seen} == {3}
    seen.clear()
    Context.make_with("dask", cpus=range(2)).run_udf(dataset=ds, udf=WhereAmI(seen=seen))
    assert {workers for _, workers in seen} == {2}


def test_make_with_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match=r"unknown executor_spec='cluster'"):
        Context.make_with("cluster")
    with pytest.raises(ValueError, match=r"cpus=0 gives no CPU"):
        Context.make_with("threads", cpus=0)
    with pytest.raises(
        UnsupportedError,
        match=r"Context: executor=<object .*> \(a builtins.object\) is not supported",
    ):
        Context(executor=object())
    assert Context.make_with("dask", gpus=[]).executor.spec == "dask"
