"""LiberTEM 0.16's UDF semantics around a UDF (issue 19), one section per cause: what a
LiberTEM script relies on beyond the arithmetic. Written from LiberTEM's documented
behaviour; `tests/reference` compares the numbers with LiberTEM's own output."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import ltdask
from ltdask import UDF
from ltdask.compat import Context
from ltdask.udf import CoMUDF, SumSigUDF, SumUDF


@pytest.fixture
def data():
    return np.random.default_rng(0).random((4, 6, 5, 3)).astype(np.float32)


@pytest.fixture
def ds(data):
    return ltdask.from_array(data)


# -- 7. the UDF instance ---------------------------------------------------------------------
@pytest.mark.parametrize("how", ["compute", "lazy", "context"])
def test_the_instance_given_knows_the_run(ds, how):
    udf = SumSigUDF()
    assert udf.meta is None
    roi = np.zeros(ds.nav_shape, bool)
    roi[1, 2] = True
    if how == "compute":
        ltdask.compute(ds, [udf], roi=roi)
    elif how == "lazy":
        ltdask.lazy(ds, [udf], roi=roi)
    else:
        Context.make_with("inline").run_udf(dataset=ds, udf=udf, roi=roi)
    assert udf.meta.dataset_shape == ds.shape
    assert udf.meta.input_dtype == np.float32
    np.testing.assert_array_equal(udf.meta.roi, roi)
    # what a run binds stays out of the pickled instance (tasks stay small)
    assert pickle.loads(pickle.dumps(udf)).meta is None
    assert len(pickle.dumps(udf)) < 400


# -- 10. validation when the UDF is made -------------------------------------------------------
def test_com_parameters_checked_when_made():
    with pytest.raises(ValueError, match="outer radius r=2 is smaller than inner ri=3"):
        CoMUDF.with_params(r=2, ri=3)


# -- 11. a UDF without result buffers runs ---------------------------------------------------
class Raises(UDF):
    def __init__(self, private=False):
        super().__init__(private=private)

    def get_result_buffers(self):
        if self.params.private:
            return {"scratch": self.buffer(kind="nav", use="private")}
        return {}

    def process_frame(self, frame):
        raise RuntimeError("process_frame ran")


@pytest.mark.parametrize("private", [False, True], ids=["no-buffers", "private-only"])
def test_udf_without_results_runs(ds, private):
    with pytest.raises(RuntimeError, match="process_frame ran"):
        Raises(private=private).compute(ds)
    with pytest.raises(RuntimeError, match="process_frame ran"):
        Context.make_with("inline").run_udf(dataset=ds, udf=Raises(private=private))
    with pytest.raises(RuntimeError, match="process_frame ran"):
        ltdask.compute(ds, [SumUDF(), Raises(private=private)])
