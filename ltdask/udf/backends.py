"""Array backends: which array type each UDF of a run gets its tiles in.

A dataset delivers tiles natively in some array types (``DataSet.array_backends``: dense
formats numpy, raw CSR scans ``scipy.sparse.csr_matrix`` too); every UDF says which types it
processes, in order of preference (``UDF.get_backends()``); a run may restrict them
(``backends=``). `plan_backends` settles, once per run, the device class, the type the
dataset delivers and the type each UDF gets, with the least conversion work (costs from
``sparseconverter``, the converter library LiberTEM's authors maintain, which also converts
the tiles). :func:`ltdask.explain` shows the plan.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ltdask.exceptions import UDFError
from ltdask.io.checks import check_fits_memory
from ltdask.udf.interface import UDFBase

NUMPY = UDFBase.BACKEND_NUMPY
CUDA = UDFBase.BACKEND_CUDA
CUPY = UDFBase.BACKEND_CUPY
SCIPY_CSR = UDFBase.BACKEND_SCIPY_CSR
KNOWN = UDFBase.CPU_BACKENDS | UDFBase.CUDA_BACKENDS
#: what UDFs see: 2-D backends get ``(frames, pixels)`` tiles
D2 = UDFBase.D2_BACKENDS
#: the CSR form that frames of a (not subscriptable) COO matrix are cut from
_COO_AS_CSR = {
    UDFBase.BACKEND_SCIPY_COO: SCIPY_CSR,
    UDFBase.BACKEND_CUPY_SCIPY_COO: UDFBase.BACKEND_CUPY_SCIPY_CSR,
}

#: per position in a UDF's list of preferences, added to the conversion cost: a later
#: choice must save more than this to be taken (sparseconverter's costs are seconds per
#: reference conversion, ~1e-5 for a view up to ~0.1 for densifying)
PREFERENCE_STEP = 1e-3


def device_class(backend: str) -> str:
    """``"cpu"`` or ``"cuda"`` (CuPy backends and ``cuda`` alike)."""
    return "cuda" if backend in UDFBase.CUDA_BACKENDS else "cpu"


def gpu_available() -> bool:
    """Whether the run's scheduler can use a CUDA device: on a `distributed` cluster, a
    worker started with a ``GPU`` resource (``dask worker --resources GPU=1``, or
    dask-cuda's workers); on the local schedulers, CuPy finding a device here."""
    from ltdask.runtime.schedulers import cluster_client, cluster_workers

    client = cluster_client()
    if client is not None:
        return any(w.get("resources", {}).get("GPU", 0) > 0 for w in cluster_workers(client))
    return local_gpu()


def _target_gpu(target) -> bool:
    """Whether the scheduler `target` (a `ltdask.runtime.schedulers.RunTarget`) can use a
    CUDA device: a GPU worker on a cluster, CuPy finding a device here otherwise (or the
    test setting ``ltdask.device.stand-in``, see `ltdask.udf.device`)."""
    from ltdask.udf.device import stand_in

    return target.gpu_workers if target.on_cluster else local_gpu() or stand_in()


def worker_has_gpu() -> bool:
    """Whether this task runs on a `distributed` worker with a ``GPU`` resource."""
    if "distributed" not in sys.modules:
        return False
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:  # (not in a worker)
        return False
    return worker.state.total_resources.get("GPU", 0) > 0


def on_cluster() -> bool:
    """Whether computations go to a `distributed` Client (the configured scheduler or the
    default Client)."""
    from ltdask.runtime.schedulers import cluster_client

    return cluster_client() is not None


@functools.cache
def local_gpu() -> bool:
    """Whether this process can use a CUDA device through CuPy (never imports cupy where it
    is not installed)."""
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def normalize_restriction(backends) -> frozenset[str] | None:
    """`backends=` of a run as a set of backend names (None: no restriction)."""
    if backends is None:
        return None
    given = (backends,) if isinstance(backends, str) else tuple(backends)
    unknown = [b for b in given if b not in KNOWN]
    if unknown or not given:
        raise UDFError(
            f"backends={backends!r}: unknown array backend {unknown[0]!r}; expected names "
            f"from UDF.BACKEND_* ({', '.join(sorted(KNOWN))})"
            if unknown
            else "backends=(): name at least one array backend"
        )
    return frozenset(given)


def accepted(udf: UDFBase, restriction: frozenset[str] | None) -> tuple[str, ...]:
    """`udf`'s backends in its order of preference, within `restriction`."""
    name = type(udf).__name__
    raw = udf.get_backends()
    expected = "; return a tuple of names from UDF.BACKEND_* in order of preference"
    try:
        listed = (raw,) if isinstance(raw, str) else tuple(raw)
    except TypeError:  # (None, a number: a method that forgot its return)
        raise UDFError(f"{name}.get_backends() returned {raw!r}" + expected) from None
    unknown = [b for b in listed if not isinstance(b, str) or b not in KNOWN]
    if unknown or not listed:
        raise UDFError(
            f"{name}.get_backends() returned {raw!r}: "
            + (f"unknown array backend {unknown[0]!r}" if unknown else "no backend")
            + expected
        )
    out = tuple(dict.fromkeys(b for b in listed if restriction is None or b in restriction))
    if not out:
        raise UDFError(
            f"{name} processes {listed}, but the run allows only backends="
            f"{tuple(sorted(restriction or ()))}"
        )
    return out


@dataclass(frozen=True)
class GpuRole:
    """How the partitions of a run that land on GPU workers run, on a cluster of GPU and
    CPU workers where every UDF takes a CPU and a CUDA backend: with `plan` (device
    ``"cuda"``) and `path` (the device tile path, `ltdask.udf.paths.device`; set by the
    planner once the run's own path is known)."""

    plan: BackendPlan
    path: Any = None


@dataclass(frozen=True)
class BackendPlan:
    """The array types of a run: what the dataset delivers and what each UDF gets."""

    device: str
    #: what the dataset delivers (one of its ``array_backends``)
    source: str
    #: per UDF of the run, in order: the type its tiles have
    targets: tuple[str, ...]
    #: per UDF: the backends it accepted (after the run's restriction)
    choices: tuple[tuple[str, ...], ...]
    #: on a cluster of GPU and CPU workers: how partitions on GPU workers run (the plan's
    #: own device is then the CPU, and the partition tasks go to any worker)
    gpu_role: GpuRole | None = None

    @property
    def dense_source(self) -> bool:
        return self.source in (NUMPY, CUDA, CUPY)

    def describe(self, names: Sequence[str]) -> str:
        """The plan in words, one line per UDF (for :func:`ltdask.explain`)."""
        lines = [f"device: {self.device}; the dataset delivers {self.source} tiles"]
        for name, target, choice in zip(names, self.targets, self.choices, strict=True):
            how = "as read" if target == self.source else f"converted from {self.source}"
            lines.append(f"{name}: {target} ({how}; accepts {', '.join(choice)})")
        if self.gpu_role is not None and self.gpu_role.path is not None:
            targets = ", ".join(self.gpu_role.plan.targets)
            lines.append(f"on GPU workers: {targets}, tiles staged to the device")
        return "\n".join(lines)


def plan_backends(
    sources: Iterable[str],
    udfs: Sequence[UDFBase],
    restriction=None,
    gpu: bool | None = None,
    target=None,
) -> BackendPlan:
    """The cheapest plan for `udfs` on a dataset that delivers `sources` (the array types
    it can deliver, the one it stores first).

    The device class is the CPU when every UDF accepts a CPU backend, unless a GPU is
    usable where the run goes (`gpu`; by default: on a cluster `target`, a worker has a
    ``GPU`` resource; else CuPy finds a device here) and every UDF accepts a CUDA backend
    and one prefers it; a UDF that accepts only CUDA backends needs a GPU. On a cluster
    `target` with GPU and CPU workers, where every UDF takes a backend of each, the plan
    is the CPU's with a `GpuRole` for the partitions that land on GPU workers."""
    sources = tuple(sources)
    restriction = normalize_restriction(restriction)
    choices = tuple(accepted(u, restriction) for u in udfs)
    cluster = on_cluster() if target is None else target.on_cluster
    if gpu is None:
        gpu = gpu_available() if target is None else _target_gpu(target)
    on_cpu = [[b for b in c if device_class(b) == "cpu"] for c in choices]
    on_gpu = [[b for b in c if device_class(b) == "cuda"] for c in choices]
    prefer_gpu = any(c[0] in UDFBase.CUDA_BACKENDS for c in choices)
    role = None
    if target is not None and target.on_cluster and target.gpu_workers and target.cpu_workers:
        if all(on_gpu) and all(on_cpu):
            role = GpuRole(_cheapest("cuda", on_gpu, sources))
            prefer_gpu = False  # (the CPU's plan, with the GPU role beside it)
    if gpu and all(on_gpu) and (prefer_gpu or not all(on_cpu)):
        device, usable = "cuda", on_gpu
    elif all(on_cpu):
        device, usable = "cpu", on_cpu
    else:
        names = [type(u).__name__ for u, c in zip(udfs, on_cpu, strict=True) if not c]
        raise UDFError(
            f"{', '.join(names)} can only run on a CUDA device (get_backends: "
            f"{choices[[type(u).__name__ for u in udfs].index(names[0])]}), and "
            + (
                "the other UDFs of the run cannot"
                if gpu and not all(on_gpu)
                else (
                    "no worker of the cluster has a GPU resource (start GPU workers with "
                    "`dask worker --resources GPU=1` or dask-cuda)"
                    if cluster
                    else "this process has none (cupy is not installed or finds no GPU)"
                )
                + ", or allow a CPU backend"
            )
        )

    plan = _cheapest(device, usable, sources)
    return plan if role is None else dataclasses.replace(plan, gpu_role=role)


def _cheapest(device: str, usable, sources: tuple[str, ...]) -> BackendPlan:
    """The plan on `device` with the least conversion work, each UDF taking one of its
    `usable` backends, the dataset delivering one of `sources`."""
    from sparseconverter import conversion_cost

    # the dataset's first array type is what it stores; another costs it a conversion
    best = None
    for source in sources:
        total = conversion_cost(sources[0], source) if source != sources[0] else 0.0
        targets = []
        for options in usable:
            cost, target = min(
                (conversion_cost(source, b) + i * PREFERENCE_STEP, b) for i, b in enumerate(options)
            )
            total += cost
            targets.append(target)
        if best is None or total < best[0]:
            best = (total, source, tuple(targets))
    assert best is not None
    return BackendPlan(device, best[1], best[2], tuple(tuple(u) for u in usable))


def for_this_worker(context):
    """The run's context (`ltdask.udf.bind.RunContext`) as a partition task runs it where it
    is: on a GPU worker of a run with a GPU role, that role's plan and path; with the
    stand-in device (``ltdask.device.stand-in``, tests without a GPU), CuPy backends as
    numpy."""
    from ltdask.udf.device import stand_in

    plan = context.backends
    if plan is None:
        return context
    if plan.gpu_role is not None and plan.gpu_role.path is not None and worker_has_gpu():
        plan = plan.gpu_role.plan
        context = dataclasses.replace(context, backends=plan, path=context.backends.gpu_role.path)
    if plan.device == "cuda" and stand_in():
        targets = tuple(NUMPY if t in UDFBase.CUPY_BACKENDS else t for t in plan.targets)
        context = dataclasses.replace(context, backends=dataclasses.replace(plan, targets=targets))
    return context


def convert(tile, target: str, sig_shape: tuple[int, ...]):
    """`tile` (``(n, *sig_shape)`` dense or ``(n, pixels)`` 2-D sparse) as `target`: 2-D
    backends get ``(n, pixels)``, the others ``(n, *sig_shape)``."""
    from sparseconverter import for_backend

    n = tile.shape[0]
    flat = (n, -1)
    if target == CUDA:
        target = NUMPY  # `cuda` UDFs get host arrays and move them themselves
    if target in D2:
        if tile.ndim != 2:
            tile = tile.reshape(flat)
        return for_backend(tile, target)
    if hasattr(tile, "nnz"):  # sparse, made dense
        check_fits_memory((n, *sig_shape), tile.dtype, "sparse tiles made dense for a UDF")
    out = for_backend(tile, target)
    if out.shape != (n, *sig_shape):
        out = out.reshape((n, *sig_shape))
    return out


def to_host(arr):
    """A CuPy array (or a cupyx sparse matrix) as numpy; numpy passes through."""
    if hasattr(arr, "get") and type(arr).__module__.startswith("cup"):
        arr = arr.get()
    return arr


class TileForms:
    """One tile in the array types the UDFs of a run want, each made once (from the tile
    as the dataset delivered it, of type `source`)."""

    def __init__(self, tile, source: str, sig_shape):
        self.tile = tile
        self.source = source
        self.sig_shape = tuple(sig_shape)
        self._forms: dict = {}

    def get(self, target: str):
        if target == self.source:
            return self.tile
        out = self._forms.get(target)
        if out is None:
            out = self._forms[target] = convert(self.tile, target, self.sig_shape)
        return out

    def frame(self, target: str, i: int):
        """Frame `i` as `target`: 2-D backends ``(1, pixels)`` (a nav dim of 1, as
        LiberTEM gives them), the others ``sig_shape``."""
        if target in D2:
            csr = _COO_AS_CSR.get(target)
            if csr is not None:  # (COO matrices are not subscriptable)
                return convert(self.get(csr)[i : i + 1], target, self.sig_shape)
            return self.get(target)[i : i + 1]
        return self.get(target)[i]

    def dense(self):
        """The tile as numpy, ``(n, *sig_shape)``, C-contiguous."""
        import numpy as np

        return np.ascontiguousarray(self.get(NUMPY))


def stages_to_gpu(dataset, udfs, backends, target) -> bool:
    """Whether a run of `udfs` (with ``backends=``) on `dataset` for `target` has this
    process's GPU for its device, every UDF on CuPy: its tiles are staged to the GPU
    (`ltdask.io.partition.for_run` sizes its partitions for that). False where the plan
    fails: the run's own planning then says why."""
    if not udfs or not all(isinstance(u, UDFBase) for u in udfs):
        return False
    try:
        plan = plan_backends(dataset.array_backends, udfs, backends, target=target)
    except UDFError:
        return False
    return plan.device == "cuda" and all(t in UDFBase.CUPY_BACKENDS for t in plan.targets)


def on_device(arrays: dict, specs: dict) -> dict:
    """Buffers declared with ``where="device"`` moved to the GPU (CuPy backends)."""
    import cupy

    return {k: cupy.asarray(a) if specs[k].where == "device" else a for k, a in arrays.items()}
