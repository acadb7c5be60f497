"""LiberTEM 0.16's results of `LogsumUDF`, `FEMUDF` and `CrystallinityUDF`, stored for
``tests/udf/test_more_udfs.py``.

Run by hand in a virtual environment that has LiberTEM (ltdask never imports it)::

    /tmp/lt-venv/bin/python tests/reference/make_more_udfs.py

Writes one ``.npz`` per case of ``more_udfs_cases.CASES`` into
``tests/reference/data/more_udfs/``: for each result buffer NAME its ``.data`` (``NAME``),
``.valid_mask`` (``NAME__valid``) and the dtype of ``.data`` (``NAME__dtype``).
"""

from __future__ import annotations

import os
import sys

import numpy as np

# tests/, for reference.* and helpers.* (a script, run in LiberTEM's environment)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from libertem.api import Context  # noqa: E402
from libertem.udf.crystallinity import CrystallinityUDF  # noqa: E402
from libertem.udf.FEM import FEMUDF  # noqa: E402
from libertem.udf.logsum import LogsumUDF  # noqa: E402
from reference import more_udfs_cases as cases  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "more_udfs")
UDFS = {"LogsumUDF": LogsumUDF, "FEMUDF": FEMUDF, "CrystallinityUDF": CrystallinityUDF}


def main():
    os.makedirs(OUT, exist_ok=True)
    ctx = Context.make_with("inline")
    for case_id, (name, params, _, nav, _, _) in cases.CASES.items():
        data = cases.data(case_id)
        frames = int(np.prod(nav))
        # several partitions where there are frames enough: their merge is compared too
        ds = ctx.load("memory", data=data, sig_dims=2, num_partitions=min(3, frames))
        res = ctx.run_udf(dataset=ds, udf=UDFS[name](**params), roi=cases.roi(case_id))
        out = {}
        for key, buf in res.items():
            arr = np.asarray(buf.data)
            out[key] = arr
            out[f"{key}__valid"] = np.asarray(buf.valid_mask)
            out[f"{key}__dtype"] = np.array(arr.dtype.str)
        np.savez_compressed(os.path.join(OUT, f"{case_id}.npz"), **out)
        print(case_id, {k: (v.dtype.str, v.shape) for k, v in out.items()})


if __name__ == "__main__":
    main()
