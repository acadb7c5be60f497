"""LiberTEM 0.16's results for the reference cases of ``cases.py``, for ``test_reference.py``.

Run by hand in a virtual environment that has LiberTEM (ltdask never imports it)::

    python -m venv /tmp/lt-venv && /tmp/lt-venv/bin/pip install libertem==0.16.0
    /tmp/lt-venv/bin/python tests/reference/make_reference.py

Writes ``data/masks.npz`` (every mask factory case) and one ``data/udfs/DATASET__ROI.npz`` per
group: for each case ``ID`` and result buffer ``NAME`` the keys ``ID__NAME`` (LiberTEM's
``.data``), ``ID__NAME__valid`` (its ``.valid_mask``) and ``ID__NAME__raw`` (its
``.raw_data``: nav buffers compressed to the ROI's positions); dtype and shape travel with the
arrays. A case LiberTEM refuses stores ``ID____error`` (the message) instead.
"""

from __future__ import annotations

import os
import sys
import tempfile

import numpy as np

# tests/, for reference.* and helpers.* (a script, run in LiberTEM's environment)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from libertem import masks  # noqa: E402
from libertem.api import Context  # noqa: E402
from libertem.udf import UDF  # noqa: E402
from libertem.udf.com import CoMUDF  # noqa: E402
from libertem.udf.masks import ApplyMasksUDF  # noqa: E402
from libertem.udf.raw import PickUDF  # noqa: E402
from libertem.udf.stddev import StdDevUDF  # noqa: E402
from libertem.udf.sum import SumUDF  # noqa: E402
from libertem.udf.sumsigudf import SumSigUDF  # noqa: E402
from reference import cases  # noqa: E402

NS = dict(
    UDF=UDF,
    SumUDF=SumUDF,
    SumSigUDF=SumSigUDF,
    StdDevUDF=StdDevUDF,
    ApplyMasksUDF=ApplyMasksUDF,
    CoMUDF=CoMUDF,
    PickUDF=PickUDF,
    masks=masks,
    custom=cases.make_udfs(UDF),
    aux_data=UDF.aux_data,
)


def store(out, case_id, res):
    for name, buf in res.items():
        out[f"{case_id}__{name}"] = np.asarray(buf.data)
        out[f"{case_id}__{name}__valid"] = np.asarray(buf.valid_mask)
        out[f"{case_id}__{name}__raw"] = np.asarray(buf.raw_data)


def run_group(ctx, group, udf_keys, workdir):
    ds_key, roi_kind = group
    nav, sig = cases.dataset_shape(ds_key)
    filetype, kwargs = cases.dataset_load(ds_key, workdir)
    if filetype == "memory":
        kwargs["num_partitions"] = min(3, int(np.prod(nav)))
    ds = ctx.load(filetype, **kwargs)
    roi = cases.roi(roi_kind, nav)
    out = {}
    for key in udf_keys:
        case_id = f"{ds_key}-{roi_kind}-{key}"
        try:
            if key == "auto":
                res = {"result": ctx.map(dataset=ds, f=cases.auto_fn, roi=roi)}
            else:
                udf = cases.make_udf(key, NS, sig, nav)
                res = ctx.run_udf(dataset=ds, udf=udf, roi=roi)
        except Exception as e:  # noqa: BLE001 - a refusal is a result too
            out[f"{case_id}____error"] = np.array(f"{type(e).__name__}: {e}")
            print("refused", case_id, type(e).__name__, e)
            continue
        store(out, case_id, res)
    return out


def main():
    os.makedirs(os.path.join(cases.DATA, "udfs"), exist_ok=True)
    ms = {}
    for case_id, name, sig in cases.MASK_FACTORY_CASES:
        ms[case_id] = cases.call_mask(masks, cases.mask_specs(sig)[name])
    np.savez_compressed(cases.masks_file(), **ms)
    if "--masks-only" in sys.argv:  # the mask factories alone (seconds, not minutes)
        print(len(cases.MASK_FACTORY_CASES), "mask cases")
        return
    ctx = Context.make_with("inline")
    with tempfile.TemporaryDirectory() as workdir:
        for group, udf_keys in cases.GROUPS.items():
            out = run_group(ctx, group, udf_keys, workdir)
            np.savez_compressed(cases.group_file(group), **out)
            print(group, len(udf_keys))
    print(len(cases.CASES) + len(cases.MASK_FACTORY_CASES), "cases")


if __name__ == "__main__":
    main()
