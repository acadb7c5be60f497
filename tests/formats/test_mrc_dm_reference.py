"""MRC and DM files read by ltdask against LiberTEM 0.16's reading of the same files
(``tests/reference/make_mrc_dm.py`` stored its shapes, sums and a picked frame)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from reference import mrc_dm_cases as cases

import ltdask
from ltdask.udf import PickUDF, SumSigUDF, SumUDF

STORED = os.path.join(os.path.dirname(cases.__file__), "data", "formats", "mrc_dm.npz")


@pytest.fixture(scope="module")
def stored():
    with np.load(STORED) as f:
        return dict(f)


@pytest.mark.parametrize("case", list(cases.CASES))
def test_same_as_libertem(tmp_path, stored, case):
    path, kwargs = cases.write(case, tmp_path)
    ds = ltdask.open(path, **kwargs)
    assert tuple(ds.shape) == tuple(stored[f"{case}__shape"]) == (*cases.NAV, *cases.SIG)
    total, sumsig = ltdask.compute(ds, [SumUDF(), SumSigUDF()])
    np.testing.assert_allclose(total["intensity"].values, stored[f"{case}__sum"], rtol=1e-6)
    np.testing.assert_allclose(sumsig["intensity"].values, stored[f"{case}__sumsig"], rtol=1e-6)
    roi = np.zeros(ds.nav_shape, dtype=bool)
    roi[1, 1] = True
    picked = PickUDF().compute(ds, roi=roi)["intensity"].values
    np.testing.assert_array_equal(picked.reshape(stored[f"{case}__pick"].shape),
                                  stored[f"{case}__pick"])  # fmt: skip
    # and the truth the writer was given
    np.testing.assert_array_equal(ds.to_dask().compute(), cases.data(cases.CASES[case][1]))
