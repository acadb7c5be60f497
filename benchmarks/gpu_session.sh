#!/usr/bin/env bash
# Everything a lent GPU machine should check, in one call of under 8 minutes (device time
# is 15 minutes a task): the CUDA tests, then benchmarks/bench_gpu.py (GPU vs CPU, the
# bus's own limit, the rows of issue 35's "Done when", a run split between workers).
# Installs nothing from the internet (the machine has none): packages its image lacks
# travel as wheels in .whl/ (benchmarks/gpu_wheels.sh fetches them beforehand).
# Writes its logs and tables to $OUT (default /tmp/ltdask-gpu-session).
#
#   run(command="bash benchmarks/gpu_session.sh", carry=[".whl"], timeout_s=540)
#
# Where the GPU rows' time goes (the bus, copies into pinned buffers, copies straight
# from the registered memory map, tile sizes, threads; about 2 minutes), in a second call:
#
#   run(command="STAGING=1 bash benchmarks/gpu_session.sh", carry=[".whl"], timeout_s=300)
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/ltdask-gpu-session}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if compgen -G ".whl/*.whl" >/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || echo "no nvidia-smi"
  $PY - <<'PY'
import importlib, sys
missing = []
for name in ("dask", "distributed", "zarr", "sparse", "sparseconverter", "numba", "xarray"):
    try:
        module = importlib.import_module(name)
        print(name, getattr(module, "__version__", "?"))
    except ImportError as e:
        missing.append(f"{name} ({e})")
if missing:
    sys.exit("missing: " + ", ".join(missing) + "; carry them as wheels: benchmarks/gpu_wheels.sh")
try:
    import cupy

    print("CUDA devices:", cupy.cuda.runtime.getDeviceCount())
except Exception as e:  # (the tests skip, the benchmark says so)
    print(f"no CUDA device through CuPy: {type(e).__name__}: {e}")
PY
} 2>&1 | tee "$OUT/environment.txt" || exit 3
if [ -n "${STAGING:-}" ]; then
  timeout 240 $PY benchmarks/bench_gpu_staging.py --out "$OUT/staging.md" 2>&1 \
    | tee "$OUT/staging.log"
  exit $?
fi
# the tests that need a GPU (they skip without one), and those of the GPU cluster
# (GPU_TESTS: other test paths, for a rerun that needs only some)
timeout 200 $PY -m pytest -q -p no:cacheprovider -m "slow or not slow" -k "cupy or cuda or gpu" \
  ${GPU_TESTS:-tests/udf tests/test_gpu_cluster.py tests/cli/test_cli_gpus.py} 2>&1 \
  | tee "$OUT/tests.txt"
tests=$?
timeout ${BENCH_TIMEOUT:-270} $PY benchmarks/bench_gpu.py --repeats 3 --out "$OUT/bench_gpu.md" 2>&1 \
  | tee "$OUT/bench_gpu.log"
bench=$?
echo "tests: exit $tests; bench_gpu: exit $bench" | tee -a "$OUT/environment.txt"
exit $(( tests != 0 ? tests : bench ))
