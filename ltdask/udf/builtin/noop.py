"""`NoOpUDF`: reads every tile and computes nothing (LiberTEM's ``NoOpUDF``)."""

from __future__ import annotations

from ltdask.udf.base import UDF

__all__ = ["NoOpUDF"]


class NoOpUDF(UDF):
    """A UDF with no results that does nothing with its tiles: a run of it measures (or
    exercises) reading the data alone.

    Parameters
    ----------
    preferred_input_dtype
        The dtype the tiles are converted to; by default (``UDF.USE_NATIVE_DTYPE``) the
        data's own.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> from ltdask.udf.builtin.noop import NoOpUDF
    >>> ds = ltdask.from_array(np.ones((2, 2, 4, 4), dtype=np.uint16))
    >>> dict(NoOpUDF().compute(ds).data_vars)
    {}
    """

    def __init__(self, preferred_input_dtype=UDF.USE_NATIVE_DTYPE) -> None:
        super().__init__(preferred_input_dtype=preferred_input_dtype)

    def get_preferred_input_dtype(self):
        return self.params.preferred_input_dtype

    def get_result_buffers(self) -> dict:
        return {}

    def process_tile(self, tile) -> None:
        pass
