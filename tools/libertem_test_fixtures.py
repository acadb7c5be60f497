"""The pytest fixtures LiberTEM 0.16's own tests ask for, made with ltdask through the alias.

A pytest plugin (``-p libertem_test_fixtures``) that `run_libertem_tests.py` uses in place
of LiberTEM's root ``conftest.py``: that one imports LiberTEM internals ltdask has no
counterpart for (its web server, tracing, the dataset classes' IO backends) and builds its
datasets from LiberTEM's dataset classes. The fixtures here give the same data, shapes and
executors, made the way a LiberTEM user would make them: ``Context.load``, the executor
classes and ``MemoryDataSet`` from ``libertem.*`` (ltdask, through the alias).

Only the fixtures that the test paths of `run_libertem_tests.py` use are here. LiberTEM's
settings that ltdask does not take are left out: ``main_process_gpu`` (ltdask runs on a
GPU where a run's backends ask for one), ``set_num_cores`` (ltdask sizes partitions
itself) and the IO backend (``io_backend=MMapBackend()``: ltdask reads raw files with
memory maps anyway).

So that each test counts for what it uses (not for what its module imports), a LiberTEM
name or module ltdask has no counterpart for imports here as a placeholder that raises
ltdask's `NotInLtdaskError` when a test calls it or makes an instance of a class derived
from it, and `AttributeError` for its attributes, instead of failing the whole module's
collection (LiberTEM's ``tests/utils.py`` and ``test_simple_udf.py`` define classes
derived from its IO backend and raw dataset classes at module level).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

import numpy as np
import pytest

import ltdask  # noqa: F401  (turns the alias on: LTDASK_ALIAS_LIBERTEM=1)
from ltdask.compat.alias import LIBERTEM_MODULES, REMOVED_MODULES, AliasModule, NotInLtdaskError


class _Absent:
    """A LiberTEM name that ltdask has no counterpart for; raises where it is used."""

    def __init__(self, name: str) -> None:
        self._name = name

    def _refuse(self, *args, **kwargs):
        raise NotInLtdaskError(
            f"{self._name} is not in ltdask (run_libertem_tests.py's placeholder for it)"
        )

    __call__ = _refuse

    def __mro_entries__(self, bases):
        """A subclass of it can be defined; making an instance raises."""
        name, refuse = self._name, self._refuse

        class AbsentBase:
            def __init_subclass__(cls, **kwargs):
                pass

            def __init__(self, *args, **kwargs):
                refuse()

        AbsentBase.__qualname__ = AbsentBase.__name__ = name.rsplit(".", 1)[-1]
        return (AbsentBase,)

    def __getattr__(self, attribute: str):
        raise AttributeError(f"{self._name}.{attribute}: {self._name} is not in ltdask")

    def __repr__(self) -> str:
        return f"<{self._name}: not in ltdask>"


class _AbsentModule(types.ModuleType):
    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Absent(f"{self.__name__}.{name}")


class _AbsentFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``libertem.*`` modules that `LIBERTEM_MODULES` lacks, as `_AbsentModule` s (not
    those LiberTEM removed: their import raises LiberTEM's message, `REMOVED_MODULES`)."""

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("libertem.") or fullname in LIBERTEM_MODULES:
            return None
        if fullname in REMOVED_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        return _AbsentModule(spec.name)

    def exec_module(self, module) -> None:
        module.__path__ = []


def _absent_names_too(getattr_):
    def __getattr__(self, name):  # noqa: N807
        try:
            return getattr_(self, name)
        except AttributeError:
            if name.startswith("__") and name.endswith("__"):
                raise
            return _Absent(f"{self.__name__}.{name}")

    return __getattr__


sys.meta_path.insert(0, _AbsentFinder())
AliasModule.__getattr__ = _absent_names_too(AliasModule.__getattr__)  # type: ignore[method-assign]

import libertem.api as lt  # noqa: E402
from libertem.executor.concurrent import ConcurrentJobExecutor  # noqa: E402
from libertem.executor.dask import DaskJobExecutor  # noqa: E402
from libertem.executor.delayed import DelayedJobExecutor  # noqa: E402
from libertem.executor.inline import InlineJobExecutor  # noqa: E402
from libertem.io.dataset.memory import MemoryDataSet  # noqa: E402
from libertem.viz.base import Dummy2DPlot  # noqa: E402


def _random(shape, dtype="float32") -> np.ndarray:
    """Random test data (LiberTEM's ``utils._mk_random`` for dense float data)."""
    return np.random.random(shape).astype(dtype)


# executors and contexts


