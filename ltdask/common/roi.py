"""What users may pass as ``roi=``, normalised once (`normalize_roi`): a flat boolean array
over the scan's positions, or None for all of them. UDF runs select positions by it
(:mod:`ltdask.udf.roi`), and so does `ltdask.corrections.find_excluded`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from ltdask.exceptions import ROIDtypeWarning, UDFError, warn

__all__ = ["normalize_roi"]


class Scan(Protocol):
    """What the ROI is checked against: a dataset's nav shape (any `ltdask.DataSet`)."""

    @property
    def nav_shape(self) -> Sequence[int]: ...


def normalize_roi(roi, dataset: Scan) -> np.ndarray | None:
    """The ROI as a flat boolean array of the nav size, or None; clear errors otherwise.

    Accepted, as LiberTEM: a boolean array of the nav shape or the flat nav size; a sparse
    array (pydata ``sparse``, ``scipy.sparse``); a tuple of ints (one position); a list or
    tuple of ``(coordinates, value)`` pairs that all share one value (the other positions
    get the other). Other dtypes are cast to bool with a warning.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> from ltdask.common.roi import normalize_roi
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
