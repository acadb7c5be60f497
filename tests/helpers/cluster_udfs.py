"""UDFs for cluster and fault tests; importable by worker processes (on their PYTHONPATH).

Classes defined in a test module would travel by value with cloudpickle; these travel by
reference, as a user's own UDF package would, so the workers must be able to import them.
"""

from __future__ import annotations

import os
import time

import numpy as np

from ltdask.udf import UDF


class SlowSumSigUDF(UDF):
    """The sum of each frame, ``delay`` seconds per frame: long enough runs to disturb."""

    def __init__(self, delay: float = 0.01):
        super().__init__(delay=delay)

    def get_result_buffers(self):
        return {"intensity": self.buffer(kind="nav", dtype="float64")}

    def get_preferred_input_dtype(self):
        return np.float64

    def process_frame(self, frame):
        time.sleep(self.params.delay)
        self.results.intensity[:] = frame.sum()


class FailingUDF(UDF):
    """Raises ``RuntimeError`` on the frame at flat nav position ``at``."""

    def __init__(self, at: int = 0):
        super().__init__(at=at)

    def get_result_buffers(self):
        return {"intensity": self.buffer(kind="nav", dtype="float64")}

    def process_frame(self, frame):
        position = int(np.ravel_multi_index(self.meta.coordinates[0], self.meta.dataset_shape.nav))
        if position == self.params.at:
            raise RuntimeError(f"FailingUDF: deliberate failure at frame {position}")
        self.results.intensity[:] = frame.sum()


class MemoryHogUDF(UDF):
    """Allocates (and touches) ``nbytes`` in each partition, in steps, before summing."""

    def __init__(self, nbytes: int = 2**30, step: int = 32 * 2**20, pause: float = 0.02):
        super().__init__(nbytes=nbytes, step=step, pause=pause)

    def get_result_buffers(self):
        return {"intensity": self.buffer(kind="nav", dtype="float64")}

    def process_partition(self, partition):
        hoard = []
        for _ in range(self.params.nbytes // self.params.step):
            hoard.append(np.ones(self.params.step, dtype=np.uint8))
            time.sleep(self.params.pause)
        self.results.intensity[:] = partition.reshape(partition.shape[0], -1).sum(axis=1)
        del hoard


class WhereUDF(UDF):
    """Records the process id that ran each frame (which worker did what)."""

    def get_result_buffers(self):
        return {"pid": self.buffer(kind="nav", dtype="int64")}

    def process_frame(self, frame):
        self.results.pid[:] = os.getpid()
