"""ltdask's compiled kernels: where numba caches them, a one-line notice while they are
compiled for the first time, and `warm_up`, which runs a workload and reports what it
compiled (the shipped workload, `ltdask.warmup`, is in :mod:`ltdask.udf.warmup`: it runs the
analyses, which this package, below the datasets and UDFs, does not import).

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
from collections.abc import Callable
from typing import Any

import dask.config
import numba
import numpy as np
from numba.core import config as numba_config
from numba.core import event

__all__ = ["cache_location", "compiled_kernels", "warm_up"]

#: seconds a first run spends compiling, as the notice tells users: about what the shipped
#: analyses over one dtype take with an empty cache (``benchmarks/bench_first_run.py``; the
#: figures are in docs/performance.md)
FIRST_RUN_SECONDS = 5

_HERE = os.path.dirname(os.path.abspath(__file__))
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
            from ltdask.runtime.progress import write_line

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
    >>> from ltdask.runtime.kernel_cache import compiled_kernels
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
    >>> from ltdask.runtime.kernel_cache import cache_location
    >>> where = cache_location()  # e.g. '__pycache__ folders in /.../site-packages/ltdask'
    >>> isinstance(where, str)
    True
    """
    configured = getattr(numba_config, "CACHE_DIR", "")
    if configured:
        return os.fspath(configured)
    # numba chooses one folder for every module of the package (the same writable check
    # applies to each): `_probe`'s cache, never compiled, shows which
    path = getattr(getattr(_probe, "_cache", None), "_cache_path", None)
    if not path:
        return "nowhere: numba cannot cache here (set NUMBA_CACHE_DIR to a writable folder)"
    package = os.path.dirname(_HERE)
    if os.path.abspath(path).startswith(package + os.sep):
        return f"__pycache__ folders in {package}"
    return os.path.dirname(os.path.abspath(path))


@numba.njit(cache=True)
def _probe():  # pragma: no cover  (never called: its cache location is what counts)
    return 0


def warm_up(workload: Callable[[str, np.dtype], None], dtypes, verbose: bool = False) -> dict:
    """Run `workload(path, dtype)` once per dtype (`path`: a file name in a temporary folder
    the workload may write) and report what it compiled: ``compiled`` (kernel signatures
    compiled rather than loaded from the cache), ``seconds``, ``cache`` (see
    `cache_location`) and ``dtypes``.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.runtime.kernel_cache import warm_up
    >>> warm_up(lambda path, dtype: np.zeros(3, dtype).tofile(path), ["uint8"])["compiled"]
    0
    """
    import tempfile

    t0 = time.perf_counter()
    before = compiled_kernels()
    names = tuple(np.dtype(d).name for d in dtypes)
    with tempfile.TemporaryDirectory(prefix="ltdask-warmup-") as folder:
        for name in names:
            t1 = time.perf_counter()
            workload(os.path.join(folder, f"scan-{name}.raw"), np.dtype(name))
            if verbose:
                print(
                    f"ltdask warmup: {name} in {time.perf_counter() - t1:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
    return {
        "compiled": compiled_kernels() - before,
        "seconds": time.perf_counter() - t0,
        "cache": cache_location(),
        "dtypes": list(names),
    }
