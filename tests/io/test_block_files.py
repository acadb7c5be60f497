"""`ltdask.io.block_files`: a file format's records held in memory, one buffer per
partition, read by the tasks as files (what a Merlin acquisition's runs read): results
those of numpy on the frames, and clear errors for blocks that do not fit."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import ltdask
from ltdask.exceptions import DataSetError
from ltdask.io import Decoder, FileSet
from ltdask.io.block_files import BlockBuffers, BlockFileDataSet, partition_files
from ltdask.udf import SumSigUDF, SumUDF

HEADER = 6


def _records(frames: np.ndarray) -> np.ndarray:
    """Big-endian frames, each behind a header of `HEADER` bytes, one record per row."""
    pixels = frames.astype(">u2").view(np.uint8).reshape(len(frames), -1)
    headers = np.full((len(frames), HEADER), 0xAB, np.uint8)
    return np.concatenate([headers, pixels], axis=1)


def _dataset(frames, sizes, records=None):
    records = _records(frames) if records is None else records
    starts = np.cumsum([0, *sizes[:-1]])
    stops = np.cumsum(sizes)
    fileset = FileSet(
        partition_files(starts, stops), frames.shape[1:], ">u2", frame_header_bytes=HEADER
    )
    blocks = da.from_array(records[:, None], chunks=(tuple(sizes), 1, records.shape[1]))
    return BlockFileDataSet(fileset, Decoder(">u2"), (len(frames),), (tuple(sizes),), blocks)


@pytest.mark.parametrize("sizes", [(5, 5, 3), (1, 1, 11), (13,)], ids=["odd", "ones", "one"])
def test_results_are_those_of_numpy(sizes):
    frames = np.random.default_rng(5).integers(0, 4000, (13, 9, 7)).astype(np.uint16)
    ds = _dataset(frames, sizes)
    total, per_frame = ltdask.compute(ds, [SumUDF(), SumSigUDF()], scheduler="sync")
    np.testing.assert_array_equal(total["intensity"].values, frames.sum(axis=0))
    np.testing.assert_array_equal(per_frame["intensity"].values, frames.sum(axis=(1, 2)))


def test_a_block_shorter_than_its_frames():
    frames = np.ones((4, 3, 2), np.uint16)
    short = _records(frames)[:, :-2]
    ds = _dataset(frames, (2, 2), records=short)
    with pytest.raises(
        DataSetError,
        match=r"partition [01] \(frames [02] to [13]\) has a block of 32 bytes; its frames take 36",
    ):
        ltdask.compute(ds, [SumUDF()], scheduler="sync")


def test_a_task_reads_its_own_block_only():
    maps = BlockBuffers(2, np.zeros(4, np.uint8))
    with pytest.raises(
        DataSetError, match="partition 2's task was asked for the bytes of partition 1"
    ):
        maps[1]


def test_one_file_per_partition():
    fileset = FileSet(partition_files([0], [4]), (3, 2), ">u2")
    with pytest.raises(DataSetError, match="1 files for the 2 partitions of the grid"):
        BlockFileDataSet(fileset, Decoder(">u2"), (4,), ((2, 2),))
