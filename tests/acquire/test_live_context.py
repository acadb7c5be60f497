"""LiberTEM-live's ``LiveContext`` calls on ltdask's acquisitions (``ltdask.compat.live``),
with the memory "detector"; the detectors' own are in their test modules."""

from __future__ import annotations

import numpy as np
import pytest

from ltdask.compat import LiveContext
from ltdask.udf import SumSigUDF, SumUDF


@pytest.fixture
def data():
    return np.random.default_rng(7).integers(0, 500, (4, 5, 6, 7)).astype(np.uint16)


def test_run_udf_and_run_udf_iter(data):
    ctx = LiveContext.make_with("inline")
    with ctx.make_connection("memory").open(data=data) as conn:
        aq = ctx.make_acquisition(conn=conn, frames_per_partition=3)
        total = ctx.run_udf(dataset=aq, udf=SumUDF())
        np.testing.assert_array_equal(total["intensity"].data, data.sum(axis=(0, 1)))
        aq = ctx.make_acquisition(conn=conn, nav_shape=(20,), frames_per_partition=3)
        parts = list(ctx.run_udf_iter(dataset=aq, udf=SumSigUDF()))
    # (the memory detector sends at once: the first step may hold every partition)
    assert len(parts) >= 1
    last = parts[-1].buffers[0]["intensity"]
    np.testing.assert_array_equal(last.data, data.sum(axis=(2, 3)).reshape(-1))
    assert parts[-1].damage.data.all()


def test_what_ltdask_does_not_take(data):
    ctx = LiveContext.make_with("inline")
    with pytest.raises(
        NotImplementedError,
        match="make_connection\\('asi_tpx3'\\): ltdask receives merlin, dectris, memory",
    ):
        ctx.make_connection("asi_tpx3")
    with pytest.raises(ValueError, match="open\\(data=...\\): give the array"):
        ctx.make_connection("memory").open()
    conn = ctx.make_connection("memory").open(data=data)
    with pytest.raises(NotImplementedError, match="no acquisition hooks"):
        ctx.make_acquisition(conn=conn, hooks=object())
