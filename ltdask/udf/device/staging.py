"""The device tile path's pipeline: tiles staged through pinned host buffers to the device
(`TileStager`), converted and corrected there (`DeviceCorrections`).

Two slots (double buffering), each a pinned host buffer and a device buffer of the
largest tile: a tile is copied from the file's pages into its slot's pinned buffer, then
to the device on the copy stream, which the compute stream waits for. Python goes on to
the next tile while the device still works on this one, so the next read and copy
overlap this tile's compute. A slot is reused two tiles later: its pinned buffer once its
copy is done (a host wait), its device buffer once the compute of its tile is (a wait of
the copy stream, not of the host). Integers cross the bus as they are stored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class _Slot:
    pinned: np.ndarray
    device: Any
    #: the event of the last copy from `pinned`, and of the end of the compute of the
    #: last tile in `device`
    copied: Any = None
    done: Any = None


class TileStager:
    """Tiles of at most `max_elements` elements of `dtype` staged to `device` through
    `slots` reused buffers (see the module's docstring).

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.udf.device import StandInDevice, TileStager
    >>> stager = TileStager(StandInDevice(), np.uint16, 12)
    >>> tile, slot = stager.stage(np.arange(6, dtype=np.uint16).reshape(2, 3))
    >>> tile.tolist()
    [[0, 1, 2], [3, 4, 5]]
    >>> stager.release(slot)
    """

    def __init__(self, device, dtype, max_elements: int, slots: int = 2):
        if slots < 1:
            raise ValueError(f"TileStager: slots={slots}; expected at least 1")
        self.device = device
        self.dtype = np.dtype(dtype)
        self.max_elements = int(max_elements)
        nbytes = self.max_elements * self.dtype.itemsize
        self.slots = [
            _Slot(device.pinned(nbytes).view(self.dtype), device.empty(max_elements, self.dtype))
            for _ in range(slots)
        ]
        self.copies = device.copy_stream()
        self.compute = device.compute_stream()
        self._next = 0

    def stage(self, tile: np.ndarray) -> tuple[Any, _Slot]:
        """`tile` (host, of `dtype`) on the device, ready for the compute stream; give the
        slot back with `release` once the tile's compute is queued."""
        if tile.size > self.max_elements or tile.dtype != self.dtype:
            raise ValueError(
                f"TileStager: a tile of {tile.shape} {tile.dtype}; this stager holds at most "
                f"{self.max_elements} elements of {self.dtype}"
            )
        device = self.device
        slot = self.slots[self._next]
        self._next = (self._next + 1) % len(self.slots)
        if slot.copied is not None:
            device.synchronize(slot.copied)  # (its pinned buffer is read until then)
        pinned = slot.pinned[: tile.size].reshape(tile.shape)
        np.copyto(pinned, tile)  # (the read from the file's pages)
        if slot.done is not None:
            device.wait(self.copies, slot.done)  # (its device buffer is in use until then)
        on_device = slot.device[: tile.size].reshape(tile.shape)
        device.copy_async(on_device, pinned, self.copies)
        slot.copied = device.record(self.copies)
        device.wait(self.compute, slot.copied)
        return on_device, slot

    def release(self, slot: _Slot) -> None:
        """The compute of `slot`'s tile is queued: its device buffer is free once it ran."""
        slot.done = self.device.record(self.compute)

    def finish(self) -> None:
        """Wait for the last copies and computations."""
        for slot in self.slots:
            if slot.done is not None:
                self.device.synchronize(slot.done)


class DeviceCorrections:
    """Tiles on the device converted to `out_dtype` and corrected there with `prepared`
    (a `ltdask.corrections.PreparedCorrections`, or None: converted only); dark frame,
    gain map and the excluded pixels' repair plan moved to the device once per signal
    slice of `scheme`."""

    def __init__(self, device, prepared, scheme, out_dtype):
        self.device = device
        self.prepared = prepared
        self.scheme = scheme
        self.out_dtype = np.dtype(out_dtype)
        self._held: dict[int, tuple] = {}

    def _maps(self, s: int) -> tuple:
        held = self._held.get(s)
        if held is None:
            prepared, device = self.prepared, self.device
            whole = len(self.scheme) == 1
            index = None if whole else self.scheme.sig_indices[s]
            dark, gain = prepared.dark_gain(index, self.out_dtype)
            plan = prepared.plan
            if index is not None:
                box = tuple((sl.start, sl.stop) for sl in index)
                plan = prepared._plan_for(box)  # (the excluded pixels of this slice)
            counts = plan.counts
            width = plan.sources.shape[1] if plan.sources.ndim == 2 else 0
            taken = (np.arange(width)[None, :] < counts[:, None]).astype(self.out_dtype)
            divisor = np.maximum(counts, 1).astype(self.out_dtype)
            repaired = counts > 0
            held = self._held[s] = (
                device.asarray(dark) if dark.size else None,
                device.asarray(gain) if gain.size else None,
                device.asarray(plan.excluded[repaired]) if plan.excluded.size else None,
                device.asarray(plan.sources[repaired]),
                device.asarray(taken[repaired]),
                device.asarray(divisor[repaired]),
            )
        return held

    def apply(self, tile, s: int):
        """`tile` (``(n, *slice shape)`` on the device, as read) as `out_dtype`, corrected;
        `s`: its signal slice in the scheme."""
        if self.prepared is None:
            return tile if tile.dtype == self.out_dtype else tile.astype(self.out_dtype)
        dark, gain, excluded, sources, taken, divisor = self._maps(s)
        out = tile.astype(self.out_dtype)  # (a new array: the slot's buffer stays as read)
        flat = out.reshape(tile.shape[0], math.prod(tile.shape[1:]))
        if dark is not None:
            flat -= dark
        if gain is not None:
            flat *= gain
        if excluded is not None and excluded.size:
            # each excluded pixel the mean of its sources (none of them excluded)
            flat[:, excluded] = (flat[:, sources] * taken).sum(axis=-1) / divisor
        return out
