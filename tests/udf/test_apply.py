"""`ltdask.udf.apply_whole`: post-processing on whole result arrays, in one task that
shares the run's partition tasks."""

from __future__ import annotations

import math

import dask
import dask.array as da
import numpy as np
import pytest
from helpers import udf_examples as ex
from helpers.udf_helpers import check_variable, make_roi, roi_mask

import ltdask
from ltdask.udf import SumUDF, apply_whole

# the scan of the `data` and `ds` fixtures (conftest.py): 8 partitions
NAV, SIG, SEED, FRAMES_PER_PARTITION = (4, 6), (3, 4), 5, 3


def _expected(data, mask, offset=0.0):
    sums = data.astype(np.float64).sum(axis=(2, 3))
    mean = sums[mask].mean() if mask.any() else 0.0
    return np.where(mask, sums - mean + offset, np.nan).astype(np.float32), mean


@pytest.mark.parametrize("roi_kind", ["none", "random", "all-false"])
def test_post_processing_on_whole_arrays(ds, data, roi_kind):
    roi = make_roi(roi_kind, NAV)
    mask = roi_mask(roi, NAV)
    res = ex.CentredSumUDF(offset=2.0).compute(ds, roi=roi)
    centred, mean = _expected(data, mask, 2.0)
    # apply_whole's outputs are not masked: the fill values outside the ROI stay NaN
    check_variable(res, "centred", centred, mask, ("scan_y", "scan_x"))
    np.testing.assert_allclose(res["mean"].values, [mean])


def test_one_task_that_shares_the_partition_tasks(ds, data):
    """The task depends on the partition tasks by name: a run with another UDF runs every
    partition task once, and the post-processing once."""
    results = ltdask.lazy(ds, [ex.CentredSumUDF(), SumUDF()])
    graph = dict(dask.base.collections_to_expr(results).__dask_graph__())
    names = [k[0] if isinstance(k, tuple) else k for k in graph]
    partitions = {k for k in graph if isinstance(k, tuple) and k[0].startswith("ltdask-udf-")}
    assert len(partitions) == len(ds.get_partitions())
    assert sum(n.startswith("centred-") for n in names) == 1
    with dask.config.set(scheduler="sync"):
        centred, total = ltdask.compute(ds, [ex.CentredSumUDF(), SumUDF()])
    np.testing.assert_array_equal(centred["centred"].values, _expected(data, np.ones(NAV, bool))[0])
    np.testing.assert_allclose(total["intensity"].values, data.sum(axis=(0, 1)))


def test_names_are_deterministic(ds):
    def keys():
        res = ex.CentredSumUDF(offset=1.0).lazy(ds)
        return {name: res[name].data.name for name in res.data_vars}

    assert keys() == keys()
    other = ex.CentredSumUDF(offset=2.0).lazy(ds)
    assert other["centred"].data.name not in keys().values()


def test_arguments_and_outputs():
    x = da.arange(10, chunks=3)
    both = apply_whole(
        lambda a, b, scale=1: {"total": np.array([a.sum() + b]), "scaled": a * scale},
        x,
        5,
        scale=da.asarray(np.int64(2)),
        outputs={"total": ((1,), np.int64), "scaled": ((10,), np.int64)},
        name="both",
    )
    assert both["total"].chunks == ((1,),) and both["scaled"].chunks == ((10,),)
    total, scaled = dask.compute(both["total"], both["scaled"])
    assert total.tolist() == [50]
    np.testing.assert_array_equal(scaled, np.arange(10) * 2)
    one = apply_whole(np.cumsum, x, outputs=((10,), np.int64))
    assert one.name.startswith("cumsum-")
    np.testing.assert_array_equal(one.compute(), np.cumsum(np.arange(10)))
    # numpy arguments pass as they are
    assert apply_whole(math.prod, (2, 3), outputs=((), int)).compute() == 6


def test_whole_array_arguments_do_not_import_distributed():
    """A run whose results are made from whole nav arrays (CoM's fields) on dask's default
    (threaded) scheduler does not import distributed (dask's default rechunk does, to look
    for a cluster: 0.3 s before a process's first result)."""
    import subprocess
    import sys

    code = (
        "import sys, numpy as np, ltdask; from ltdask.udf import CoMUDF; "
        "ds = ltdask.from_array(np.ones((4, 4, 16, 16), np.float32)); "
        "ltdask.compute(ds, [CoMUDF.with_params(cy=8, cx=8, r=5)]); "
        "assert 'distributed' not in sys.modules, 'imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
