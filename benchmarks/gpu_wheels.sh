#!/usr/bin/env bash
# Fetch, HERE (a machine with network), the wheels of what ltdask needs and a lent GPU
# machine's image lacks (it has numpy, numba, scipy, xarray, cupy, h5py, click, tqdm, ...,
# but not dask, distributed, zarr, sparse, sparseconverter; it has no network), into .whl/
# of the checkout that the device tool sends. benchmarks/gpu_session.sh installs them there.
# The versions are this machine's (pip show); Python 3.12, x86-64 manylinux.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> "$(git rev-parse --git-common-dir)/info/exclude"
mkdir -p .whl
packages=(dask distributed partd locket tblib tornado zict importlib_metadata sparse
          sparseconverter zarr numcodecs donfig google-crc32c)
for name in "${packages[@]}"; do
  version=$(python3 -m pip show "$name" 2>/dev/null | sed -n 's/^Version: //p')
  spec="$name${version:+==$version}"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 --platform any -d .whl "$spec"
done
du -sh .whl
