"""Shared fixtures: dask schedulers, small partitions, hypothesis settings."""

from __future__ import annotations

import multiprocessing
import os
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from fnmatch import fnmatchcase

import dask
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ltdask",
    max_examples=25,
    # the first example of a run may compile (or load) numba kernels
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "ltdask-thorough", parent=settings.get_profile("ltdask"), max_examples=500
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ltdask"))


# no "compiling kernels" line on stderr, here or in the commands the tests start
# (tests/test_kernel_cache.py checks the notice in processes of its own)
os.environ["DASK_LTDASK__COMPILE_NOTICE"] = "False"
dask.config.set({"ltdask.compile-notice": False})


def pytest_addoption(parser):
    parser.addoption(
        "--bad-input-tables",
        action="store_true",
        help="print the bad-input tables (every malformed input and what it raises) at the "
        "end of each module; they are always written to build/bad-input-tables.txt",
    )


#: the core tier (``pytest`` as the README runs it) takes at most this many cases of each
#: parametrised test, spread over its list (its first and last among them); the others are
#: marked ``slow``, the tier `.ci/run` adds (``pytest -m slow``)
CORE_CASES = 6


def _skip_what_array_expr_cannot(items) -> None:
    """Skip the tests of `helpers.array_expr.ARRAY_EXPR_CANNOT` where dask's array-expr
    engine is on."""
    import dask.array
    from helpers.array_expr import ARRAY_EXPR_CANNOT

    if not getattr(dask.array, "ARRAY_EXPR_ENABLED", False):
        return
    for item in items:
        name = item.nodeid.partition("[")[0]
        reason = ARRAY_EXPR_CANNOT.get(name) or next(
            (why for key, why in ARRAY_EXPR_CANNOT.items() if fnmatchcase(item.nodeid, key)),
            None,
        )
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"dask array-expr: {reason}"))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark the cases of large parametrised tables beyond the core tier's sample ``slow``
    (before ``-m`` deselects by mark); skip what dask's array-expr cannot do yet
    (`helpers.array_expr.ARRAY_EXPR_CANNOT`) where that engine is on."""
    _skip_what_array_expr_cannot(items)
    tables = defaultdict(list)
    for item in items:
        if getattr(item, "callspec", None) is not None and not item.get_closest_marker("slow"):
            tables[(item.path, item.originalname)].append(item)
    for cases in tables.values():
        n = len(cases)
        if n <= CORE_CASES:
            continue
        core = {round(j * (n - 1) / (CORE_CASES - 1)) for j in range(CORE_CASES)}
        for i, item in enumerate(cases):
            if i not in core:
                item.add_marker(pytest.mark.slow)


def pytest_sessionstart(session):
    from helpers.badinput import tables_path

    tables_path(session.config).unlink(missing_ok=True)


def pytest_terminal_summary(terminalreporter, config):
    from helpers.badinput import TABLES_FILE, tables_path

    if tables_path(config).exists() and not config.getoption("bad_input_tables"):
        terminalreporter.write_line(
            f"bad-input tables: {TABLES_FILE} (or pytest --bad-input-tables)"
        )


SCHEDULERS = [
    pytest.param("sync", id="sync"),
    pytest.param("threads", id="threads"),
    pytest.param("processes", id="processes", marks=pytest.mark.slow),
    pytest.param("distributed", id="distributed", marks=pytest.mark.slow),
]


@pytest.fixture(scope="session")
def process_pool():
    """One pool of two spawned worker processes for every test on the processes scheduler."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
        yield pool


@pytest.fixture(scope="session")
def distributed_client():
    """A two-process LocalCluster; not the default client, so other tests do not use it."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
        ) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        yield client
    assert client.status == "closed"


@pytest.fixture(params=SCHEDULERS)
def scheduler(request):
    """Runs the test with the named dask scheduler active (``dask.config`` ``scheduler``)."""
    name = request.param
    if name == "processes":
        config = {"scheduler": "processes", "pool": request.getfixturevalue("process_pool")}
    elif name == "distributed":
        config = {"scheduler": request.getfixturevalue("distributed_client")}
    else:
        config = {"scheduler": name}
    with dask.config.set(config):
        yield name


@pytest.fixture
def small_partitions():
    """Partitions of a few hundred bytes, so that tiny test scans have several of them."""
    with dask.config.set({"ltdask.partition-bytes": 500, "ltdask.min-partitions": 1}):
        yield 500
