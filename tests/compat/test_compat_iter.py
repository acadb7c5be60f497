"""``Context.run_udf_iter`` and ``run_udf(..., plots=...)`` as LiberTEM's: the partitions of
``run_udf``, steps of whole partitions (one by one on the inline executor, one step on the
delayed one), no step without ROI frames, and cancellation by `JobCancelledError`."""

from __future__ import annotations

import numpy as np
import pytest

from ltdask.compat import (
    Context,
    DelayedJobExecutor,
    InlineJobExecutor,
    JobCancelledError,
    UDFRunCancelled,
)
from ltdask.udf import UDF, SumSigUDF, SumUDF
from ltdask.views.viz import Dummy2DPlot


@pytest.fixture
def data():
    return np.random.default_rng(11).random((16, 16, 8, 8)).astype(np.float32)


def _steps(ctx, ds, udfs, roi=None):
    return [
        (step.damage.data.copy(), [dict(b) for b in step.buffers])
        for step in ctx.run_udf_iter(dataset=ds, udf=udfs, roi=roi)
    ]


def test_inline_steps_are_the_partitions_of_run_udf(data):
    ctx = Context(executor=InlineJobExecutor())
    ds = ctx.load("memory", data=data, num_partitions=4)
    steps = _steps(ctx, ds, [SumUDF(), SumSigUDF()])
    # one step per partition of four scan rows (64 frames)
    assert [int(damage.sum()) for damage, _ in steps] == [64, 128, 192, 256]
    for damage, (total, per_frame) in steps:
        rows = int(damage.sum()) // 16
        assert damage[:rows].all() and not damage[rows:].any()  # (nav-shaped)
        np.testing.assert_allclose(total["intensity"].data, data[damage].sum(axis=0), rtol=1e-5)
        frames = data.sum(axis=(2, 3))
        np.testing.assert_allclose(per_frame["intensity"].data[damage], frames[damage], rtol=1e-5)
        # as LiberTEM's: bit for bit what run_udf gives on the done positions
        ref = ctx.run_udf(dataset=ds, udf=SumUDF(), roi=damage)
        np.testing.assert_array_equal(total["intensity"].data, ref["intensity"].data)


@pytest.mark.parametrize("spec", ["inline", "threads"])
def test_plots_give_the_results_of_run_udf_bit_for_bit(data, spec):
    ctx = Context.make_with(spec, plot_class=Dummy2DPlot)
    ds = ctx.load("memory", data=data)
    plotted = ctx.run_udf(dataset=ds, udf=[SumUDF(), SumSigUDF()], plots=True)
    plain = ctx.run_udf(dataset=ds, udf=[SumUDF(), SumSigUDF()])
    for p, q in zip(plotted, plain, strict=True):
        np.testing.assert_array_equal(p["intensity"].data, q["intensity"].data)
    np.testing.assert_allclose(plain[0]["intensity"].data, data.sum(axis=(0, 1)), rtol=1e-5)


def test_delayed_executor_runs_in_one_step(data):
    ctx = Context(executor=DelayedJobExecutor())
    ds = ctx.load("memory", data=data, num_partitions=4)
    steps = _steps(ctx, ds, [SumUDF()])
    assert len(steps) == 1
    damage, (total,) = steps[0]
    assert damage.all()
    np.testing.assert_allclose(total["intensity"].data, data.sum(axis=(0, 1)), rtol=1e-5)


class _ValidCountUDF(UDF):
    """Records how many valid positions ``get_results`` sees."""

    def get_result_buffers(self):
        return {"frame_sum": self.buffer(kind="nav", dtype=np.float32)}

    def process_frame(self, frame):
        self.results.frame_sum[:] = frame.sum()

    def get_results(self):
        valid = self.meta.get_valid_nav_mask()
        if not valid.any():
            raise AssertionError("get_results with no valid position")
        return {"frame_sum": self.results.frame_sum}


def test_partitions_without_roi_frames_make_no_step(data):
    ctx = Context(executor=InlineJobExecutor())
    ds = ctx.load("memory", data=data, num_partitions=4)
    roi = np.zeros((16, 16), dtype=bool)
    roi[4:12, 4:12] = True  # in the second and third partitions only
    steps = _steps(ctx, ds, [_ValidCountUDF()], roi=roi)
    assert [int((damage & roi).sum()) for damage, _ in steps] == [32, 64]
    (last,) = steps[-1][1]
    expected = np.where(roi, data.sum(axis=(2, 3)), np.nan)
    np.testing.assert_allclose(last["frame_sum"].data, expected, rtol=1e-5)


class _StopAtRowUDF(UDF):
    def get_result_buffers(self):
        return {"x": self.buffer(kind="nav", dtype=np.float32)}

    def process_frame(self, frame):
        if self.meta.coordinates[0, 0] >= self.params.row:
            raise JobCancelledError()
        self.results.x[:] = 1


@pytest.mark.parametrize(("row", "done"), [(0, 0), (8, 1)])
def test_job_cancelled_error_ends_the_run_with_udf_run_cancelled(data, row, done):
    ctx = Context(executor=InlineJobExecutor())
    ds = ctx.load("memory", data=data, num_partitions=2)
    seen = 0
    with pytest.raises(UDFRunCancelled, match=rf"^UDF run cancelled after {done} partitions$"):
        for _ in ctx.run_udf_iter(dataset=ds, udf=_StopAtRowUDF(row=row)):
            seen += 1
    assert seen == done
