"""LiberTEM 0.16's results with detector corrections, stored for ``tests/test_corrections.py``.

Run by hand in a virtual environment that has LiberTEM (ltdask never imports it)::

    python -m venv /tmp/lt-venv && /tmp/lt-venv/bin/pip install libertem==0.16.0
    /tmp/lt-venv/bin/python tests/reference/make_corrections.py

Writes one ``.npz`` per case into ``tests/reference/data/corrections/``: every result buffer
(``NAME``, ``NAME__valid``) of each UDF under ``UDF__NAME``, and the corrected frames as
``libertem.io.corrections.correct`` gives them (``frames``).
"""

from __future__ import annotations

import os
import sys

import numpy as np
import sparse

# tests/, for reference.* and helpers.* (a script, run in LiberTEM's environment)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from libertem.api import Context  # noqa: E402
from libertem.io.corrections import CorrectionSet  # noqa: E402
from libertem.io.corrections.detector import correct  # noqa: E402
from libertem.masks import ring  # noqa: E402
from libertem.udf.com import CoMUDF  # noqa: E402
from libertem.udf.masks import ApplyMasksUDF  # noqa: E402
from libertem.udf.raw import PickUDF  # noqa: E402
from libertem.udf.stddev import StdDevUDF  # noqa: E402
from libertem.udf.sum import SumUDF  # noqa: E402
from libertem.udf.sumsigudf import SumSigUDF  # noqa: E402
from reference import corrections_cases as cases  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "corrections")


def udfs():
    h, w = cases.SIG
    return {
        "sum": SumUDF(),
        "sumsig": SumSigUDF(),
        "stddev": StdDevUDF(),
        "ring": ApplyMasksUDF(mask_factories=[lambda: ring(6, 8, w, h, 6, 2)]),
        "com": CoMUDF.with_params(cy=8, cx=6, r=5),
        "pick": PickUDF(),
    }


def main():
    os.makedirs(OUT, exist_ok=True)
    ctx = Context.make_with("inline")
    for case_id, dtype, with_dark, with_gain, excl, roi_kind in cases.CASES:
        data = cases.frames(dtype)
        dark = cases.dark() if with_dark else None
        gain = cases.gain() if with_gain else None
        mask = cases.excluded(excl) if excl != "none" else None
        cs = CorrectionSet(
            dark=dark, gain=gain, excluded_pixels=None if mask is None else sparse.COO(mask)
        )
        roi = cases.roi(roi_kind)
        out = {}
        for name, udf in udfs().items():
            # a fresh copy per run: LiberTEM 0.16 corrects float32 memory datasets in place,
            # in the caller's array, so a second run would subtract the dark frame again
            ds = ctx.load("memory", data=data.copy(), sig_dims=2, num_partitions=3)
            run_roi = roi
            if name == "pick":
                run_roi = np.zeros(cases.NAV, bool)
                run_roi[1, 2] = True
            res = ctx.run_udf(dataset=ds, udf=udf, roi=run_roi, corrections=cs)
            for key, buf in res.items():
                out[f"{name}__{key}"] = np.asarray(buf.data)
                out[f"{name}__{key}__valid"] = np.asarray(buf.valid_mask)
        coords = None if mask is None else np.array(np.nonzero(mask))
        out["frames"] = correct(
            data.reshape(-1, *cases.SIG),
            dark_image=dark,
            gain_map=gain,
            excluded_pixels=coords,
            sig_shape=cases.SIG,
        ).reshape(data.shape)
        np.savez_compressed(os.path.join(OUT, f"{case_id}.npz"), **out)
        print(case_id, len(out))


if __name__ == "__main__":
    main()
