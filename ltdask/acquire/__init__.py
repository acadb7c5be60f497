"""Live acquisitions: scans processed while the detector is still producing them.

An acquisition is a dataset (`Acquisition`) whose frames arrive over time, from a detector
stream or a file still being written; every run (``ltdask.compute``, ``ltdask.iter``,
``ltdask.live``, ``ltdask.lazy`` with ``to_zarr``) processes it partition by partition as
the frames come, with the results of the frames so far at every step.

Examples
--------
>>> import numpy as np, ltdask
>>> from ltdask.acquire import Acquisition, ReplaySource
>>> frames = np.ones((12, 8, 8), dtype=np.uint16)  # a detector sending 1000 frames/s:
>>> with Acquisition(ReplaySource(frames, rate=1000), nav_shape=(3, 4)) as acq:
...     (res,) = ltdask.compute(acq, [ltdask.udf.SumSigUDF()])
>>> res["intensity"].values.tolist()
[[64.0, 64.0, 64.0, 64.0], [64.0, 64.0, 64.0, 64.0], [64.0, 64.0, 64.0, 64.0]]
"""

from __future__ import annotations

from ltdask.acquire.dataset import Acquisition
from ltdask.acquire.follow import follow
from ltdask.acquire.follow_hdf5 import Hdf5FollowSource
from ltdask.acquire.follow_raw import RawFollowSource
from ltdask.acquire.replay import ReplaySource
from ltdask.acquire.source import Header, Sink, Source
from ltdask.acquire.store import AcquisitionError, FrameStore

__all__ = [
    "Acquisition",
    "AcquisitionError",
    "FrameStore",
    "Hdf5FollowSource",
    "Header",
    "RawFollowSource",
    "ReplaySource",
    "Sink",
    "Source",
    "follow",
]
