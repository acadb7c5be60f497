"""ltdask's compiled kernels: where numba caches them, a one-line notice while they are
compiled for the first time, and `warmup`, which compiles them ahead of time.

Every numba kernel in ltdask is compiled with ``cache=True`` (``tests/test_kernel_cache.py``
checks): the first process that needs a kernel for a dtype compiles it (seconds) and writes
it to numba's cache, from where later processes load it (milliseconds). numba picks the
cache folder: ``NUMBA_CACHE_DIR`` when it is set (ltdask never sets or changes it), else the
``__pycache__`` folders beside ltdask's modules, else, where those are not writable (a
read-only site-packages), a per-user folder (``~/.cache/numba`` on Linux).

Whether a kernel must be compiled is numba's own decision (its cache index, keyed by the
source file and the machine); ltdask listens to numba's ``numba:compile`` event, which fires
only when a kernel is compiled rather than loaded, and prints one line to stderr the first
time that happens in a process. The ``ltdask.compile-notice`` setting (``False``, or the
environment variable ``DASK_LTDASK__COMPILE_NOTICE=False``) silences it.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

import dask.config
from numba.core import config as numba_config
from numba.core import event

__all__ = ["cache_location", "compiled_kernels", "warmup"]

#: seconds a first run spends compiling, measured with an empty cache on the development
#: machine (2 cores; ``benchmarks/bench_first_run.py``): 2 s for SumUDF, 6 s for every shipped
#: analysis over one dtype (`warmup`, over four dtypes, takes 10 s)
FIRST_RUN_SECONDS = 5

_PACKAGE = os.path.dirname(os.path.abspath(__file__))
_lock = threading.Lock()
_state = {"noticed": False, "compiled": 0}


def _notice_wanted() -> bool:
    value = dask.config.get("ltdask.compile-notice", True)
    if isinstance(value, str):
        return value.strip().lower() not in ("0", "false", "no", "off", "")
    return bool(value)


def _is_ltdask_kernel(data: Any) -> bool:
    dispatcher = data.get("dispatcher") if isinstance(data, dict) else None
    module = getattr(getattr(dispatcher, "py_func", None), "__module__", None) or ""
    return module == "ltdask" or module.startswith("ltdask.")


class _FirstCompile(event.Listener):
    """Counts the ltdask kernels compiled in this process and announces the first one."""

    def on_start(self, ev):
        if not _is_ltdask_kernel(ev.data):
            return
        with _lock:
            if _state["noticed"]:
                return
            _state["noticed"] = True
        if _notice_wanted():
            from ltdask._progress import write_line

            # on its own line, above a progress bar that is being drawn
            write_line(
                f"ltdask: compiling kernels, once: ~{FIRST_RUN_SECONDS} s "
                f"(numba cache: {cache_location()})"
            )

    def on_end(self, ev):
        if _is_ltdask_kernel(ev.data):
            with _lock:
                _state["compiled"] += 1


event.register("numba:compile", _FirstCompile())


def compiled_kernels() -> int:
    """How many times this process has compiled one of ltdask's kernels (for one type
    signature each) rather than loading it from the cache.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> from ltdask.kernel_cache import compiled_kernels
    >>> before = compiled_kernels()
    >>> _ = ltdask.udf.SumSigUDF().compute(ltdask.from_array(np.ones((2, 2, 4, 4), np.float32)))
    >>> compiled_kernels() - before >= 0  # 0 where every kernel came from the cache
    True
    """
    return _state["compiled"]


def cache_location() -> str:
    """Where numba caches ltdask's kernels: ``NUMBA_CACHE_DIR``, the ``__pycache__`` folders
    beside ltdask's modules, or numba's per-user folder where those are not writable.

    Examples
    --------
    >>> from ltdask.kernel_cache import cache_location
    >>> where = cache_location()  # e.g. '__pycache__ folders in /.../site-packages/ltdask'
    >>> isinstance(where, str)
    True
    """
    configured = getattr(numba_config, "CACHE_DIR", "")
    if configured:
        return os.fspath(configured)
    from ltdask.io import read_ranges

    kernel = next(
        (v for v in vars(read_ranges).values() if hasattr(v, "py_func") and hasattr(v, "_cache")),
        None,
    )
    path = getattr(getattr(kernel, "_cache", None), "_cache_path", None)
    if not path:
        return "nowhere: numba cannot cache here (set NUMBA_CACHE_DIR to a writable folder)"
    if os.path.abspath(path).startswith(_PACKAGE + os.sep):
        return f"__pycache__ folders in {_PACKAGE}"
    return os.path.dirname(os.path.abspath(path))


#: pixel dtypes that `warmup` compiles for by default (detectors' counts, and floats)
WARMUP_DTYPES = ("uint8", "uint16", "uint32", "float32")


def warmup(dtypes=WARMUP_DTYPES, verbose: bool = False) -> dict:
    """Compile ltdask's kernels into numba's cache, so that later processes start warm.

    Writes a tiny scan of each dtype to a temporary folder and runs the shipped analyses
    over it (sums, standard deviation, masks, centre of mass; alone and in one pass; with
    and without a ROI and detector corrections) on the synchronous scheduler in this
    process. Kernels already in the cache are loaded, not compiled again, so a second call
    takes about a second.

    On a cluster whose workers share no cache folder, run it on every worker:
    ``client.run(ltdask.warmup)``.

    Parameters
    ----------
    dtypes
        Pixel dtypes to compile for.
    verbose
        Print a line per dtype to stderr.

    Returns
    -------
    dict
        ``compiled`` (kernel signatures compiled rather than loaded), ``seconds``,
        ``cache`` (where numba keeps them, see :func:`cache_location`) and ``dtypes``.

    Examples
    --------
    >>> import ltdask
    >>> report = ltdask.warmup(dtypes=["uint16"])
    >>> sorted(report)
    ['cache', 'compiled', 'dtypes', 'seconds']
    """
    import tempfile

    import numpy as np

    t0 = time.perf_counter()
    before = compiled_kernels()
    dtypes = tuple(np.dtype(d).name for d in dtypes)
    with tempfile.TemporaryDirectory(prefix="ltdask-warmup-") as folder:
        for dtype in dtypes:
            t1 = time.perf_counter()
            _run_analyses(os.path.join(folder, f"scan-{dtype}.raw"), np.dtype(dtype))
            if verbose:
                print(
                    f"ltdask warmup: {dtype} in {time.perf_counter() - t1:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
    return {
        "compiled": compiled_kernels() - before,
        "seconds": time.perf_counter() - t0,
        "cache": cache_location(),
        "dtypes": list(dtypes),
    }


def _run_analyses(path: str, dtype) -> None:
    """The shipped analyses over a tiny raw scan of `dtype` at `path`, as ``ltdask run``
    and the API run them."""
    import numpy as np

    from ltdask.corrections import CorrectionSet
    from ltdask.io import open_raw
    from ltdask.masks import circular
    from ltdask.udf import ApplyMasksUDF, CoMUDF, StdDevUDF, SumSigUDF, SumUDF
    from ltdask.udf.api import compute

    nav, sig = (4, 6), (16, 16)
    rng = np.random.default_rng(0)
    (rng.random((*nav, *sig)) * 100).astype(dtype).tofile(path)
    ds = open_raw(path, nav_shape=nav, sig_shape=sig, dtype=dtype)
    roi = np.zeros(nav, dtype=bool)
    roi[1:3, ::2] = True  # frames apart: read through the read ranges, not as views
    excluded = np.zeros(sig, dtype=bool)
    excluded[3, 4] = True
    corrections = CorrectionSet(dark=np.ones(sig), gain=np.full(sig, 2.0), excluded_pixels=excluded)
    # (without excluded pixels, Sum, SumSig and StdDev fold a dark frame into their results)
    folded = CorrectionSet(dark=np.ones(sig))

    def udfs():
        return [
            SumUDF(),
            SumSigUDF(),
            StdDevUDF(),
            ApplyMasksUDF([lambda: circular(8, 8, 16, 16, 4)]),
            CoMUDF.with_params(cy=8, cx=8, r=6),
        ]

    # on this process's own threads even inside a distributed worker (``client.run``); in
    # several partitions of several tiles, which read through the read ranges as large
    # scans do, rather than as views of the file
    settings = {
        "scheduler": "synchronous",
        "ltdask.partition-bytes": 8 * 1024,
        "ltdask.min-partitions": 2,
        "ltdask.tile-bytes": 2 * 1024,
    }
    with dask.config.set(settings):
        for udf in udfs():
            for kwargs in ({}, {"roi": roi}, {"corrections": corrections}, {"corrections": folded}):
                compute(ds, [udf], **kwargs)
        for kwargs in ({}, {"roi": roi}, {"corrections": corrections}):
            compute(ds, udfs(), **kwargs)
        ds.to_dask().sum().compute()
