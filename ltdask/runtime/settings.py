"""ltdask settings, kept in dask's config under the ``ltdask.`` namespace.

=========================  ==========  ==================================================
key                        default     meaning
=========================  ==========  ==================================================
``ltdask.partition-bytes``  ``auto``   the size of a partition (one UDF task, one dask
                                       chunk), counted as float32 pixels whatever the
                                       native dtype. ``auto`` sizes them by what they are
                                       for (`AUTO_PARTITION_BYTES`): UDF runs on the
                                       threaded scheduler 512 MiB (a task costs a thread
                                       about 0.3 ms), on a dask.distributed cluster 1 GiB
                                       (a task costs the scheduler a few ms), on the
                                       synchronous and process schedulers and a
                                       dataset's own partitions (``get_partitions``,
                                       iterated runs, ``to_dask()`` chunks that are
                                       copies) 128 MiB, ``to_dask()`` chunks that are
                                       views of the files 512 MiB. A size: that size for
                                       all of them. Runs take at least two partitions per
                                       thread and at most 1/8 of a thread's share of the
                                       memory (the worker's limit on a cluster). Writing
                                       to Zarr, a rechunk that copies this much or more
                                       warns (PerformanceWarning)
``ltdask.min-partitions``  ``auto``    at least this many partitions where the scan has
                                       the frames (``auto``: one per CPU core of this
                                       machine)
``ltdask.tile-bytes``      ``auto``    tile size the negotiator aims for (``auto``: half
                                       the L3 cache per core, 1 to 8 MiB)
``ltdask.device-tile-      ``32MiB``   tile size of runs whose tiles are staged to a GPU
bytes``                                (all UDFs on CuPy): each tile costs the host a few
                                       launches and waits, so tiles are larger than the
                                       CPU's (on an H200, SumUDF over a page-cached 2 GiB
                                       scan ran 2.3x as fast in 32 MiB tiles as in 8 MiB
                                       ones; 128 MiB ones were no faster)
``ltdask.iter-updates``     10          iterated runs (``ltdask.iter``, ``run_udf_iter``,
                                       live plots) cut the scan into partitions small
                                       enough for at least this many updates (where it has
                                       the frames); ``compute`` and ``lazy`` keep theirs
``ltdask.map-cache-bytes`` ``auto``    memory maps of files kept for reuse in a process,
                                       for files that a second UDF run reads: repeated
                                       runs over page-cached files skip the page faults
                                       (up to 2x faster), but the mapped pages count in
                                       RSS; ``auto``: half the RAM; in a distributed
                                       worker with a memory limit, as many pages as
                                       ``ltdask.worker-map-fraction`` allows; 0: keep none
``ltdask.worker-map-       0.5         in a dask.distributed worker with a memory limit,
fraction``                             kept maps give back their pages (``MADV_DONTNEED``,
                                       least recently used map first) whenever the
                                       worker's RSS -- what distributed's spill, pause
                                       and terminate thresholds measure, and where mapped
                                       file pages count -- is above this fraction of the
                                       limit (at most 0.1 below the worker's spill and
                                       pause fractions); 0: workers keep no maps (unless
                                       ``ltdask.map-cache-bytes`` is a size)
``ltdask.worker-gc-       True        in a dask.distributed worker, ``gc.freeze()``
freeze``                               after its first partition task: full garbage
                                       collections then skip the modules and kernels
                                       loaded so far (60-100 ms each otherwise, about
                                       every other run; see :mod:`ltdask.runtime.worker_gc`)
``ltdask.compile-notice``  True        print one line to stderr when a process first
                                       compiles ltdask's numba kernels (an empty cache;
                                       see :mod:`ltdask.runtime.kernel_cache`); False: silent
``ltdask.acquire-memory``  ``auto``    bytes of frames a live acquisition
                                       (:mod:`ltdask.acquire`) holds in memory while
                                       the compute catches up; further frames go to a
                                       scratch file, none is dropped (``auto``: a
                                       quarter of the RAM)
=========================  ==========  ==================================================

Set them like any dask option: ``dask.config.set({"ltdask.partition-bytes": "256MiB"})``
or the environment variable ``DASK_LTDASK__PARTITION_BYTES=256MiB``.
"""

from __future__ import annotations

import functools
import os
import sys

import dask
import dask.config
from dask.utils import parse_bytes

from ltdask.exceptions import ConfigError

