"""A new process's ``import ltdask`` and first run import only what they use
(`ltdask.common._lazy`), and every public name still resolves as before."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import types

import dask
import dask.array as da
import numpy as np
import pytest

import ltdask
from ltdask.runtime.schedulers import local_scheduler

#: imported by some uses only, never by ``import ltdask``
NOT_ON_IMPORT = [
    "sparse",
    "scipy.sparse",
    "sparseconverter",
    "matplotlib",
    "distributed",
    "zarr",
    "h5py",
    "hdf5plugin",
    "xarray",
    "dask.array",
    "click",
    "asyncio",
    "ltdask.compat",
    "ltdask.analysis",
    "ltdask.masks",
    "ltdask.views.viz",
    "ltdask.io.formats.raw",
    "ltdask.io.formats.hdf5",
]
#: what a first SumUDF over a raw scan on the default (threaded) scheduler still does not need
NOT_ON_FIRST_RUN = [
    "distributed",
    "matplotlib",
    "zarr",
    "h5py",
    "hdf5plugin",
    "ltdask.compat",
    "ltdask.masks",
    "ltdask.io.formats.mib",
]

PUBLIC_MODULES = ["ltdask", "ltdask.io", "ltdask.udf", "ltdask.masks", "ltdask.compat"]


def _imported_after(code: str, candidates: list[str]) -> list[str]:
    """The `candidates` that a new Python process has imported after running `code`."""
    found = f"[m for m in {candidates!r} if m in sys.modules]"
    check = f"import json, sys\n{code}\nprint(json.dumps({found}))"
    out = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.splitlines()[-1])


def test_import_ltdask_leaves_the_heavy_modules_alone():
    assert _imported_after("import ltdask", NOT_ON_IMPORT) == []


def test_a_first_run_imports_no_distributed_and_no_plotting(tmp_path):
    path = tmp_path / "scan.raw"
    np.arange(4 * 4 * 8 * 8, dtype=np.uint16).tofile(path)
    code = (
        "import ltdask\n"
        f"ds = ltdask.open_raw({str(path)!r}, nav_shape=(4, 4), sig_shape=(8, 8), dtype='uint16')\n"
        "assert float(ltdask.udf.SumUDF().compute(ds)['intensity'].sum()) > 0"
    )
    assert _imported_after(code, NOT_ON_FIRST_RUN) == []


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_name_resolves(module_name):
    module = importlib.import_module(module_name)
    missing = [name for name in module.__all__ if getattr(module, name, None) is None]
    assert missing == []
    assert set(module.__all__) <= set(dir(module))


def test_star_import_gives_every_public_name():
    namespace: dict = {}
    exec("from ltdask import *", namespace)
    assert set(ltdask.__all__) <= set(namespace)


@pytest.mark.parametrize("name", ["analysis", "compat", "masks", "plot", "udf", "viz"])
def test_submodules_are_attributes(name):
    assert isinstance(getattr(ltdask, name), types.ModuleType)


def test_names_shared_with_modules_keep_their_meaning():
    # ``ltdask.live`` is the function, also once its module is imported by name; and
    # ``ltdask.io.formats`` the registry's function, also once a format module is imported
    import ltdask.io.formats.mrc  # noqa: F401
    import ltdask.views.live  # noqa: F401

    assert callable(ltdask.live) and not isinstance(ltdask.live, types.ModuleType)
    assert ltdask.io.formats is ltdask.io.registry.formats
    assert ltdask.open_mrc is sys.modules["ltdask.io.formats.mrc"].open_mrc


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="module 'ltdask' has no attribute 'open_tiff'"):
        ltdask.open_tiff  # noqa: B018
    with pytest.raises(AttributeError, match="module 'ltdask.io' has no attribute 'TiffDataSet'"):
        ltdask.io.TiffDataSet  # noqa: B018


def test_local_scheduler_only_where_no_client_can_be():
    arr = da.ones(3)
    # here distributed may have been imported by other tests: then dask decides
    expected = {} if "distributed" in sys.modules else {"scheduler": arr.__dask_scheduler__}
    assert local_scheduler([arr, np.ones(2)]) == expected
    with dask.config.set(scheduler="sync"):
        assert local_scheduler([arr]) == {}
