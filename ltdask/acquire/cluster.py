"""Acquisitions on a ``dask.distributed`` cluster: frames go from the receiver to the workers.

The frames arrive in this process (the receiver's sockets and files are here), so a run
on a cluster cannot read them in its tasks as the threaded scheduler's do. Instead a
feeder thread takes each partition's frames as they are complete, decodes them and
scatters them to the cluster, and publishes the data under a `distributed.Variable` named
after the partition; the partition's block task on a worker waits for that variable
(seceded from the worker's thread pool while it waits) and hands the frames to the UDFs.
"""

from __future__ import annotations

import math
import threading
import uuid

import numpy as np


def cluster_blocks(acquisition, client):
    """A dask array of `acquisition`'s partitions for a run on `client`'s cluster, and
    the started feeder thread that fills it."""
    import dask.array as da

    prefix = f"ltdask-acquire-{uuid.uuid4().hex}"
    nav, sig = acquisition.nav_shape, acquisition.sig_shape
    dtype = acquisition.dtype
    blocks = da.map_blocks(
        _block_from_cluster,
        chunks=(*acquisition.nav_chunks, *((s,) for s in sig)),
        dtype=dtype,
        meta=np.empty((0,) * (len(nav) + len(sig)), dtype=dtype),
        name=prefix,
        prefix=prefix,
        nav_blocks=tuple(len(c) for c in acquisition.nav_chunks),
    )
    feeder = threading.Thread(
        target=_feed,
        args=(acquisition, client, prefix),
        name=f"ltdask feeder {acquisition.path}",
        daemon=True,
    )
    feeder.start()
    return blocks, feeder


def _feed(acquisition, client, prefix: str) -> None:
    """Scatter each partition's decoded frames, in order, as they are complete."""
    from distributed import Variable

    for p in acquisition.get_partitions():
        try:
            frames, payloads = acquisition.take_partition(
                tuple(s.start for s in p.nav_slices),
                tuple(s.stop - s.start for s in p.nav_slices),
            )
            value = client.scatter(frames, hash=False)
            acquisition.store.recycle(payloads)  # (sent: the workers hold copies)
        except Exception as e:  # noqa: BLE001  (the block task raises it on the worker)
            value = _Failed(f"{acquisition.path}: partition {p.index}: {e!r}")
        Variable(f"{prefix}-{p.index}", client=client).set(value)


class _Failed:
    """What a partition's variable holds where its frames could not be scattered."""

    def __init__(self, message: str) -> None:
        self.message = message


def _block_from_cluster(block_info=None, prefix: str = "", nav_blocks=()) -> np.ndarray:
    """On a worker: the partition's frames, once the feeder has published them."""
    from distributed import Variable, get_client, rejoin, secede

    from ltdask.acquire.store import AcquisitionError

    assert block_info is not None
    location = block_info[None]["chunk-location"][: len(nav_blocks)]
    index = int(np.ravel_multi_index(location, nav_blocks)) if nav_blocks else 0
    variable = Variable(f"{prefix}-{index}", client=get_client())
    secede()
    try:
        value = variable.get()
        if isinstance(value, _Failed):
            raise AcquisitionError(value.message)
        data = value.result()
    finally:
        rejoin()
    variable.delete()
    assert math.prod(data.shape) == math.prod(block_info[None]["chunk-shape"])
    return data
