"""An acquisition's partitions as files: the payloads a run's tasks read tile by tile.

A source whose payloads are a file format's records of frames (a Merlin's ``.mib``
records: `ltdask.acquire.source.Source.fileset`) hands its partitions to a UDF run as the
bytes the receiver put into the store: each partition task's block is its partition's
buffer of payloads, read through the format's file set and decoder as the same records are
read from a file (`ltdask.io.block_files.BlockFileDataSet`): one cache-sized tile at a time
that every UDF of the run takes in turn, or summed in the decoder, instead of decoding the
partition into a whole array of frames first and reading that once per UDF.
"""

from __future__ import annotations

import uuid
import weakref
from typing import Any

import numpy as np

from ltdask.acquire.arrival import arrival_blocks
from ltdask.io.block_files import BlockFileDataSet, partition_files


class LiveFiles(BlockFileDataSet):
    """An acquisition as a run reads it (`files_of`): its partitions' payloads as files;
    partitions are ready as the acquisition's are."""

    _task_omits = ("_blocks", "acquisition")
    #: the `ltdask.acquire.Acquisition` whose partitions these are
    acquisition: Any

    def ready_partitions(self, first: int, want: int = 1, patience: float = 0.0) -> int:
        return self.acquisition.ready_partitions(first, want, patience)


def files_of(acquisition, turns: bool = True) -> LiveFiles | None:
    """`acquisition` (an `ltdask.acquire.Acquisition`) read as files of its source's
    format, or None where its source has no such format (its payloads are decoded whole);
    `turns`: see `arrival_blocks`."""
    store = acquisition.store
    layout = acquisition.source.fileset(partition_files(store.starts, store.stops))
    if layout is None:
        return None
    fileset, decoder = layout
    if fileset.frame_stride != store.frame_bytes:
        raise AssertionError(  # pragma: no cover  (a source's layout and payloads agree)
            f"{acquisition.path}: records of {fileset.frame_stride} bytes in payloads of "
            f"{store.frame_bytes}"
        )
    nav, sig = acquisition.nav_shape, acquisition.sig_shape
    grid = acquisition.nav_chunks

    # the payloads of a partition as a block of the nav grid whose signal dims are one
    # chunk each: (*nav, 1, .., 1, frame bytes)
    blocks = arrival_blocks(
        _payload_block,
        (*grid, *((1,) for _ in sig[1:]), (store.frame_bytes,)),
        np.uint8,
        f"ltdask-acquire-bytes-{uuid.uuid4().hex}",
        acquisition.handle,
        len(nav),
        turns,
    )
    files = LiveFiles(
        fileset, decoder, nav, grid, blocks, dims=acquisition.dims, path=acquisition.path
    )
    files.acquisition = acquisition
    files.coords = acquisition.coords
    files._calibration = acquisition._calibration
    return files


def _payload_block(block_info=None, acquisition=None, turn=None) -> np.ndarray:
    """One partition's payloads as a block (waits for them); its buffer goes back to the
    store for the partitions to come once the block is let go (the task has read it)."""
    assert acquisition is not None and block_info is not None
    acq = acquisition.acquisition
    location = block_info[None]["array-location"][: len(acq.nav_shape)]
    shape = tuple(hi - lo for lo, hi in location)
    payloads, _ = acq.take_payloads(tuple(lo for lo, _ in location), shape)
    block = payloads.reshape((*shape, *block_info[None]["chunk-shape"][len(shape) :]))
    weakref.finalize(block, acq.store.recycle, payloads)
    return block
