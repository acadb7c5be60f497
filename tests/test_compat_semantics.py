"""LiberTEM 0.16 semantics that its own test suite relies on (issue 30), one section per
gap: names, dtypes, messages and exception types a LiberTEM script or test sees. The
expected values come from numpy on the same data or from LiberTEM's documented
behaviour."""

from __future__ import annotations

import numpy as np
import pytest

from ltdask import UDF
from ltdask.compat import Context
from ltdask.udf import StdDevUDF, consolidate_result, run_stddev


@pytest.fixture
def data():
    return np.random.default_rng(0).random((4, 6, 5, 3)).astype(np.float32)


@pytest.fixture
def ctx():
    return Context.make_with("inline")


# -- 1. run_stddev and consolidate_result ------------------------------------------------------
@pytest.mark.parametrize("with_roi", [False, True], ids=["all", "roi"])
def test_run_stddev_gives_numpy_statistics(ctx, data, with_roi):
    ds = ctx.load("memory", data=data, sig_dims=2)
    roi = np.random.default_rng(1).random(data.shape[:2]) > 0.5 if with_roi else None
    picked = data[roi] if with_roi else data.reshape(-1, *data.shape[2:])
    res = run_stddev(ctx, ds, roi=roi)
    assert sorted(res) == ["mean", "num_frames", "std", "sum", "var", "varsum"]
    assert type(res["num_frames"]) is int and res["num_frames"] == len(picked)
    wide = picked.astype(np.float64)
    for name, expected in [
        ("sum", wide.sum(axis=0)),
        ("mean", wide.mean(axis=0)),
        ("var", wide.var(axis=0)),
        ("std", wide.std(axis=0)),
        ("varsum", wide.var(axis=0) * len(picked)),
    ]:
        assert type(res[name]) is np.ndarray, name
        np.testing.assert_allclose(res[name], expected, rtol=1e-6, err_msg=name)


def test_consolidate_result_takes_run_udf_results(ctx, data):
    ds = ctx.load("memory", data=data, sig_dims=2)
    res = consolidate_result(ctx.run_udf(dataset=ds, udf=StdDevUDF()))
    assert res["num_frames"] == 24
    np.testing.assert_allclose(res["var"], data.reshape(24, 5, 3).var(axis=0), rtol=1e-5)


# -- 3. AuxData.raw_data ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("extra_shape", "shape"),
    [((), (6,)), ((1,), (6,)), ((2,), (6, 2))],
    ids=["scalar", "extra-1", "extra-2"],
)
def test_aux_data_raw_data_is_a_property(extra_shape, shape):
    values = np.arange(6 * int(np.prod(extra_shape))).reshape((2, 3, *extra_shape))
    aux = UDF.aux_data(values, kind="nav", extra_shape=extra_shape, dtype="int32")
    assert isinstance(aux.raw_data, np.ndarray)  # LiberTEM: BufferWrapper.raw_data property
    np.testing.assert_array_equal(aux.raw_data, values.reshape(shape))
    assert aux.raw_data.dtype == np.int32
