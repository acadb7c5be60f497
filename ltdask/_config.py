"""ltdask settings, kept in dask's config under the ``ltdask.`` namespace.

=========================  ==========  ==================================================
key                        default     meaning
=========================  ==========  ==================================================
``ltdask.partition-bytes``  128 MiB    target size of a partition (one dask chunk / one
                                       UDF task), counted as float32 pixels whatever the
                                       native dtype
``ltdask.min-partitions``  ``auto``    at least this many partitions (``auto``: one per
                                       CPU core of this machine)
``ltdask.tile-bytes``      ``auto``    tile size the negotiator aims for (``auto``: half
                                       the L3 cache per core, 1 to 8 MiB)
``ltdask.view-chunk-       4           partitions per ``to_dask()`` chunk where chunks
partitions``                           are views of the files (no copy, no memory)
``ltdask.map-cache-bytes`` ``auto``    memory maps of files kept for reuse in a process,
                                       for files that a second UDF run reads: repeated
                                       runs over page-cached files skip the page faults
                                       (up to 2x faster), but the mapped pages count in
                                       RSS; ``auto``: half the RAM, none in a distributed
                                       worker; 0: keep none
=========================  ==========  ==================================================

Set them like any dask option: ``dask.config.set({"ltdask.partition-bytes": "256MiB"})``
or the environment variable ``DASK_LTDASK__PARTITION_BYTES=256MiB``.
"""

from __future__ import annotations

import functools
import os

import dask
import dask.config
from dask.utils import parse_bytes

DEFAULTS = {
    "ltdask": {
        "partition-bytes": "128MiB",
        "min-partitions": "auto",
        "tile-bytes": "auto",
        "view-chunk-partitions": 4,
        "map-cache-bytes": "auto",
    }
}

dask.config.update_defaults(DEFAULTS)

MIB = 2**20


def _bytes(value) -> int:
    return int(parse_bytes(value)) if isinstance(value, str) else int(value)


def partition_bytes() -> int:
    value = _bytes(dask.config.get("ltdask.partition-bytes"))
    if value <= 0:
        raise ValueError(f"ltdask.partition-bytes must be positive, got {value}")
    return value


def map_cache_bytes() -> int:
    value = dask.config.get("ltdask.map-cache-bytes")
    if value in (None, "auto"):
        try:
            from distributed import get_worker

            get_worker()
            return 0
        except (ImportError, ValueError):
            pass
        return _total_memory() // 2
    return _bytes(value)


@functools.cache
def _total_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 * 2**30


def view_chunk_partitions() -> int:
    return max(1, int(dask.config.get("ltdask.view-chunk-partitions")))


def min_partitions() -> int:
    value = dask.config.get("ltdask.min-partitions")
    if value in (None, "auto"):
        return os.cpu_count() or 1
    return max(1, int(value))


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
    value = dask.config.get("ltdask.tile-bytes")
    if value in (None, "auto"):
        return int(min(8 * MIB, max(MIB, l3_bytes_per_core() // 2)))
    return max(1, _bytes(value))