@pytest.fixture
def inline_executor():
    return InlineJobExecutor(debug=True, inline_threads=2)


@pytest.fixture
def inline_executor_fast():
    return InlineJobExecutor(debug=False, inline_threads=2)


@pytest.fixture
def lt_ctx(inline_executor):
    return lt.Context(executor=inline_executor, plot_class=Dummy2DPlot)


@pytest.fixture
def lt_ctx_fast(inline_executor_fast):
    return lt.Context(executor=inline_executor_fast, plot_class=Dummy2DPlot)


@pytest.fixture
def delayed_executor():
    return DelayedJobExecutor()


@pytest.fixture
def delayed_ctx(delayed_executor):
    return lt.Context(executor=delayed_executor, plot_class=Dummy2DPlot)


@pytest.fixture
def concurrent_executor():
    executor = ConcurrentJobExecutor.make_local()
    yield executor
    executor.close()


@pytest.fixture
def concurrent_ctx(concurrent_executor):
    return lt.Context(executor=concurrent_executor)


@pytest.fixture(scope="session")
def pipelined_ctx():
    with lt.Context.make_with("pipelined", cpus=2) as ctx:
        yield ctx


@pytest.fixture(scope="session")
def local_cluster_url():
    """A local dask cluster of two single-thread worker processes (with the alias on)."""
    from distributed import LocalCluster

    from ltdask.compat.alias import worker_settings

    settings = worker_settings()
    with LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        env=settings.get("env", {}),
        preload=settings.get("preload", []),
    ) as cluster:
        yield cluster.scheduler_address


@pytest.fixture
def dask_executor(local_cluster_url):
    executor = DaskJobExecutor.connect(local_cluster_url)
    yield executor
    executor.close()


@pytest.fixture
def local_cluster_ctx(dask_executor):
    return lt.Context(executor=dask_executor)


# datasets


@pytest.fixture(scope="session")
def default_raw_data():
    return _random((16, 16, 128, 128))


@pytest.fixture(scope="session")
def default_raw_file(tmp_path_factory, default_raw_data):
    path = tmp_path_factory.mktemp("data") / "raw-test-default"
    default_raw_data.tofile(path)
    return path


@pytest.fixture(scope="session")
def default_raw(default_raw_file):
    ctx = lt.Context(executor=InlineJobExecutor())
    return ctx.load(
        "raw", path=str(default_raw_file), dtype="float32", nav_shape=(16, 16), sig_shape=(128, 128)
    )


@pytest.fixture
def ds_complex():
    values = [0, 1, 0 + 1j, 0 - 1j, 1 + 1j, 1 - 1j]
    data = np.random.choice(a=values, size=(16, 16, 16, 16)).astype("complex64")
    return MemoryDataSet(data=data, tileshape=(1, 16, 16), num_partitions=2, sig_dims=2)


def _hdf5_file(tmp_path_factory, name: str, data: np.ndarray) -> str:
    import h5py

    path = tmp_path_factory.mktemp("data") / name
    with h5py.File(path, "w") as f:
        f.create_dataset("data", data=data)
    return str(path)


@pytest.fixture(scope="session")
def hdf5_4d_data():
    return np.random.random((2, 10, 26, 26)).astype("float32")


@pytest.fixture
def hdf5_ds_1(tmp_path_factory):
    path = _hdf5_file(tmp_path_factory, "hdf5-test.h5", np.ones((5, 5, 16, 16)))
    return lt.Context(executor=InlineJobExecutor()).load("hdf5", path=path, ds_path="data")


@pytest.fixture(scope="session")
def hdf5_same_data_4d(tmp_path_factory, hdf5_4d_data):
    import h5py

    path = _hdf5_file(tmp_path_factory, "hdf5-test-reshape-4d.h5", hdf5_4d_data)
    with h5py.File(path, "r") as f:
        yield f


@pytest.fixture(scope="session")
def raw_same_dataset_4d(tmp_path_factory, hdf5_4d_data):
    path = tmp_path_factory.mktemp("data") / "raw-same-data-4d"
    hdf5_4d_data.tofile(path)
    ctx = lt.Context(executor=InlineJobExecutor())
    return ctx.load("raw", path=str(path), nav_shape=(2, 10), dtype="float32", sig_shape=(26, 26))


@pytest.fixture(scope="session")
def npy_8x8x8x8_ds(tmp_path_factory):
    path = tmp_path_factory.mktemp("data_npy") / "8x8x8x8.npy"
    np.save(path, _random((8, 8, 8, 8)))
    return lt.Context.make_with("inline").load("npy", path=str(path))
