"""The ROI of a run: what users may pass as ``roi=``, normalised once (`normalize_roi`),
and the nav positions it selects (`Selection`), which every part of the engine asks.

Inside the engine nav buffers are *ROI-compressed*: they hold the selected positions only,
in flat nav order. A `Selection` maps between those and the flat positions of the scan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ltdask.exceptions import ROIDtypeWarning, UDFError, warn

if TYPE_CHECKING:
    from ltdask.io.dataset import DataSet


def normalize_roi(roi, dataset: DataSet) -> np.ndarray | None:
    """The ROI as a flat boolean array of the nav size, or None; clear errors otherwise.

    Accepted, as LiberTEM: a boolean array of the nav shape or the flat nav size; a sparse
    array (pydata ``sparse``, ``scipy.sparse``); a tuple of ints (one position); a list or
    tuple of ``(coordinates, value)`` pairs that all share one value (the other positions
    get the other). Other dtypes are cast to bool with a warning.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> ds = ltdask.from_array(np.zeros((2, 3, 4, 4), dtype=np.float32))
    >>> normalize_roi([((0, 1), True), ((1, 2), True)], ds).tolist()
    [False, True, False, False, False, True]
    """
    if roi is None:
        return None
    nav = tuple(dataset.nav_shape)
    if isinstance(roi, (list, tuple)):
        roi = _roi_from_coordinates(roi, nav)
    if hasattr(roi, "todense"):
        roi = roi.todense()
    roi = np.asarray(roi)
    if roi.shape != nav and roi.shape != (math.prod(nav),):
        raise UDFError(
            f"roi of shape {roi.shape} does not fit the dataset's nav shape {nav} "
            f"(or its flat size {math.prod(nav)})"
        )
    if roi.dtype.kind not in "biuf":
        raise UDFError(f"roi must be a boolean (or numeric) array, got dtype {roi.dtype}")
    if roi.dtype != bool:
        # LiberTEM's words (its tests match them)
        warn(f"ROI dtype is {roi.dtype}, expected bool. Attempting cast to bool.", ROIDtypeWarning)
        roi = roi.astype(bool)
    return np.ascontiguousarray(roi.reshape(-1)).copy()


def _roi_from_coordinates(items, nav: tuple[int, ...]) -> np.ndarray:
    if all(isinstance(i, (int, np.integer)) for i in items):
        items = [(tuple(items), True)]
    try:
        pairs = [(tuple(int(c) for c in coords), bool(value)) for coords, value in items]
    except (TypeError, ValueError):
        raise UDFError(
            f"roi={items!r}: a list or tuple ROI holds (coordinates, value) pairs, e.g. "
            "[((0, 1), True), ((2, 3), True)], or is one position as a tuple of ints"
        ) from None
    values = {v for _, v in pairs}
    if len(values) > 1:
        raise UDFError(f"roi={items!r}: all pairs need the same value, got both True and False")
    value = values.pop() if values else True
    roi = np.full(nav, not value, dtype=bool)
    for coords in (c for c, _ in pairs):
        if len(coords) != len(nav) or not all(0 <= c < n for c, n in zip(coords, nav, strict=True)):
            raise UDFError(f"roi: position {coords} is not in the nav shape {nav}")
        roi[coords] = value
    return roi


@dataclass(frozen=True, eq=False)
class Selection:
    """The nav positions a run processes: its normalised ROI (`flat`, None for all) over
    a scan of `nav_shape`.

    Examples
    --------
    >>> import numpy as np
    >>> sel = Selection(np.array([True, False, True, True]), (2, 2))
    >>> sel.positions(1, 4).tolist(), sel.count_before(2), sel.compress(np.arange(4)).tolist()
    ([2, 3], 1, [0, 2, 3])
    """

    flat: np.ndarray | None
    nav_shape: tuple[int, ...]

    @classmethod
    def of(cls, roi, dataset: DataSet) -> Selection:
        """The selection of what a user passed as ``roi=`` (see `normalize_roi`)."""
        return cls(normalize_roi(roi, dataset), tuple(dataset.nav_shape))

    @property
    def nd(self) -> np.ndarray | None:
        """The ROI nav-shaped (``meta.roi``), or None."""
        return None if self.flat is None else self.flat.reshape(self.nav_shape)

    def part(self, start: int, stop: int) -> np.ndarray | None:
        """The ROI of the flat positions ``start:stop`` (a partition), or None for all."""
        return None if self.flat is None else self.flat[start:stop]

    def positions(self, start: int, stop: int) -> np.ndarray:
        """The selected flat positions in ``start:stop``."""
        positions = np.arange(start, stop, dtype=np.int64)
        return positions if self.flat is None else positions[self.flat[start:stop]]

    def count(self, start: int, stop: int) -> int:
        """How many positions of ``start:stop`` are selected."""
        return stop - start if self.flat is None else int(np.count_nonzero(self.flat[start:stop]))

    def count_before(self, start: int) -> int:
        """The ROI-compressed index of flat position `start`: the selected ones before it."""
        return self.count(0, start)

    def compress(self, values):
        """`values` (flat nav first) at the selected positions only."""
        return values if self.flat is None else values[self.flat]

    def scatter(self, compressed: np.ndarray) -> np.ndarray:
        """A flat boolean mask over all positions from one over the selected ones (False
        outside the ROI)."""
        full = np.zeros(math.prod(self.nav_shape), dtype=bool)
        if self.flat is None:
            full[: compressed.size] = compressed
        else:
            full[np.flatnonzero(self.flat)] = compressed
        return full

    def restrict(self, mask: np.ndarray) -> np.ndarray:
        """The flat boolean `mask` (all positions) where it is also selected."""
        return mask if self.flat is None else mask & self.flat

    def describe(self) -> str:
        """For a result's attrs: ``"none"`` or ``"N positions"``."""
        return "none" if self.flat is None else f"{int(self.flat.sum())} positions"
