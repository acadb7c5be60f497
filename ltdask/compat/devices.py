"""LiberTEM's device selection (``libertem.utils.devices``, ``libertem.common.backend``):
which devices there are, and whether the runs of this process use the CPU or a CUDA device.

As in LiberTEM, the choice lives in the environment variables ``LIBERTEM_USE_CPU`` and
``LIBERTEM_USE_CUDA`` (at most one set; neither: the CPU). `Context` runs honour it: while
a CUDA device is chosen, a run without ``backends=`` runs with ltdask's CUDA backends
(``("cupy", "cuda")``), on the GPU through CuPy, as LiberTEM's inline executor does after
``set_use_cuda``.
"""

from __future__ import annotations

import functools
import importlib.util
import os

__all__ = [
    "detect",
    "get_device_class",
    "get_use_cpu",
    "get_use_cuda",
    "has_cupy",
    "run_backends",
    "set_use_cpu",
    "set_use_cuda",
]

_CUDA = "LIBERTEM_USE_CUDA"
_CPU = "LIBERTEM_USE_CPU"


@functools.cache
def has_cupy() -> bool:
    """Whether CuPy imports and can make an array on a GPU."""
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        import cupy

        cupy.zeros((1,)) + 1
    except Exception:
        return False
    return True


def detect() -> dict:
    """The devices of this machine: ``{"cpus": [0, ..., cores - 1], "cudas": [device ids],
    "has_cupy": bool}`` (physical cores, as LiberTEM counts them; CUDA devices as CuPy
    sees them, none without CuPy).

    Examples
    --------
    >>> from ltdask.compat.devices import detect
    >>> d = detect()
    >>> sorted(d), len(d["cpus"]) >= 1
    (['cpus', 'cudas', 'has_cupy'], True)
    """
    import psutil

    cores = psutil.cpu_count(logical=False) or os.cpu_count() or 1
    cudas: list[int] = []
    if has_cupy():
        import cupy

        cudas = list(range(cupy.cuda.runtime.getDeviceCount()))
    return {"cpus": list(range(cores)), "cudas": cudas, "has_cupy": has_cupy()}


def get_use_cuda() -> int | None:
    """The CUDA device this process's runs use, or None."""
    value = os.environ.get(_CUDA)
    return None if value is None else int(value)


def set_use_cuda(cuda_device: int) -> None:
    """Use the CUDA device `cuda_device` (and not the CPU) for this process's runs."""
    os.environ[_CUDA] = str(int(cuda_device))
    os.environ.pop(_CPU, None)


def get_use_cpu() -> int | None:
    """The CPU id (0 when nothing was chosen), or None when a CUDA device is chosen."""
    value = os.environ.get(_CPU)
    if value is not None:
        return int(value)
    return 0 if get_use_cuda() is None else None


def set_use_cpu(cpu: int) -> None:
    """Use the CPU (and no CUDA device) for this process's runs; the id is not pinned."""
    os.environ.pop(_CUDA, None)
    os.environ[_CPU] = str(int(cpu))


def get_device_class() -> str:
    """``"cuda"`` or ``"cpu"``: what this process's runs use."""
    if os.environ.get(_CPU) is not None and os.environ.get(_CUDA) is not None:
        raise RuntimeError(f"both {_CPU} and {_CUDA} are set; set at most one")
    return "cuda" if get_use_cuda() is not None else "cpu"


def run_backends(backends):
    """The ``backends`` of a `Context` run: as given, or ltdask's CUDA backends while a
    CUDA device is chosen (`set_use_cuda`)."""
    if backends is not None or get_device_class() == "cpu":
        return backends
    return ("cupy", "cuda")
