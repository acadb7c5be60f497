"""UDF runs and ``to_dask()`` with dask's array-expr engine (``array.query-planning``),
in a process of its own: dask reads that setting once, when ``dask.array`` is imported.

`.ci/run` also runs the to_dask and UDF modules with the engine on (see
`helpers.array_expr.ARRAY_EXPR_CANNOT`); this checks the same from the default tier.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers.array_expr import ARRAY_EXPR_CANNOT

ROOT = Path(__file__).resolve().parents[2]

CODE = textwrap.dedent(
    """
    import dask.array as da
    import numpy as np

    import ltdask
    from ltdask.udf import StdDevUDF, SumSigUDF, SumUDF

    assert da.ARRAY_EXPR_ENABLED
    data = np.random.default_rng(0).integers(0, 1000, (5, 4, 6, 7), dtype=np.uint16)
    wide = data.astype(np.float64)
    with __import__("dask").config.set({"ltdask.partition-bytes": 700}):
        ds = ltdask.from_array(data)
        arr = ds.to_dask()
        np.testing.assert_array_equal(arr.compute(), data)
        np.testing.assert_array_equal(ltdask.sum(arr, axis=(0, 1)).compute(), data.sum((0, 1)))
        np.testing.assert_allclose(ltdask.mean(arr, axis=(2, 3)).compute(), wide.mean((2, 3)))
        np.testing.assert_array_equal(arr.persist()[1:3].sum().compute(), data[1:3].sum())
        roi = np.zeros((5, 4), dtype=bool)
        roi[1:4, ::2] = True
        total, frames, stats = ltdask.compute(ds, [SumUDF(), SumSigUDF(), StdDevUDF()], roi=roi)
        np.testing.assert_allclose(total["intensity"].values, wide[roi].sum(axis=0))
        want = np.where(roi, wide.sum(axis=(2, 3)), np.nan)
        np.testing.assert_allclose(frames["intensity"].values, want)
        np.testing.assert_allclose(stats["std"].values, wide[roi].std(axis=0), rtol=1e-6)
    print("ok")
    """
)


def test_udf_runs_and_to_dask_with_array_expr():
    env = dict(os.environ, DASK_ARRAY__QUERY_PLANNING="True")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", CODE], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"


def test_array_expr_skips_name_existing_tests():
    # a renamed test would otherwise silently run (and fail) with the engine on
    for key, reason in ARRAY_EXPR_CANNOT.items():
        path, _, name = key.partition("::")
        function = name.partition("[")[0]
        assert f"def {function}(" in (ROOT / path).read_text(), key
        assert "array-expr" in reason or "Array." in reason, key
