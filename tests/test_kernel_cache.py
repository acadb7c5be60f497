"""ltdask's numba kernels are cached, announce their first compilation once, and
``ltdask.warmup`` fills the cache so that later processes compile nothing."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ltdask
from ltdask.runtime import kernel_cache

PACKAGE = Path(ltdask.__file__).parent
#: numba's decorators that compile (and so take ``cache=``)
COMPILERS = {"jit", "njit", "vectorize", "guvectorize", "generated_jit", "cfunc", "stencil"}


def _numba_calls(tree: ast.AST, numba_names: set[str]):
    """Every use of a numba compiler in `tree`: ``numba.njit(...)``, ``@numba.njit``,
    ``njit(...)`` imported from numba; each as (node, whether it is a call)."""
    for node in ast.walk(tree):
        target = node.func if isinstance(node, ast.Call) else node
        if isinstance(target, ast.Attribute) and target.attr in COMPILERS:
            base = target.value
            if isinstance(base, ast.Name) and base.id == "numba":
                yield node, isinstance(node, ast.Call)
        elif isinstance(target, ast.Name) and target.id in numba_names:
            yield node, isinstance(node, ast.Call)


def _uncached(source: str) -> list[int]:
    tree = ast.parse(source)
    names = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("numba")
        for alias in node.names
        if alias.name in COMPILERS
    }
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    bad = []
    for node, is_call in _numba_calls(tree, names):
        if not is_call and id(node) in called:
            continue  # the ``numba.njit`` of ``numba.njit(...)``: checked as the call
        cached = is_call and any(
            k.arg == "cache" and isinstance(k.value, ast.Constant) and k.value.value is True
            for k in node.keywords  # type: ignore[attr-defined]
        )
        if not cached:
            bad.append(node.lineno)
    return bad


def test_the_source_check_finds_kernels_without_cache():
    source = """
import numba
from numba import njit as nj, vectorize
@numba.njit
def a(): pass
@numba.njit(nogil=True)
def b(): pass
@nj(cache=False)
def c(): pass
d = vectorize(["f8(f8)"])(lambda x: x)
@numba.njit(nogil=True, cache=True)
def e(): pass
"""
    assert _uncached(source) == [4, 6, 8, 10]


def test_every_kernel_is_cached():
    """Every numba decorator in the package (a module's kernels, or ones a factory makes)
    says ``cache=True``: a new kernel without it fails here."""
    bad = {
        str(path.relative_to(PACKAGE.parent)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := _uncached(path.read_text()))
    }
    assert bad == {}


def test_loaded_kernels_have_a_cache():
    """The compiled dispatchers themselves: none has numba's NullCache."""
    import importlib
    import pkgutil

    from numba.core.caching import NullCache
    from numba.core.dispatcher import Dispatcher

    kernels = []
    for info in pkgutil.walk_packages([str(PACKAGE)], "ltdask."):
        if ".cli" in info.name:
            continue
        module = importlib.import_module(info.name)
        kernels += [
            v
            for v in vars(module).values()
            if isinstance(v, Dispatcher) and v.__module__ == info.name
        ]
    assert len(kernels) > 20
    assert [k.py_func.__qualname__ for k in kernels if isinstance(k._cache, NullCache)] == []


# -- the first-compile notice, in new processes with their own cache ---------------------------
COMPILE_ONE = """
import numpy as np
from ltdask.runtime import kernel_cache
from ltdask.io import read_ranges
read_ranges.tile_table(5, 2, 1)
read_ranges.tile_table(np.int32(5), 2, 1)  # a second signature: compiled, not announced
print(kernel_cache.compiled_kernels(), kernel_cache.cache_location())
"""


def _python(code: str, cache: Path, **env) -> subprocess.CompletedProcess:
    environ = {**os.environ, "NUMBA_CACHE_DIR": str(cache), **env}
    environ.pop("DASK_LTDASK__COMPILE_NOTICE", None)
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], env=environ, capture_output=True, text=True, timeout=120
    )


