"""ltdask settings, kept in dask's config under the ``ltdask.`` namespace.

=========================  ==========  ==================================================
key                        default     meaning
=========================  ==========  ==================================================
``ltdask.partition-bytes``  128 MiB    target size of a partition (one dask chunk / one
                                       UDF task), counted as float32 pixels whatever the
                                       native dtype; writing to Zarr, a rechunk that
                                       copies this much or more warns (PerformanceWarning)
``ltdask.min-partitions``  ``auto``    at least this many partitions (``auto``: one per
                                       CPU core of this machine)
``ltdask.run-partition-    ``auto``    partitions of UDF runs on the threaded scheduler
bytes``                                (``compute``, ``lazy``): each task costs a thread
                                       about 0.3 ms; ``auto``: 512 MiB unless
                                       ``ltdask.partition-bytes`` is set; a size: that
                                       size. At least two partitions per thread, at most
                                       1/8 of a thread's share of the RAM, never more
                                       than the dataset has
``ltdask.cluster-          ``auto``    the same on a dask.distributed cluster, where each
partition-bytes``                      task costs the scheduler a few ms, and the memory
                                       share is of the worker's memory limit; ``auto``:
                                       as ``ltdask.run-partition-bytes`` where that or
                                       ``ltdask.partition-bytes`` is set, else 1 GiB
``ltdask.tile-bytes``      ``auto``    tile size the negotiator aims for (``auto``: half
                                       the L3 cache per core, 1 to 8 MiB)
``ltdask.iter-updates``     10          iterated runs (``ltdask.iter``, ``run_udf_iter``,
                                       live plots) cut the scan into partitions small
                                       enough for at least this many updates (where it has
                                       the frames); ``compute`` and ``lazy`` keep theirs
``ltdask.view-chunk-       4           partitions per ``to_dask()`` chunk where chunks
partitions``                           are views of the files (no copy, no memory)
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
        "partition-bytes": "128MiB",
        "min-partitions": "auto",
        "run-partition-bytes": "auto",
        "cluster-partition-bytes": "auto",
        "iter-updates": 10,
        "tile-bytes": "auto",
        "view-chunk-partitions": 4,
        "map-cache-bytes": "auto",
        "worker-map-fraction": 0.5,
        "worker-gc-freeze": True,
        "compile-notice": True,
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


def partition_bytes() -> int:
    return _setting("partition-bytes", _bytes, "a positive size such as '128MiB'", minimum=1)


#: the partition size of UDF runs where ``ltdask.run-partition-bytes`` is ``auto``
#: (SumUDF and StdDevUDF over 2-4 GiB, threaded scheduler, 2 threads: 13-15 % faster than
#: in 128 MiB partitions; 1 GiB was 3-9 % faster again, but the pages of the files that
#: the running tasks map count in the RSS: 1.25 GiB at the peak of a SumUDF over 4-16
#: GiB of uint16, against 0.7 GiB over 1 GiB, where 512 MiB keeps it flat)
RUN_PARTITION_BYTES = 512 * MIB
#: the same on a distributed cluster (``ltdask.cluster-partition-bytes`` ``auto``), where
#: a task costs a few ms of the scheduler's and the workers' time and the memory share per
#: task is capped (`ltdask.io.partition.for_run`): Sum and StdDev over 2-4 GiB on 2 x 1 and
#: 1 x 2 workers 8-17 % faster than in 512 MiB partitions (15-25 % faster than 128 MiB)
CLUSTER_PARTITION_BYTES = 1024 * MIB


def run_partition_bytes(auto: int = RUN_PARTITION_BYTES) -> int:
    """The partition size of UDF runs on the threaded scheduler (see the table above);
    `auto`: the size where neither it nor ``ltdask.partition-bytes`` is set."""
    value = _setting("run-partition-bytes", _auto(_bytes), "'auto' or a size such as '512MiB'", 1)
    if value != "auto":
        return value
    if dask.config.get("ltdask.partition-bytes") != DEFAULTS["ltdask"]["partition-bytes"]:
        return partition_bytes()
    return max(auto, partition_bytes())


def cluster_partition_bytes() -> int:
    """The partition size of UDF runs on a distributed cluster (see the table above)."""
    value = _setting(
        "cluster-partition-bytes", _auto(_bytes), "'auto' or a size such as '512MiB'", 1
    )
    return run_partition_bytes(CLUSTER_PARTITION_BYTES) if value == "auto" else value


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


def view_chunk_partitions() -> int:
    return _setting("view-chunk-partitions", _integer, "a positive integer", minimum=1)


def min_partitions() -> int:
    value = _setting("min-partitions", _auto(_integer), "'auto' or a positive integer", 1)
    if value == "auto":
        return os.cpu_count() or 1
    return value


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
