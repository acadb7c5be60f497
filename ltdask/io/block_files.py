"""Files held in memory, one per partition: bytes laid out as a format's files.

A detector that streams its frames as a file format lays them out (a Merlin sends the
records of a ``.mib`` file) fills, in a live acquisition, one buffer per partition.
`BlockFileDataSet` reads those buffers as `~ltdask.io.file_dataset.FileDataSet` reads files:
each partition is one "file" of the format's `~ltdask.io.fileset.FileSet`, whose bytes
reach the partition's task as its dask block; the task decodes them tile by tile with the
format's `~ltdask.io.decode.Decoder` (or sums them in the decoder), never into a whole
partition of frames, as it would read the same records from a file.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ltdask.exceptions import DataSetError
from ltdask.io.decode import Decoder
from ltdask.io.file_dataset import FileDataSet
from ltdask.io.fileset import File, FileSet
from ltdask.io.partition import Sizing


def partition_files(starts: Sequence[int], stops: Sequence[int]) -> list[File]:
    """One `File` per partition ``starts[i] .. stops[i]`` (frames of the stream), none on
    disk (a signature of their own: never looked up)."""
    return [
        File(f"<partition {i}>", int(a), int(b) - int(a), 0, signature=(0, 0, i, 0))
        for i, (a, b) in enumerate(zip(starts, stops, strict=True))
    ]


class BlockBuffers:
    """A task's "memory maps": its partition's block as the bytes of file `index`.

    Examples
    --------
    >>> import numpy as np
    >>> maps = BlockBuffers(3, np.arange(6, dtype=np.uint8).reshape(2, 3))
    >>> maps[3].tolist()
    [0, 1, 2, 3, 4, 5]
    """

    def __init__(self, index: int, block: np.ndarray) -> None:
        self.index = int(index)
        self.data = np.ascontiguousarray(block).view(np.uint8).reshape(-1)

    def __getitem__(self, idx: int) -> np.ndarray:
        if int(idx) != self.index:
            raise DataSetError(
                f"partition {self.index}'s task was asked for the bytes of partition {idx}: "
                "a task reads its own block only"
            )
        return self.data


class BlockFileDataSet(FileDataSet):
    """Frames in the layout of `fileset` (one file per partition: `partition_files`), whose
    bytes are the blocks of the dask array `blocks`, one per partition of `grid`.

    Parameters
    ----------
    fileset, decoder
        The format's layout over `partition_files` of the grid, and its decoder.
    nav_shape, grid
        The scan and its partitions (chunk sizes per nav dim, in C order).
    blocks
        A dask array whose nav blocks hold the partitions' bytes (its signal dims one chunk
        each; a block's bytes are taken in C order), or None (a task's copy).
    dims, path
        As the dataset the blocks come from.

    Examples
    --------
    Four frames of 2 x 3 big-endian uint16 pixels behind a 4-byte header, in two
    partitions whose bytes are held in memory:

    >>> import numpy as np, dask.array as da, ltdask
    >>> from ltdask.io import Decoder, FileSet
    >>> frames = np.arange(4 * 6, dtype=">u2").reshape(4, 2, 3)
    >>> records = np.concatenate(
    ...     [np.zeros((4, 4), np.uint8), frames.view(np.uint8).reshape(4, 12)], axis=1)
    >>> blocks = da.from_array(records.reshape(4, 1, 16), chunks=(2, 1, 16))
    >>> fileset = FileSet(partition_files([0, 2], [2, 4]), (2, 3), ">u2", frame_header_bytes=4)
    >>> ds = BlockFileDataSet(fileset, Decoder(">u2"), (4,), ((2, 2),), blocks)
    >>> (total,) = ltdask.compute(ds, [ltdask.udf.SumUDF()], scheduler="sync")
    >>> bool((total["intensity"].values == frames.sum(axis=0)).all())
    True
    """

    path = "<blocks>"
    #: what a task's copy leaves out (`for_task`)
    _task_omits: tuple[str, ...] = ("_blocks",)

    def __init__(
        self,
        fileset: FileSet,
        decoder: Decoder,
        nav_shape,
        grid: tuple[tuple[int, ...], ...],
        blocks=None,
        dims=None,
        path: str | None = None,
    ) -> None:
        if path is not None:
            self.path = path
        self._grid = tuple(tuple(int(c) for c in dim) for dim in grid)
        self._blocks = blocks
        self._blocks_name = None if blocks is None else str(blocks.name)
        super().__init__(fileset, decoder, nav_shape, dims=dims)
        if len(fileset.files) != len(self.get_partitions()):
            raise DataSetError(
                f"{self.path}: {len(fileset.files)} files for the {len(self.get_partitions())} "
                "partitions of the grid; expected one file per partition (partition_files)"
            )

    def partition_grid(self, sizing: Sizing) -> tuple[tuple[int, ...], ...]:
        return self._grid

    def partition_blocks(self):
        return self._blocks

    def for_task(self) -> BlockFileDataSet:
        light = object.__new__(BlockFileDataSet)
        light.__dict__.update({k: v for k, v in self.__dict__.items() if k not in self._task_omits})
        light._blocks = None
        light.coords = {}
        return light

    def open_files(self, frames: np.ndarray, block=None) -> BlockBuffers:
        if block is None:
            raise DataSetError(f"{self.path}: its frames are read from the partitions' blocks")
        index = self.fileset.file_index(int(frames[frames >= 0][0]))
        f = self.fileset.files[index]
        needed = int(self.fileset.needed[index])
        maps = BlockBuffers(index, block)
        if maps.data.size < needed:
            raise DataSetError(
                f"{self.path}: partition {index} (frames {f.first_frame} to "
                f"{f.first_frame + f.num_frames - 1}) has a block of {maps.data.size} bytes; "
                f"its frames take {needed}"
            )
        return maps

    def read_frames(self, positions, sig_slice, dtype) -> np.ndarray:
        raise DataSetError(f"{self.path}: its frames are read from the partitions' blocks")

    def _token_fields(self) -> tuple:
        return (super()._token_fields(), self._grid, self._blocks_name)