def test_notice_once_on_an_empty_cache_none_on_a_warm_one(tmp_path):
    cache = tmp_path / "numba-cache"
    first = _python(COMPILE_ONE, cache)
    assert first.returncode == 0, first.stderr
    compiled, where = first.stdout.split()
    assert int(compiled) >= 2
    # NUMBA_CACHE_DIR, as the user set it, is where the kernels went
    assert where == str(cache)
    assert list(cache.rglob("*.nbi")) and list(cache.rglob("*.nbc"))
    lines = first.stderr.splitlines()
    assert lines == [f"ltdask: compiling kernels, once: ~5 s (numba cache: {cache})"]

    again = _python(COMPILE_ONE, cache)
    assert again.returncode == 0, again.stderr
    assert again.stdout.split()[0] == "0"
    assert again.stderr == ""


def test_notice_silenced_by_the_setting(tmp_path):
    proc = _python(COMPILE_ONE, tmp_path / "c", DASK_LTDASK__COMPILE_NOTICE="False")
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout.split()[0]) >= 2
    assert proc.stderr == ""


def test_user_kernels_are_not_announced(tmp_path):
    code = "import ltdask, numba\nf = numba.njit(lambda x: x + 1)\nprint(f(1))"
    proc = _python(code, tmp_path / "c")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "2\n", "")


# -- warmup ------------------------------------------------------------------------------------
REALISTIC_RUN = """
import numpy as np, ltdask
from ltdask import masks
from ltdask.runtime.kernel_cache import compiled_kernels
from ltdask.udf import ApplyMasksUDF, CoMUDF, StdDevUDF, SumSigUDF, SumUDF
nav, sig = (16, 24), (64, 64)
roi = np.zeros(nav, bool); roi[3:11, 1::3] = True
dark = ltdask.CorrectionSet(dark=np.ones(sig))
for dtype in ("uint8", "uint16", "uint32", "float32"):
    data = (np.random.default_rng(0).random((*nav, *sig)) * 50).astype(dtype)
    data.tofile(f"scan-{dtype}.raw"); np.save(f"scan-{dtype}.npy", data)
    for ds in (ltdask.open_raw(f"scan-{dtype}.raw", nav_shape=nav, sig_shape=sig, dtype=dtype),
               ltdask.open_npy(f"scan-{dtype}.npy")):
        udfs = [SumUDF(), SumSigUDF(), StdDevUDF(), CoMUDF.with_params(cy=32, cx=30, r=9),
                ApplyMasksUDF([lambda: masks.circular(30, 32, 64, 64, 8)])]
        for udf in udfs:
            udf.compute(ds); udf.compute(ds, roi=roi)
        ltdask.compute(ds, udfs); ltdask.compute(ds, [SumUDF()], corrections=dark)
print(compiled_kernels())
"""


@pytest.mark.slow
def test_after_warmup_a_new_process_compiles_nothing(tmp_path):
    """``ltdask warmup`` (the command) compiles what runs of the shipped analyses over scans
    of every warmed dtype need, at sizes that read in several tiles, with and without ROI."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    warm = subprocess.run(
        [sys.executable, "-m", "ltdask.cli", "warmup"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert warm.returncode == 0, warm.stderr
    assert "uint8, uint16, uint32, float32" in warm.stdout
    run = subprocess.run(
        [sys.executable, "-c", REALISTIC_RUN],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "0"


@pytest.mark.slow  # a LocalCluster
def test_warmup_on_every_worker_of_a_cluster():
    """``client.run(ltdask.warmup)``, as the docs tell cluster users."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        reports = client.run(ltdask.warmup, dtypes=["uint16"])
    assert len(reports) == 1
    (report,) = reports.values()
    assert report["dtypes"] == ["uint16"]
    assert report["compiled"] >= 0 and report["seconds"] > 0
    assert report["cache"] == kernel_cache.cache_location()


def test_warmup_refuses_a_bad_dtype():
    with pytest.raises(TypeError, match="notadtype"):
        ltdask.warmup(dtypes=["notadtype"])


def test_warmup_counts_only_what_it_compiled():
    """A second warmup in one process loads or reuses everything: nothing compiled."""
    ltdask.warmup(dtypes=["uint16"])
    assert ltdask.warmup(dtypes=[np.uint16])["compiled"] == 0
