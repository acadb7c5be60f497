"""Partitions: the unit of scheduling, a block of the nav grid that is one flat-nav range."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ltdask.common import Shape, Slice
from ltdask.exceptions import DataSetError
from ltdask.runtime import settings
from ltdask.runtime.schedulers import RunTarget


@dataclass(frozen=True)
class Partition:
    """Frames ``start .. stop`` of the flattened nav axis, which are also the nav block
    ``block`` of the partition grid (one dask chunk of ``to_dask()``).

    Examples
    --------
    >>> import dask.array as da, ltdask
    >>> ds = ltdask.from_array(da.zeros((4, 6, 8, 8), chunks=(2, 6, 8, 8)))
    >>> p = ds.get_partitions()[1]
    >>> p.index, p.block, p.nav_slices, (p.start, p.stop), p.num_frames
    (1, (1, 0), (slice(2, 4, None), slice(0, 6, None)), (12, 24), 12)
    >>> p.slice(ds.sig_shape)  # as a flat-nav slice with the whole frames
    Slice(origin=(12, 0, 0), shape=Shape((12, 8, 8), sig_dims=2))
    """

    index: int
    block: tuple[int, ...]
    nav_slices: tuple[slice, ...]
    start: int
    stop: int

    @property
    def num_frames(self) -> int:
        return self.stop - self.start

    def slice(self, sig_shape: Sequence[int]) -> Slice:
        """This partition as a flat-nav `Slice` with full signal dims."""
        sig = tuple(sig_shape)
        return Slice(
            (self.start, *(0,) * len(sig)),
            Shape((self.num_frames, *sig), sig_dims=len(sig)),
        )


@dataclass(frozen=True)
class Sizing:
    """How large partitions are: about `partition_bytes` each (frames counted as float32
    pixels), and at least `min_partitions` of them where the scan has the frames.

    A dataset's own grid (`ltdask.io.dataset.DataSet.nav_chunks`) takes the settings
    (`from_settings`) when it is first asked for; a run's grid is made for its scheduler
    (`for_run`) with a `Sizing` given explicitly, so that planning changes no global state
    and two threads can plan at once.
    """

    partition_bytes: int
    min_partitions: int

    @classmethod
    def from_settings(cls) -> Sizing:
        """``ltdask.partition-bytes`` and ``ltdask.min-partitions``."""
        return cls(settings.partition_bytes(), settings.min_partitions())


#: frames a partition of frames of at least LARGE_FRAME bytes holds at least (`nav_grid`)
MIN_FRAMES = 32
LARGE_FRAME = 2**20
#: frames a UDF run's partition of such frames holds at least, where memory allows
#: (`for_run`): K2 IS SumUDF ran 13 % faster in 64-frame partitions than in 32-35-frame ones
RUN_MIN_FRAMES = 64


def nav_grid(
    nav_shape: Sequence[int],
    frame_bytes: int,
    target_frames: int | None = None,
    sizing: Sizing | None = None,
):
    """Chunk sizes per nav dim such that every block is one contiguous flat-nav range.

    Trailing dims stay whole as long as a block of them fits the `sizing`'s partition bytes
    (default: the settings, `Sizing.from_settings`; counted as float32 pixels; for frames
    of 1 MiB or more, up to 4x that for `MIN_FRAMES` frames); the next dim is cut into
    pieces of one size (the last may be smaller, as Zarr chunks), leading dims into pieces
    of one. There are at least the sizing's ``min_partitions`` blocks where the scan has
    that many frames.
    """
    nav = tuple(int(n) for n in nav_shape)
    total = math.prod(nav)
    if target_frames is None:
        sizing = sizing or Sizing.from_settings()
        budget = sizing.partition_bytes
        target_frames = max(1, budget // max(1, frame_bytes))
        if frame_bytes >= LARGE_FRAME:
            # at least MIN_FRAMES where that stays within 4x the budget (a partition's
            # per-pixel state and results are frame-sized, whatever its depth: 8-frame
            # partitions of K2 frames spent more on those than on their frames)
            target_frames = max(target_frames, min(MIN_FRAMES, 4 * budget // frame_bytes))
        # rounding down: ceil(12 / 5) = 3 frames would give 4 partitions, not at least 5
        target_frames = min(target_frames, max(1, total // sizing.min_partitions))
    target_frames = max(1, int(target_frames))
    chunks: list[tuple[int, ...]] = []
    # find the split dim: the first dim whose trailing block fits the target
    split = len(nav)
    for j in range(len(nav)):
        if math.prod(nav[j:]) <= target_frames:
            split = j
            break
    if split == 0:
        return tuple((n,) for n in nav)
    cut = split - 1
    per = max(1, target_frames // max(1, math.prod(nav[split:])))
    count = math.prod(nav[:cut]) * -(-nav[cut] // per)
    if count > MAX_PARTITIONS:
        raise TooManyPartitions(
            count,
            f"{total} frames would be cut into {count} partitions of "
            f"{per * math.prod(nav[split:])} frames; at most {MAX_PARTITIONS} can be "
            "planned: give a nav_shape that fits the frames in the files, or larger "
            "partitions (ltdask.partition-bytes)",
        )
    for j, n in enumerate(nav):
        if j < cut:
            chunks.append((1,) * n)
        elif j == cut:
            chunks.append(_uniform(n, per))
        else:
            chunks.append((n,))
    return tuple(chunks)


class TooManyPartitions(DataSetError):
    """A scan that would be cut into more than `MAX_PARTITIONS` partitions (`count`)."""

    def __init__(self, count: int, message: str):
        super().__init__(message)
        self.count = count


#: the most partitions a scan is cut into: the grid's tuples of chunk sizes and the plan's
#: per-partition lists grow with the count (a header announcing 10^15 frames would need
#: GiBs for them before any check of the files could say that they hold far fewer)
MAX_PARTITIONS = 2**22


def _uniform(n: int, size: int) -> tuple[int, ...]:
    """`n` in chunks of `size` (the last may be smaller), so that the partitions map one
    to one onto the chunks of a Zarr array."""
    size = max(1, min(n, size))
    full, rest = divmod(n, size)
    return (size,) * full + ((rest,) if rest else ())


def partitions_for_grid(nav_chunks: Sequence[Sequence[int]]) -> list[Partition]:
    """The partitions of a nav grid (from :func:`nav_grid`), in flat-nav order."""
    nav_shape = tuple(sum(c) for c in nav_chunks)
    bounds = [np.concatenate([[0], np.cumsum(c)]).astype(int) for c in nav_chunks]
    parts = []
    for index, block in enumerate(itertools.product(*(range(len(c)) for c in nav_chunks))):
        slices = tuple(slice(int(b[i]), int(b[i + 1])) for b, i in zip(bounds, block, strict=True))
        first = tuple(s.start for s in slices)
        start = int(np.ravel_multi_index(first, nav_shape)) if nav_shape else 0
        size = math.prod(s.stop - s.start for s in slices)
        parts.append(Partition(index, block, slices, start, start + size))
    return parts


def regridded(dataset, sizing: Sizing):
    """A shallow copy of `dataset` whose partition grid is its own grid made for `sizing`
    (file chunk alignment and all, `ltdask.io.dataset.DataSet.partition_grid`), or
    `dataset` where that grid cannot be made or is the one it has."""
    from ltdask.exceptions import DataSetError

    try:
        chunks = dataset.checked_grid(sizing)
    except DataSetError:  # far more partitions without frames than planning accepts
        return dataset
    if chunks == dataset.nav_chunks:
        return dataset
    other = object.__new__(type(dataset))
    other.__dict__.update(dataset.__dict__)
    other.__dict__["nav_chunks"] = chunks  # (the cached property's slot)
    return other


def for_run(dataset, target: RunTarget, device: bool = False):
    """`dataset`, or a copy in fewer, larger partitions for a UDF run (``compute``, ``lazy``,
    ``explain``) on the scheduler `target` (resolved where the run was asked for).

    Every partition task costs the scheduler and the task's set-up some time (on the
    threaded scheduler about 0.3 ms of a thread, with the GIL; on a ``distributed`` cluster
    a few ms), so runs take partitions of ``ltdask.partition-bytes`` (``auto``: 512 MiB on
    the threaded scheduler, 1 GiB on a cluster; see
    `ltdask.runtime.settings.AUTO_PARTITION_BYTES`), frames of 1 MiB or more (as float32)
    at least `RUN_MIN_FRAMES` of them to a partition. Always at least two per thread (the
    threaded scheduler's ``num_workers``, or the workers' threads), at most an eighth of a
    thread's share of the memory (the worker's memory limit; this machine's RAM: a task
    maps its partition's pages, which count in the RSS), never more partitions than
    `dataset` has; one per thread where the run stages its tiles to a GPU (`device`: each
    partition's tiles then pass through its own pinned buffers, and one of 4 large tiles
    overlaps the copies of the next with its compute better than one of 2: SumUDF over a
    page-cached 2 GiB scan on an H200 with 16 cores, 26.8 against 21.4 GB/s). The other
    schedulers (synchronous, processes) keep the dataset's
    partitions, and so do a cluster that lists no worker yet and a dataset whose partitions
    were made under other settings than the current ones (``ltdask.partition-bytes`` set
    when it was opened)."""
    dataset = dataset.planned_for(target)
    if target.kind not in ("threads", "cluster"):
        return dataset
    size = settings.partition_bytes(target.kind)
    threads = target.threads
    if threads < 1:  # (a cluster without workers yet, or an asynchronous client's view)
        return dataset
    frame_bytes = math.prod(dataset.sig_shape) * 4  # (counted as float32, as partitions are)
    if frame_bytes >= LARGE_FRAME:
        # a partition's per-pixel state and results are frame-sized, whatever its depth
        size = max(size, RUN_MIN_FRAMES * frame_bytes)
    if target.memory_shares:
        size = min(size, min(target.memory_shares) // 8)
    have = len(dataset.get_partitions())
    configured = Sizing.from_settings()
    per_thread = 1 if device else 2
    if have <= per_thread * threads or dataset.partition_grid(configured) != dataset.nav_chunks:
        return dataset
    minimum = max(per_thread * threads, configured.min_partitions)
    coarse = regridded(dataset, Sizing(size, minimum))
    return coarse if len(coarse.get_partitions()) < have else dataset


def with_min_partitions(dataset, count: int):
    """`dataset`, or a shallow copy of it cut into at least `count` partitions where it has
    the frames: its own partition grid (file chunk alignment and all), made as with
    ``ltdask.min-partitions`` at least `count`. Runs that report as partitions finish
    (``ltdask.iter``) take it; ``compute`` and ``lazy`` keep the dataset's partitions.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> from ltdask.io.partition import with_min_partitions
    >>> ds = ltdask.from_array(np.zeros((16, 16, 8, 8), np.float32))
    >>> len(with_min_partitions(ds, 20).get_partitions()) >= 20
    True
    """
    if len(dataset.get_partitions()) >= min(count, dataset.num_frames):
        return dataset
    configured = Sizing.from_settings()
    count = max(count, configured.min_partitions)
    return regridded(dataset, Sizing(configured.partition_bytes, count))