DEFAULTS = {
    "ltdask": {
        "partition-bytes": "auto",
        "min-partitions": "auto",
        "iter-updates": 10,
        "tile-bytes": "auto",
        "device-tile-bytes": "32MiB",
        "map-cache-bytes": "auto",
        "worker-map-fraction": 0.5,
        "worker-gc-freeze": True,
        "compile-notice": True,
        "acquire-memory": "auto",
    }
}

dask.config.update_defaults(DEFAULTS)

MIB = 2**20


def _bytes(value) -> int:
    return int(parse_bytes(value)) if isinstance(value, str) else int(value)


def _setting(key: str, convert, expected: str, minimum: int | None = None):
    """``ltdask.KEY`` converted, or a `ConfigError` naming the setting and what it takes."""
    value = dask.config.get(f"ltdask.{key}")
    try:
        result = convert(value)
    except (TypeError, ValueError, OverflowError):
        result = None
    if result is None or (minimum is not None and result != "auto" and result < minimum):
        raise ConfigError(
            f"the setting ltdask.{key} is {value!r}; expected {expected} (set it with "
            f"dask.config.set({{'ltdask.{key}': ...}}) or DASK_LTDASK__"
            f"{key.upper().replace('-', '_')})"
        )
    return result


def _auto(convert):
    return lambda value: "auto" if value in (None, "auto") else convert(value)


def _integer(value) -> int:
    if isinstance(value, float) and not value.is_integer():
        raise ValueError
    return int(value)


#: the partition sizes of ``ltdask.partition-bytes`` ``auto``, by what the partitions are
#: for. Runs on the threaded scheduler: a SumUDF or StdDevUDF over 2-4 GiB ran 13-15 %
#: faster in 512 MiB partitions than in 128 MiB ones; 1 GiB was faster again, but the pages
#: of the files that the running tasks map count in the RSS, which then grew with the scan
#: (docs/performance.md). On a cluster each task costs the scheduler and the workers a few
#: ms: 1 GiB. A dataset's own partitions stay small enough for iterated runs, for copies in
#: ``to_dask()`` chunks and for processes that each hold one. Views of the page cache
#: cost no memory: large chunks, fewer tasks for dask's reductions.
AUTO_PARTITION_BYTES = {
    "dataset": 128 * MIB,
    "views": 512 * MIB,
    "threads": 512 * MIB,
    "cluster": 1024 * MIB,
}
#: settings that ``ltdask.partition-bytes`` replaced (its ``auto`` rules); a value given
#: to one of them is not read, and says so
RETIRED = ("run-partition-bytes", "cluster-partition-bytes", "view-chunk-partitions")


def partition_bytes(use: str = "dataset") -> int:
    """The partition size for `use` (a key of `AUTO_PARTITION_BYTES`): ``ltdask.partition-
    bytes`` where it is a size, else the ``auto`` size of that use."""
    value = _setting(
        "partition-bytes", _auto(_bytes), "'auto' or a positive size such as '128MiB'", 1
    )
    _warn_retired()
    return AUTO_PARTITION_BYTES[use] if value == "auto" else value


def _warn_retired() -> None:
    for key in RETIRED:
        value = dask.config.get(f"ltdask.{key}", None)
        if value not in (None, "auto") and key not in _WARNED:
            _WARNED.add(key)
            import warnings

            warnings.warn(
                f"the setting ltdask.{key} ({value!r}) is no longer read: "
                "ltdask.partition-bytes sizes every partition ('auto': by scheduler; a "
                "size: that size everywhere)",
                FutureWarning,
                stacklevel=3,
            )


_WARNED: set[str] = set()


def map_cache_bytes() -> int:
    """How many bytes of files `ltdask.io.maps.MapCache` may keep mapped."""
    value = _setting(
        "map-cache-bytes", _auto(_bytes), "'auto', 0 or a size such as '8GiB'", minimum=0
    )
    if value == "auto":
        worker = current_worker()
        if worker is not None and _memory_limit(worker):
            # distributed judges this worker by its RSS, where mapped pages count: the maps
            # are bounded by what they hold resident (`worker_map_budget`), not by file size
            return total_memory() if worker_map_budget() is not None else 0
        return total_memory() // 2
    return value


def _fraction(value) -> float:
    result = float(value)
    if not 0 <= result <= 1:  # also NaN
        raise ValueError
    return result


def worker_map_fraction() -> float:
    return _setting("worker-map-fraction", _fraction, "a fraction from 0 to 1 such as 0.5")


def _flag(value) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ValueError


def worker_gc_freeze() -> bool:
    return _setting("worker-gc-freeze", _flag, "True or False")


