"""A user's first run: a fresh process from ``import ltdask`` to its first SumUDF result,
with an empty numba cache and with a warm one.

Run as ``.venv/bin/python benchmarks/bench_first_run.py``. Each run is a new Python process
(interpreter start and imports included) that opens a raw uint16 scan (nav 32x32, sig
128x128, 32 MiB, written once to a temporary folder) and computes ``SumUDF``. The cache is
a new ``NUMBA_CACHE_DIR`` each time it must be empty (``--repeats`` runs, median), and the
one the first empty run filled when it is warm (median of ``--repeats``). The processes
have Python's bytecode cache, as an installed package has its ``.pyc`` files (pip writes
them): ``PYTHONDONTWRITEBYTECODE`` is left out of their environment and one untimed run
(with a cache of its own) writes them first (without them every import of ltdask compiles its
modules, about 0.06 s more). Then ``import ltdask`` alone (median of ``--repeats``), and
``ltdask.warmup()`` (every shipped analysis over four dtypes) with an empty cache and a
warm one. The first-compile notice is left on, so its line shows in the output.

The floor under these numbers is the import of ltdask's dependencies, which a first run
needs whatever ltdask does: on the development machine (2 cores) ``import dask.array``
(which imports xarray, pandas, sparse, scipy.sparse and scipy.fftpack) and numba take
0.8 s, and numba's first use of a cached kernel 0.1-0.2 s more (it loads its typing
registries). ``import ltdask`` imports neither dask.array nor xarray, sparse, matplotlib
or distributed (``tests/test_lazy.py``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

NAV, SIG = (32, 32), (128, 128)

FIRST_SUM = f"""
import ltdask
ds = ltdask.open_raw({{path!r}}, nav_shape={NAV}, sig_shape={SIG}, dtype="uint16")
ltdask.udf.SumUDF().compute(ds)
"""
WARMUP = "import ltdask; ltdask.warmup()"


def timed(code: str, cache: str) -> tuple[float, str]:
    """Seconds a new process takes to run `code` with `cache` as numba's cache; its stderr."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache}
    env.pop("DASK_LTDASK__COMPILE_NOTICE", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return time.perf_counter() - t0, proc.stderr.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ltdask-first-run-") as folder:
        path = os.path.join(folder, "scan.raw")
        rng = np.random.default_rng(0)
        rng.integers(0, 1000, (*NAV, *SIG), dtype=np.uint16).tofile(path)
        code = FIRST_SUM.format(path=path)
        warm_cache = os.path.join(folder, "cache-warm")
        timed(code, os.path.join(folder, "cache-pyc"))  # writes the .pyc files, untimed

        empty, notices = [], set()
        for i in range(args.repeats):
            cache = warm_cache if i == 0 else os.path.join(folder, f"cache-empty-{i}")
            seconds, stderr = timed(code, cache)
            empty.append(seconds)
            notices.update(stderr.splitlines())
        warm, warm_err = [], set()
        for _ in range(args.repeats):
            seconds, stderr = timed(code, warm_cache)
            warm.append(seconds)
            warm_err.update(stderr.splitlines())
        print(f"first SumUDF result, new process, empty cache: {statistics.median(empty):5.2f} s")
        print(f"first SumUDF result, new process, warm cache:  {statistics.median(warm):5.2f} s")
        print(
            f"  (medians of {args.repeats}; each: {', '.join(f'{s:.2f}' for s in empty)} / "
            f"{', '.join(f'{s:.2f}' for s in warm)})"
        )
        for line in sorted(notices):
            print(f"  empty cache, stderr: {line}")
        print(f"  warm cache, stderr: {' | '.join(sorted(warm_err)) or '(nothing)'}")
        imports = [timed("import ltdask", warm_cache)[0] for _ in range(args.repeats)]
        print(f"import ltdask, new process:                 {statistics.median(imports):5.2f} s")

        warmup_cache = os.path.join(folder, "cache-warmup")
        cold_warmup, _ = timed(WARMUP, warmup_cache)
        warm_warmup, _ = timed(WARMUP, warmup_cache)
        print(f"ltdask.warmup(), new process, empty cache: {cold_warmup:5.1f} s")
        print(f"ltdask.warmup(), new process, warm cache:  {warm_warmup:5.1f} s")


if __name__ == "__main__":
    main()
