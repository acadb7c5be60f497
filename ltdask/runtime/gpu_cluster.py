"""Local `distributed` clusters of GPU and CPU workers (``Context.make_with("dask",
gpus=...)``, ``ltdask run --gpus``): one worker per GPU, with a ``GPU`` resource and
``CUDA_VISIBLE_DEVICES`` naming its device, and CPU workers beside them (one thread each,
as LiberTEM's). Runs place their partitions on them by their UDFs' backends (see
`ltdask.udf.backends.plan_backends`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

from ltdask.exceptions import ExecutorSpecException


def device_count(where: str, gpus: str) -> int:
    """The CUDA devices CuPy sees; an `ExecutorSpecException` in the caller's terms
    (`where`, and `gpus` as the caller wrote it) where CuPy is not installed or sees none."""
    if importlib.util.find_spec("cupy") is None:
        raise ExecutorSpecException(
            f"{where}: {gpus} asks for GPU workers, but CuPy is not installed; "
            "install it for your CUDA version (pip install 'ltdask[gpu]', or cupy-cuda13x)"
        )
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception as e:  # (no driver: cupy imports, CUDA calls fail)
        raise ExecutorSpecException(
            f"{where}: {gpus} asks for GPU workers, but CuPy finds no CUDA device "
            f"here ({type(e).__name__}: {e})"
        ) from None


def gpu_ids(gpus, where: str = "Context.make_with", given: str | None = None) -> list[int]:
    """The device ids `gpus` names, as LiberTEM takes it: a count (the first devices) or a
    list of device ids (one worker each; an id given twice, two workers on that device).
    Checked against the devices CuPy sees; errors name `where` and `given` (how the caller
    wrote `gpus`; default ``gpus=...``).

    Examples
    --------
    >>> from ltdask.runtime.gpu_cluster import gpu_ids
    >>> gpu_ids(0), gpu_ids([])
    ([], [])
    """
    given = f"gpus={gpus!r}" if given is None else given
    if isinstance(gpus, bool) or not isinstance(gpus, int | Sequence) or isinstance(gpus, str):
        raise ExecutorSpecException(
            f"{where}: {given}; expected a number of GPUs or a list of device ids"
        )
    ids = list(range(gpus)) if isinstance(gpus, int) else list(gpus)
    bad = [i for i in ids if isinstance(i, bool) or not isinstance(i, int) or i < 0]
    if (isinstance(gpus, int) and gpus < 0) or bad:
        raise ExecutorSpecException(
            f"{where}: {given}; expected a number of GPUs (0 or more) or a list of "
            "device ids (0, 1, ...)"
        )
    if not ids:
        return []
    count = device_count(where, given)
    missing = sorted({i for i in ids if i >= count})
    if missing:
        have = f"ids 0 to {count - 1}" if count else "none"
        raise ExecutorSpecException(
            f"{where}: {given} asks for GPU {missing[0]}, but CuPy sees {count} CUDA "
            f"device(s) here ({have}); ask for fewer"
        )
    return ids


def worker_specs(
    cpus: int, gpus: Sequence[int], processes: bool = True, settings: dict | None = None
) -> dict:
    """``SpecCluster`` workers: `cpus` CPU workers and a GPU worker per id of `gpus`, one
    thread each; each worker process's memory limit its share of this machine's. A GPU
    worker has the resource ``GPU=1`` and, as a process (`processes`), sees only its device
    (``CUDA_VISIBLE_DEVICES``). `settings`: ``env`` and ``preload`` of every worker
    process (`ltdask.compat.alias.worker_settings`)."""
    from distributed import Nanny, Worker
    from distributed.system import MEMORY_LIMIT

    cls = Nanny if processes else Worker
    share = MEMORY_LIMIT // max(1, cpus + len(gpus))
    common: dict = {"nthreads": 1}
    settings = (settings or {}) if processes else {}
    if processes:
        common["memory_limit"] = share
        if "preload" in settings:
            common["preload"] = settings["preload"]
    specs = {}
    for i in range(cpus):
        options = {**common, "env": dict(settings.get("env", {}))} if processes else common
        specs[f"cpu-{i}"] = {"cls": cls, "options": options}
    for n, device in enumerate(gpus):
        options = {**common, "resources": {"GPU": 1}}
        if processes:
            options["env"] = {**settings.get("env", {}), "CUDA_VISIBLE_DEVICES": str(device)}
        specs[f"gpu-{n}-cuda{device}"] = {"cls": cls, "options": options}
    return specs


def start_local(
    cpus: int, gpus: Sequence[int], processes: bool = True, settings: dict | None = None
):
    """A `distributed.Client` (not the default one) of a new local cluster of `cpus` CPU
    workers and one worker per GPU id of `gpus` (see `worker_specs`); closing the client's
    cluster stops it."""
    from distributed import Client, Scheduler, SpecCluster

    if cpus < 0 or cpus + len(gpus) < 1:
        raise ExecutorSpecException(
            f"a cluster of {cpus} CPU and {len(gpus)} GPU workers has no worker; ask for one"
        )
    scheduler = {"cls": Scheduler, "options": {"dashboard": False, "dashboard_address": ":0"}}
    cluster = SpecCluster(
        workers=worker_specs(cpus, gpus, processes, settings), scheduler=scheduler, silence_logs=40
    )
    return Client(cluster, set_as_default=False)