def from_distributed(getter: str):
    """``distributed.<getter>()`` (``get_worker``, ``default_client``), or None where it
    finds none or distributed is not imported: a process that has not imported it has no
    worker and no Client, and importing it to ask costs 0.15-0.2 s of a first run."""
    if "distributed" not in sys.modules:
        return None
    import distributed

    try:
        return getattr(distributed, getter)()
    except ValueError:
        return None


def current_worker():
    """The ``distributed.Worker`` running this task, or None."""
    return from_distributed("get_worker")


def _memory_limit(worker) -> int | None:
    return getattr(getattr(worker, "memory_manager", None), "memory_limit", None) or None


def worker_map_budget() -> int | None:
    """In a ``distributed`` worker with a memory limit, the resident set size (bytes) up to
    which kept memory maps may hold pages (`ltdask.io.maps.MapCache.trim`): the
    ``ltdask.worker-map-fraction`` of the limit, at most 0.1 below the worker's spill and
    pause fractions and its nanny's terminate fraction. None outside such a worker, where
    the fraction is 0, or where this process's RSS cannot be read."""
    worker = current_worker()
    limit = _memory_limit(worker)
    if limit is None:
        return None
    fraction = worker_map_fraction()
    if fraction <= 0 or resident_bytes() is None:
        return None
    manager = worker.memory_manager
    thresholds = [
        getattr(manager, "memory_spill_fraction", False),
        getattr(manager, "memory_pause_fraction", False),
        dask.config.get("distributed.worker.memory.terminate", False),
    ]
    for threshold in thresholds:
        if threshold:  # False: that threshold is off
            fraction = min(fraction, max(0.0, float(threshold) - 0.1))
    return round(fraction * limit)


#: an open ``/proc/self/statm`` per process id (reading it through a kept descriptor costs
#: about 1 us; the one a forked child inherits describes its parent)
_STATM: dict[int, int] = {}


def resident_bytes() -> int | None:
    """This process's resident set size, as ``psutil`` (and so distributed) measures it:
    anonymous memory and mapped file pages; None where ``/proc`` is not there."""
    pid = os.getpid()
    fd = _STATM.get(pid)
    if fd is None:
        try:
            flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
            fd = os.open("/proc/self/statm", flags)
        except OSError:
            fd = -1
        _STATM[pid] = fd
    if fd < 0:
        return None
    try:
        return int(os.pread(fd, 256, 0).split()[1]) * _page_size()
    except (OSError, ValueError, IndexError):
        return None


@functools.cache
def _page_size() -> int:
    return os.sysconf("SC_PAGE_SIZE")


@functools.cache
def total_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 * 2**30


def min_partitions() -> int:
    value = _setting("min-partitions", _auto(_integer), "'auto' or a positive integer", 1)
    if value == "auto":
        return os.cpu_count() or 1
    return value


def acquire_memory() -> int:
    """Bytes of frames a live acquisition holds in memory (``ltdask.acquire-memory``)."""
    value = _setting("acquire-memory", _auto(_bytes), "'auto' or a size such as '4GiB'", minimum=0)
    return total_memory() // 4 if value == "auto" else value


def iter_updates() -> int:
    return _setting("iter-updates", _integer, "a positive integer", minimum=1)


@functools.cache
def l3_bytes_per_core() -> int:
    """The L3 cache share of one core, from sysfs; 8 MiB where it cannot be read."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for index in sorted(os.listdir(base)):
            with open(os.path.join(base, index, "level")) as f:
                if f.read().strip() != "3":
                    continue
            with open(os.path.join(base, index, "size")) as f:
                size = _bytes(f.read().strip().replace("K", "KiB").replace("M", "MiB"))
            with open(os.path.join(base, index, "shared_cpu_list")) as f:
                sharing = _count_cpus(f.read().strip())
            return max(MIB, size // max(1, sharing))
    except (OSError, ValueError):
        pass
    return 8 * MIB


def _count_cpus(cpu_list: str) -> int:
    count = 0
    for part in cpu_list.split(","):
        if "-" in part:
            a, b = part.split("-")
            count += int(b) - int(a) + 1
        elif part:
            count += 1
    return count


def tile_bytes() -> int:
    expected = "'auto' or a positive size such as '4MiB'"
    value = _setting("tile-bytes", _auto(_bytes), expected, minimum=1)
    if value == "auto":
        return int(min(8 * MIB, max(MIB, l3_bytes_per_core() // 2)))
    return value


def device_tile_bytes() -> int:
    """The tile size of runs whose tiles are staged to a GPU (``ltdask.device-tile-bytes``)."""
    return _setting("device-tile-bytes", _bytes, "a positive size such as '32MiB'", minimum=1)
