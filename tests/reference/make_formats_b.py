"""LiberTEM 0.16's decoded frames of the EMPAD, BLO and TVIPS cases of ``formats_b_cases.py``.

Run by hand in a virtual environment that has LiberTEM (ltdask never imports it)::

    /tmp/lt-venv/bin/python tests/reference/make_formats_b.py

For each case ``ID`` it writes the files with the test-side writers, opens them with
LiberTEM's ``ctx.load`` and stores, in ``data/formats/<format>.npz``: ``ID__frames`` (every
scan position's frame, as a UDF's nav buffer sees it), ``ID__valid`` (LiberTEM's valid mask
of that buffer), ``ID__nav`` and ``ID__sync`` (the nav shape and sync offset LiberTEM chose).
A case LiberTEM refuses stores ``ID__error`` (the message) instead.
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
from libertem.udf import UDF  # noqa: E402
from reference import formats_b_cases as cases  # noqa: E402


class FramesUDF(UDF):
    """Every frame, in a nav buffer of the dataset's dtype."""

    def get_result_buffers(self):
        return {
            "frames": self.buffer(
                kind="nav",
                extra_shape=tuple(self.meta.dataset_shape.sig),
                dtype=self.meta.input_dtype,
            )
        }

    def get_preferred_input_dtype(self):
        return self.USE_NATIVE_DTYPE

    def process_frame(self, frame):
        self.results.frames[:] = frame


def main():
    os.makedirs(cases.DATA, exist_ok=True)
    ctx = Context.make_with("inline")
    out: dict[str, dict] = {}
    for case in cases.CASES:
        store = out.setdefault(case.format, {})
        with tempfile.TemporaryDirectory() as folder:
            load = case.write(Path(folder))
            try:
                ds = ctx.load(load.lt_type, **load.lt_kwargs)
                res = ctx.run_udf(dataset=ds, udf=FramesUDF())
            except Exception as e:  # noqa: BLE001 - a refusal is a result too
                store[f"{case.id}__error"] = np.array(f"{type(e).__name__}: {e}")
                print("refused", case.id, type(e).__name__, e)
                continue
            store[f"{case.id}__frames"] = np.asarray(res["frames"].data)
            store[f"{case.id}__valid"] = np.asarray(res["frames"].valid_mask)
            store[f"{case.id}__nav"] = np.array(tuple(ds.shape.nav))
            store[f"{case.id}__sync"] = np.array(ds._sync_offset)
            print(case.id, tuple(ds.shape), ds.dtype)
    for fmt, arrays in out.items():
        np.savez_compressed(cases.data_file(fmt), **arrays)
        print(fmt, os.path.getsize(cases.data_file(fmt)), "bytes")


if __name__ == "__main__":
    main()
