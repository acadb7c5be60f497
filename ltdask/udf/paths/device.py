"""Tiles staged to a GPU: for runs whose UDFs all get CuPy arrays, the partition tasks copy
the data's own dtype over the bus (uint8/16/32 as stored, not as floats), through pinned
buffers reused across tiles and on a stream of their own, overlapping the previous tile's
compute; the tiles are converted to the run's input dtype and corrected (dark, gain,
excluded pixels) on the device, where the dark frame and gain map stay for the whole
partition (see :mod:`ltdask.udf.device`).

On a cluster of GPU and CPU workers, a run whose UDFs take both kinds of backend has a
GPU role (`ltdask.udf.backends.GpuRole`): the partitions that go to GPU workers take this
path (`with_gpu_role`), the others the run's own.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ltdask.io.tiling import TilingScheme
from ltdask.runtime.settings import device_tile_bytes
from ltdask.udf.paths.declared import DECODED, TileForm
from ltdask.udf.paths.decoded import DecodedTiles
from ltdask.udf.paths.query import PathQuery

if TYPE_CHECKING:
    from ltdask.udf.paths.query import PartitionFeed

#: the array backend of the UDFs this path serves
CUPY = "cupy"


@dataclass(frozen=True)
class DeviceTiles:
    """Tiles read as `read_dtype` (the data's own), staged to the device, converted and
    corrected there (`prepared`: the run's corrections, or None)."""

    read_dtype: np.dtype
    prepared: Any = None
    tile_dtype: None = None
    form: TileForm = DECODED
    #: (corrected on the device by the path itself, not as the tiles are read)
    corrects_tiles: bool = False

    @classmethod
    def choose(cls, query: PathQuery) -> tuple[DeviceTiles, TilingScheme] | None:
        plan = query.context.backends
        if (
            plan is None
            or plan.device != "cuda"
            or plan.source != "numpy"
            or any(target != CUPY for target in plan.targets)
        ):
            return None
        native = np.dtype(query.dataset.dtype).newbyteorder("=")
        input_dtype = query.context.input_dtype
        integers = native.kind in "ui" and native.itemsize <= 4
        read = native if integers or native == input_dtype else input_dtype
        return cls(read, query.prepared), query.negotiate(read, tile_bytes=device_tile_bytes())

    def deliver(self, feed: PartitionFeed) -> None:
        from ltdask.udf.device import DeviceCorrections, TileStager, current_device

        device = current_device()
        scheme = feed.scheme
        largest = scheme.depth * max(math.prod(sl.shape) for sl in scheme.slices)
        stager = TileStager(device, self.read_dtype, largest)
        out_dtype = feed.read_dtype if self.prepared is None else self.prepared.out_dtype
        fix = DeviceCorrections(device, self.prepared, scheme, out_dtype)
        feed.source = device.backend  # (the tiles are the device's arrays)
        feed.corrections = None  # (corrected here)

        def tiles():
            for data, first, s, _ in feed.dataset.iter_flat_tiles(
                feed.present, scheme, self.read_dtype, feed.block
            ):
                staged, slot = stager.stage(data)
                yield fix.apply(staged, s), first, s, None
                stager.release(slot)  # (every UDF has been given the tile)

        feed.consume(tiles())
        stager.finish()

    def describe(self) -> list[str]:
        what = "converted" + (" and corrected" if self.prepared is not None else "")
        return [
            f"tiles cross to the GPU as {self.read_dtype.name} through pinned buffers "
            f"(double buffered, copies on their own stream), {what} on the device"
        ]


def with_gpu_role(query: PathQuery, path, context):
    """`context` (the run's, with its `path`) with the GPU role of its backend plan given
    this path; without a GPU role where the GPU workers could not take it (a fast path of
    the run's own that cuts other tiles, or UDFs this path does not serve)."""
    plan = context.backends
    role = None if plan is None else plan.gpu_role
    if role is None:
        return context
    chosen = None
    if isinstance(path, DecodedTiles):
        facts: Any = dataclasses.replace(query.context, backends=role.plan)  # type: ignore[type-var]
        chosen = DeviceTiles.choose(dataclasses.replace(query, context=facts))
    role = None if chosen is None else dataclasses.replace(role, path=chosen[0])
    return dataclasses.replace(context, backends=dataclasses.replace(plan, gpu_role=role))
