"""An acquisition as a dataset: frames that arrive over time, read by the same runs as a file.

`Acquisition` opens a `~ltdask.acquire.source.Source`, starts a receiver thread that puts
the source's frames into a `~ltdask.acquire.store.FrameStore`, and is an in-memory dataset
(`ltdask.io._memory.ArrayDataSet`) over a dask array whose blocks are the partitions: each
block's task waits until its frames have arrived, takes them from the store and decodes
them. ``ltdask.compute``, ``ltdask.iter``, ``ltdask.live``, ``ltdask.lazy`` with
``to_zarr``, corrections, ROIs and array backends then run on it as on a file, partition by
partition as the detector delivers them. Where the source's payloads are a file format's
records (a Merlin's), a UDF run reads them as that format's files instead, tile by tile
(`planned_for`, :mod:`ltdask.acquire.blocks`).
"""

from __future__ import annotations

import math
import threading
import time
import uuid
import warnings

import numpy as np

from ltdask.acquire.arrival import arrival_blocks
from ltdask.acquire.source import Header, Source
from ltdask.acquire.store import AcquisitionError, FrameStore
from ltdask.exceptions import DataSetError, MissingFramesWarning
from ltdask.io._memory import ArrayDataSet
from ltdask.io.dataset import DataSet
from ltdask.io.partition import Sizing, nav_grid, partitions_for_grid
from ltdask.runtime import settings

#: bytes of decoded frames a partition holds by default: at Merlin's 1.8 kHz (12-bit,
#: 256 x 256) 512 frames, a partition (and a partial result) every 0.28 s. A partition costs
#: a run about 2 ms of CPU besides its frames (its task, buffers and merge): in 16 MiB
#: partitions, 1-bit frames came in 170 partitions a second, and a live run of Sum, CoM
#: and a ring took 42k frames/s where it takes 58k in 64 MiB ones
PARTITION_BYTES = 64 * 2**20
#: frames a partition holds at most by default (at any frame rate the results come often)
MAX_PARTITION_FRAMES = 1024
#: seconds of the detector's frames a partition holds at most by default, where the
#: source announces its time per frame (`Header.frame_seconds`): partial results at least
#: four times a second at any frame rate the detector was set to
PARTITION_SECONDS = 0.25


