"""LiberTEM's ``libertem.utils.generate.cbed_frame``: a synthetic convergent-beam
diffraction pattern, disks on a lattice, as LiberTEM's tests and examples make them."""

from __future__ import annotations

import numpy as np

from ltdask import masks

__all__ = ["cbed_frame"]


def _lattice_indices(indices) -> np.ndarray:
    """`indices` as ``(n, 2)`` pairs: given so, or as ``numpy.mgrid`` output ``(2, n, m)``
    (taken column by column, as LiberTEM does)."""
    indices = np.asarray(indices)
    if indices.ndim == 3 and indices.shape[0] == 2:
        return indices.T.reshape(-1, 2)
    if indices.ndim == 2 and indices.shape[1] == 2:
        return indices
    raise ValueError(
        f"cbed_frame: indices has shape {indices.shape}; expected (n, 2) pairs or "
        "numpy.mgrid output (2, n, m)"
    )


def cbed_frame(
    fy=128,
    fx=128,
    zero=None,
    a=None,
    b=None,
    indices=None,
    radius=4,
    all_equal=False,
    margin=None,
):
    """A ``(1, fy, fx)`` float32 frame of antialiased disks of `radius` at the lattice
    points ``zero + i * a + j * b`` (``(y, x)`` vectors) for the index pairs ``(i, j)`` of
    `indices` whose point lies at least `margin` (default: `radius`) inside the frame.

    Defaults as LiberTEM's: `zero` the frame's centre ``(fy // 2, fx // 2)``, `a` is
    ``(fy // 8, 0)``, `b` is `a` turned a quarter turn (``(-a_x, a_y)``), `indices` every
    pair from -10 to 10. With `all_equal` every disk has the value 1; otherwise disk ``k``
    (in the order of the points kept) has ``max(1, top - distance_k + k)``, where
    ``distance_k`` is its distance from `zero` and ``top`` the larger of the largest
    distance + 1 and the number of disks + 1 (disks near the centre are brighter).

    Returns
    -------
    (data, indices, peaks)
        The frame, the index pairs kept and their ``(y, x)`` positions.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat.generate import cbed_frame
    >>> data, indices, peaks = cbed_frame(fy=16, fx=16, radius=1, all_equal=True,
    ...                                   indices=np.array([(0, 0), (1, 0), (5, 0)]))
    >>> data.shape, indices.tolist(), peaks.tolist()  # (5, 0) lies outside the frame
    ((1, 16, 16), [[0, 0], [1, 0]], [[8, 8], [10, 8]])
    """
    zero = np.array((fy // 2, fx // 2) if zero is None else zero)
    a = np.array((fy // 8, 0) if a is None else a)
    b = np.array((-a[1], a[0]) if b is None else b)
    pairs = _lattice_indices(np.mgrid[-10:11, -10:11] if indices is None else indices)
    margin = radius if margin is None else margin
    points = zero + pairs @ np.array((a, b))
    inside = np.all((points >= (margin, margin)) & (points < (fy - margin, fx - margin)), axis=-1)
    pairs, points = pairs[inside], points[inside]
    data = np.zeros((1, fy, fx), dtype=np.float32)
    if not len(points):
        return data, pairs, points
    distances = np.linalg.norm(points - zero, axis=-1)
    top = max(distances.max() + 1, len(points) + 1)
    for k, (y, x) in enumerate(points):
        weight = 1 if all_equal else max(1, top - distances[k] + k)
        disk = masks.circular(x, y, fx, fy, radius, antialiased=True)
        data += disk * weight
    return data, pairs, points
