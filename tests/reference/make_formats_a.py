"""LiberTEM 0.16's reading of K2IS, FRMS6 and DE SEQ files (issue 17), stored for
``tests/reference/test_formats_a.py``.

Run by hand in a virtual environment that has LiberTEM (ltdask never imports it)::

    python -m venv /tmp/lt-venv && /tmp/lt-venv/bin/pip install libertem==0.16.0
    /tmp/lt-venv/bin/python tests/reference/make_formats_a.py

Each case of ``formats_a_cases.py`` writes its files with the tests' writers into a temporary
folder; LiberTEM opens them (``ctx.load``) and a UDF that copies every frame into a nav
buffer returns the frames exactly as LiberTEM's read path delivers them (with the corrections
the dataset brings: FRMS6 dark frame and gain map, SEQ dark/gain references). One ``.npz``
per case in ``tests/reference/data/formats/``: ``frames`` (K2IS: ``sha256`` and ``crop``),
``nav_shape``.
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
from libertem.udf.base import UDF  # noqa: E402
from reference.formats_a_cases import CASES, frame_digest  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "formats")


class FramesUDF(UDF):
    """Every frame as the dataset's read path gives it, into a nav buffer."""

    def get_result_buffers(self):
        return {
            "frames": self.buffer(
                kind="nav", extra_shape=self.meta.dataset_shape.sig, dtype=self.meta.input_dtype
            )
        }

    def process_frame(self, frame):
        self.results.frames[:] = frame


def main():
    os.makedirs(OUT, exist_ok=True)
    ctx = Context.make_with("inline")
    for case_id, (fmt, write) in CASES.items():
        with tempfile.TemporaryDirectory() as folder:
            path, _, lt_kwargs = write(Path(folder))
            ds = ctx.load(fmt, path=str(path), **lt_kwargs)
            res = ctx.run_udf(dataset=ds, udf=FramesUDF())
            frames = np.asarray(res["frames"].data)
            nav = tuple(ds.shape.nav)
            out = {"nav_shape": np.array(nav)}
            flat = frames.reshape(-1, *tuple(ds.shape.sig))
            if fmt == "k2is":
                out.update(frame_digest(flat))
            else:
                out["frames"] = flat
            np.savez_compressed(os.path.join(OUT, f"{case_id}.npz"), **out)
            print(case_id, nav, frames.dtype)


if __name__ == "__main__":
    main()
