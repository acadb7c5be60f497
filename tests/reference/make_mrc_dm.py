"""LiberTEM 0.16's reading of MRC and DM files, stored for
``tests/formats/test_mrc_dm_reference.py``.

Run by hand in a virtual environment that has LiberTEM and mrcfile (ltdask never imports
LiberTEM)::

    /tmp/lt-venv/bin/pip install libertem==0.16.0 mrcfile
    /tmp/lt-venv/bin/python tests/reference/make_mrc_dm.py

Writes ``tests/reference/data/formats/mrc_dm.npz``: for each case (``reference/
mrc_dm_cases.py``), the dataset's shape, the SumUDF and SumSigUDF results, and one frame.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np

# tests/, for reference.* and helpers.* (a script, run in LiberTEM's environment)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from libertem.api import Context  # noqa: E402
from libertem.udf.raw import PickUDF  # noqa: E402
from libertem.udf.sum import SumUDF  # noqa: E402
from libertem.udf.sumsigudf import SumSigUDF  # noqa: E402
from reference import mrc_dm_cases as cases  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "formats", "mrc_dm.npz")


def main():
    ctx = Context.make_with("inline")
    out = {}
    with tempfile.TemporaryDirectory() as folder:
        for case, (fmt, _, _) in cases.CASES.items():
            path, kwargs = cases.write(case, Path(folder))
            ds = ctx.load(fmt, path=str(path), **kwargs)
            roi = np.zeros(ds.shape.nav, dtype=bool)
            roi[(1,) * len(ds.shape.nav)] = True
            sums = ctx.run_udf(dataset=ds, udf=[SumUDF(), SumSigUDF()])
            pick = ctx.run_udf(dataset=ds, udf=PickUDF(), roi=roi)
            out[f"{case}__shape"] = np.array(tuple(ds.shape))
            out[f"{case}__sum"] = np.asarray(sums[0]["intensity"].data)
            out[f"{case}__sumsig"] = np.asarray(sums[1]["intensity"].data)
            out[f"{case}__pick"] = np.asarray(pick["intensity"].raw_data)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    np.savez_compressed(OUT, **out)
    print(f"wrote {OUT}: {len(out)} arrays")


if __name__ == "__main__":
    main()
