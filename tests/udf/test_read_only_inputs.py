"""Tiles, frames and partitions are read-only for every dataset format and read dtype: a UDF
that writes into its input gets an error that says to copy, and never changes what the
other UDFs of the run see."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.formatfiles import FORMAT_PARAMS

import ltdask
from ltdask import UDF
from ltdask.exceptions import UDFError
from ltdask.udf import SumUDF


class Writer(UDF):
    def __init__(self, dtype=None):
        super().__init__(dtype=dtype)

    def get_preferred_input_dtype(self):
        return self.USE_NATIVE_DTYPE if self.params.dtype is None else self.params.dtype

    def get_result_buffers(self):
        return {"n": self.buffer(kind="nav")}


class WritesTile(Writer):
    def process_tile(self, tile):
        tile[...] = 0


class WritesFrame(Writer):
    def process_frame(self, frame):
        frame[0] = 0


class WritesPartition(Writer):
    def process_partition(self, partition):
        partition *= 0


class ZeroesACopy(UDF):
    """Copies first, as the error says: allowed, and invisible to the other UDFs."""

    def get_result_buffers(self):
        return {"n": self.buffer(kind="nav")}

    def process_tile(self, tile):
        tile = tile.copy()
        tile[...] = 0
        self.results.n[:] = tile.sum(axis=tuple(range(1, tile.ndim)))


@pytest.mark.parametrize("dtype", [None, "float32"], ids=["native", "float32"])
@pytest.mark.parametrize("fmt", FORMAT_PARAMS)
def test_inputs_are_read_only(tmp_path, fmt, dtype):
    ds, data = fmt.open(tmp_path)
    for writer, method in [
        (WritesTile, "process_tile"),
        (WritesFrame, "process_frame"),
        (WritesPartition, "process_partition"),
    ]:
        udf = writer(dtype=dtype)
        with pytest.raises(
            UDFError, match=rf"{writer.__name__}.{method} wrote into its input.*copy"
        ):
            ltdask.compute(ds, [SumUDF(dtype="float64"), udf])
    total, _ = ltdask.compute(ds, [SumUDF(dtype="float64"), ZeroesACopy()])
    np.testing.assert_allclose(total["intensity"].values, data.sum(axis=(0, 1), dtype=np.float64))
