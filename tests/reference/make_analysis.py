"""Write LiberTEM 0.16's Analysis API results for the cases in ``analysis_cases.py``.

Run from the repository root with the LiberTEM virtual environment::

    /tmp/lt-venv/bin/python tests/reference/make_analysis.py

It imports libertem and numpy only (never ltdask) and writes one ``.npz`` per case to
``tests/reference/data/analysis/``: the result keys, titles and descriptions in order, each
result's ``raw_data`` (``raw_<i>``; CoM's ``field`` stacked as ``(x, y)``) and its
``visualized`` RGB(A) image (``vis_<i>``), and for the radial Fourier analysis the set's
``raw_results``.
"""

from __future__ import annotations

import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tests/: reference.*, helpers.*

from reference.analysis_cases import CASES, make_data, make_roi, resolve_kwargs  # noqa: E402

OUT = os.path.join(HERE, "data", "analysis")


def run_case(ctx, case) -> dict:
    name, data_name, method, kwargs, roi_name = case
    data = make_data(data_name)
    ds = ctx.load("memory", data=data, sig_dims=2, num_partitions=2)
    kwargs = resolve_kwargs(method, kwargs, data.shape[-2:])
    analysis = getattr(ctx, method)(dataset=ds, **kwargs)
    roi = None if roi_name is None else make_roi(roi_name)
    result = ctx.run(analysis, roi=roi)
    out = {
        "keys": np.array([r.key for r in result], dtype=str),
        "titles": np.array([r.title for r in result], dtype=str),
        "descs": np.array([r.desc for r in result], dtype=str),
        "set_class": np.array(type(result).__name__),
    }
    for i, r in enumerate(result):
        raw = r.raw_data
        if isinstance(raw, tuple):
            raw = np.stack(raw)
        out[f"raw_{i}"] = np.asarray(raw)
        out[f"vis_{i}"] = np.asarray(r.visualized)
    if result.raw_results is not None:
        out["raw_results"] = np.asarray(result.raw_results)
    return out


def main() -> None:
    import libertem
    from libertem.api import Context

    os.makedirs(OUT, exist_ok=True)
    ctx = Context.make_with("inline")
    for case in CASES:
        out = run_case(ctx, case)
        out["libertem_version"] = np.array(libertem.__version__)
        np.savez_compressed(os.path.join(OUT, f"{case[0]}.npz"), **out)
        print(case[0], list(out["keys"])[:6])


if __name__ == "__main__":
    main()
