"""The ROI of a run: what users may pass as ``roi=``, normalised once (`normalize_roi`, in
:mod:`ltdask.common.roi`, below the datasets, which corrections use too), and the nav
positions it selects (`Selection`), which every part of the engine asks.

Inside the engine nav buffers are *ROI-compressed*: they hold the selected positions only,
in flat nav order. A `Selection` maps between those and the flat positions of the scan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ltdask.common.roi import normalize_roi

if TYPE_CHECKING:
    from ltdask.io.dataset import DataSet


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