class Acquisition(ArrayDataSet):
    """Frames of a detector stream or a growing file, processed as they arrive.

    Made by ``ltdask.acquire.merlin``, ``ltdask.acquire.dectris`` and
    ``ltdask.acquire.follow``; the receiver runs from the moment it is made (frames that
    arrive before a run are kept, in memory up to ``memory_limit`` and then in a scratch
    file). Use it as a context manager, or `close` it: that stops the receiver and releases
    the source.

    Parameters
    ----------
    source
        Where the frames come from.
    nav_shape
        The scan's shape; by default the source's (a header's scan shape or frame count).
    frames_per_partition
        Frames per partition, the step of partial results (default: 64 MiB of frames, at
        most 1024, and at most a quarter second of them where the source says how long a
        frame takes).
    memory_limit
        Bytes of frames held in memory before further ones go to a scratch file (default:
        the setting ``ltdask.acquire-memory``, a quarter of the RAM).
    timeout
        Seconds to wait for the source's header.
    idle_timeout
        Seconds without a new frame after which the acquisition ends as broken off
        (positions without frames invalid, a warning says which); None: wait for ever.
    dims
        Names of the nav and sig dims.
    header
        The source's header where it is open already (LiberTEM-live's pending
        acquisitions); else the acquisition opens it.
    record
        A path ending in ``.zarr`` or ``.h5``: every frame is also written there as its
        partition is processed (see `ltdask.acquire.record`); it must not exist.
    """

    path = "<acquisition>"

    def __init__(
        self,
        source: Source,
        nav_shape=None,
        frames_per_partition: int | None = None,
        memory_limit: int | None = None,
        timeout: float = 10.0,
        idle_timeout: float | None = 10.0,
        dims=None,
        header: Header | None = None,
        record=None,
    ) -> None:
        from ltdask.acquire.record import Recording, check_target

        target = None if record is None else check_target(record)
        self.source = source
        self.path = source.name
        if header is None:
            header = source.open(timeout)
        self.header = header
        nav = _nav_shape(header, nav_shape, source.name)
        frame_bytes = math.prod(header.sig_shape) * header.dtype.itemsize
        fpp = _frames_per_partition(
            frames_per_partition, frame_bytes, source.name, header.frame_seconds
        )
        grid = nav_grid(nav, frame_bytes, target_frames=fpp)
        self._grid = grid
        starts = [p.start for p in partitions_for_grid(grid)]
        limit = settings.acquire_memory() if memory_limit is None else int(memory_limit)
        self.store = FrameStore(
            starts,
            math.prod(nav),
            header.payload_shape or header.sig_shape,
            header.payload_dtype,
            memory_limit=limit,
            name=source.name,
        )
        sig = header.sig_shape
        #: the acquisition as an argument of its block tasks
        self.handle = _Handle(self)
        super().__init__(self._blocks(turns=True), sig_dims=len(sig), dims=dims)
        self.recording = None
        if target is not None:
            try:
                self.recording = Recording(
                    target, nav, sig, header.dtype, grid, source.name, header.attrs, self.dims
                )
            except BaseException:
                source.close()
                raise
        self.idle_timeout = idle_timeout
        self._told_missing = False
        self._receiver = threading.Thread(
            target=self._receive, name=f"ltdask receiver {source.name}", daemon=True
        )
        self._watchdog = threading.Thread(
            target=self._watch, name=f"ltdask watchdog {source.name}", daemon=True
        )
        self._receiver.start()
        self._watchdog.start()

    # -- partitions: fixed by the acquisition, whatever a run would like -----------------
    def partition_grid(self, sizing: Sizing) -> tuple[tuple[int, ...], ...]:
        return self._grid

    def partition_frame_bytes(self) -> int:
        return math.prod(self.sig_shape) * self.dtype.itemsize

    # -- runs ------------------------------------------------------------------------------
    def planned_for(self, target, in_steps: bool = False) -> DataSet:
        """On a cluster: a copy whose partitions the workers get from this process's
        feeder (see :mod:`ltdask.acquire.cluster`); else, where the source's payloads are
        a file format's records, the partitions' payloads read as such files, tile by tile
        (:mod:`ltdask.acquire.blocks`; not while recording: that decodes the frames);
        else the acquisition itself. `in_steps`: for a run that takes the partitions in
        steps as they arrive, blocks without turns (`arrival_blocks`)."""
        if not target.on_cluster:
            from ltdask.acquire.blocks import files_of

            files = None if self.recording is not None else files_of(self, turns=not in_steps)
            if files is not None:
                return files
            return self._with_array(self._blocks(turns=False)) if in_steps else self
        from ltdask.acquire.cluster import cluster_blocks
        from ltdask.runtime.schedulers import cluster_client, default_client

        array, feeder = cluster_blocks(self, cluster_client() or default_client())
        other = self._with_array(array)
        other.__dict__["_feeder"] = feeder
        return other

    def _blocks(self, turns: bool):
        """The partitions' decoded frames as blocks (`arrival_blocks`)."""
        chunks = (*self._grid, *((s,) for s in self.header.sig_shape))
        name = f"ltdask-acquire-{uuid.uuid4().hex}"
        return arrival_blocks(
            _take_block, chunks, self.header.dtype, name, self.handle, len(self._grid), turns
        )

    def _with_array(self, array) -> Acquisition:
        """A copy of this acquisition (the same store, source and receiver) whose
        partitions are the blocks of `array` (see `planned_for`)."""
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        other._array = array
        other._array_name = array.name
        return other

    def ready_partitions(self, first: int, want: int = 1, patience: float = 0.0) -> int:
        """Partitions from `first` on whose frames have all arrived (waits for one, then up
        to `patience` s for `want`). Runs that ask settle their results (`settle` warns of
        missing frames, not the tasks): the acquisition's own flag, also from a copy of it
        (`planned_for`), whose tasks take their frames from the acquisition."""
        self.handle.acquisition._told_missing = True
        return self.store.ready(first, want, patience)

    def for_task(self) -> ArrayDataSet:
        """What the partition tasks need: an in-memory dataset of the same grid, without
        the receiver, the store and the source (they stay in this process)."""
        light = object.__new__(ArrayDataSet)
        live = (
            "source",
            "store",
            "header",
            "handle",
            "_receiver",
            "_watchdog",
            "_feeder",
            "recording",
        )
        light.__dict__.update({k: v for k, v in self.__dict__.items() if k not in live})
        light._array = None
        light.coords = {}
        return light

    def take_partition(self, first: tuple, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
        """The partition at nav index `first` of nav shape `shape`, once its frames are
        there: ``(frames, payloads)``, the frames decoded and recorded (``record=``); the
        caller gives the payloads back (`FrameStore.recycle`) once the frames do not use
        them."""
        payloads, arrived = self.take_payloads(first, shape)
        frames = self.source.decode(payloads).reshape((*shape, *self.sig_shape))
        if self.recording is not None:
            self.recording.write(first, frames, arrived)
        return frames, payloads

    def take_payloads(self, first: tuple, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
        """``(payloads, arrived)`` of the partition at nav index `first` of nav shape
        `shape`, once its frames are there: payloads ``(frames, *payload_shape)``, zeros for
        the frames that never came (a warning says so, once), and which came."""
        start = int(np.ravel_multi_index(first, self.nav_shape)) if self.nav_shape else 0
        payloads, arrived = self.store.take(start, start + math.prod(shape))
        if not self._told_missing and not arrived.all():
            self._told_missing = True  # (once: `settle` says how many and where)
            warnings.warn(
                f"{self.path}: frames never arrived (the first at scan index "
                f"{start + int(np.argmin(arrived))}); ltdask.compute and ltdask.iter mark "
                "their positions invalid, but results of ltdask.lazy computed by dask hold "
                "zeros there as valid: pass them through acq.settle(results)",
                MissingFramesWarning,
                stacklevel=3,
            )
        return payloads, arrived

    # -- the receiver ----------------------------------------------------------------------
    def _receive(self) -> None:
        try:
            self.source.receive(self.store)
        except BaseException as e:  # noqa: BLE001  (kept for the run: it says where it broke)
            self.store.finish(error=e)
        else:
            self.store.finish()

    def _watch(self) -> None:
        """End the acquisition after `idle_timeout` s without a frame."""
        last, since = -1, time.monotonic()
        while not self.store.ended:
            time.sleep(0.05)
            count = self.store.received
            now = time.monotonic()
            if count != last:
                last, since = count, now
            elif self.idle_timeout is not None and now - since > self.idle_timeout:
                self.store.finish(
                    AcquisitionError(
                        f"{self.path}: no frame for {self.idle_timeout} s after {count} of "
                        f"{self.store.num_frames} (idle_timeout)"
                    )
                )
                self.store.cancel()

    @property
    def done(self) -> bool:
        """Whether the acquisition has ended (every frame arrived, or broke off)."""
        return self.store.ended

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the acquisition ends; whether it did within `timeout` s."""
        self._receiver.join(timeout)
        return not self._receiver.is_alive()

    def close(self) -> None:
        """Stop the receiver (frames not yet arrived stay missing) and release the source."""
        self.store.cancel()
        self._receiver.join(5.0)
        self._watchdog.join(1.0)
        if self.recording is not None:
            self.recording.finish(self.store, self.source.decode)
        self.source.close()

    def __enter__(self) -> Acquisition:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- results ---------------------------------------------------------------------------
    def settle(self, datasets: list) -> list:
        """Results of a run on this acquisition (`datasets`, computed): positions whose
        frames never came are invalid, with a warning that says how many and where."""
        missing = self.store.missing if self.store.ended else np.empty(0, np.int64)
        if self.store.error is not None:
            _warn_broken(self.path, self.store.error, missing, self.num_frames)
        elif missing.size:
            warnings.warn(
                f"{self.path}: {missing.size} of {self.num_frames} frames never arrived "
                f"({_ranges(missing)}); their positions are invalid",
                MissingFramesWarning,
                stacklevel=3,
            )
        extra = [
            f"{n} {what}"
            for n, what in (
                (self.store.duplicates, "frames came twice (the first one was kept)"),
                (self.store.overflow, f"came past the scan's {self.num_frames} frames"),
                (self.store.late, "came after the acquisition had ended"),
            )
            if n
        ]
        if extra:
            warnings.warn(
                f"{self.path}: {', '.join(extra)}; the frames past the scan and after its "
                "end are not in the results",
                MissingFramesWarning,
                stacklevel=3,
            )
        if not missing.size:
            return datasets
        arrived = self.store.arrived.reshape(self.nav_shape)
        nav_dims = tuple(self.dims[: len(self.nav_shape)])
        out = []
        for d in datasets:
            d = d.copy(deep=False)
            for name, coord in list(d.coords.items()):
                if str(name).endswith("valid") and coord.dims == nav_dims:
                    d = d.assign_coords({name: (nav_dims, np.asarray(coord.values) & arrived)})
            out.append(d)
        return out


class _Handle:
    """The acquisition, as the block tasks' argument: tokenized by its identity (the
    frames are not known when the graph is made)."""

    def __init__(self, acquisition: Acquisition) -> None:
        self.acquisition = acquisition
        self.token = uuid.uuid4().hex

    def __dask_tokenize__(self):
        return self.token

    def __reduce__(self):
        self.acquisition.store.__reduce__()  # (raises: say why, for which acquisition)
        raise AssertionError  # pragma: no cover


def _take_block(block_info=None, acquisition: _Handle | None = None, turn=None) -> np.ndarray:
    """One partition's frames, decoded, as a block of the nav grid (waits for them; `turn`:
    its partition's turn, see :mod:`ltdask.acquire.arrival`)."""
    assert acquisition is not None and block_info is not None
    acq = acquisition.acquisition
    location = block_info[None]["array-location"][: len(acq.nav_shape)]
    frames, payloads = acq.take_partition(
        tuple(lo for lo, _ in location), tuple(hi - lo for lo, hi in location)
    )
    if not np.may_share_memory(frames, payloads):
        acq.store.recycle(payloads)
    return frames


def _nav_shape(header: Header, nav_shape, name: str) -> tuple[int, ...]:
    from ltdask.io.checks import check_shape

    if nav_shape is not None:
        return check_shape(nav_shape, "nav_shape", name)
    if header.nav_shape is not None:
        return tuple(header.nav_shape)
    if header.num_frames > 0:
        return (header.num_frames,)
    raise DataSetError(
        f"{name}: the source does not say how many frames the acquisition has (a "
        "continuous acquisition); give nav_shape"
    )


def _frames_per_partition(value, frame_bytes: int, name: str, frame_seconds=None) -> int:
    if value is None:
        most = min(MAX_PARTITION_FRAMES, PARTITION_BYTES // max(1, frame_bytes))
        if frame_seconds:
            most = min(most, int(PARTITION_SECONDS / frame_seconds))
        return max(1, most)
    if int(value) != value or value < 1:
        raise DataSetError(f"{name}: frames_per_partition={value!r}; expected a count >= 1")
    return int(value)


def _ranges(indices: np.ndarray, most: int = 5) -> str:
    """Runs of consecutive `indices` as ``a:b`` text (the first `most`)."""
    if not indices.size:
        return "none"
    cuts = np.flatnonzero(np.diff(indices) != 1) + 1
    runs = np.split(indices, cuts)
    text = ", ".join(
        f"frame {r[0]}" if r.size == 1 else f"frames {r[0]}:{r[-1] + 1}" for r in runs[:most]
    )
    return text + (f" and {len(runs) - most} more runs" if len(runs) > most else "")


def _warn_broken(path: str, error: BaseException, missing: np.ndarray, total: int) -> None:
    warnings.warn(
        f"{path}: the acquisition broke off after {total - missing.size} of {total} frames "
        f"({error}); the results cover the frames that arrived, the positions of the "
        f"{missing.size} missing ones ({_ranges(missing)}) are invalid",
        MissingFramesWarning,
        stacklevel=4,
    )
