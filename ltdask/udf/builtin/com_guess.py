"""Guessing `CoMUDF`'s parameters from a CoM result (LiberTEM's ``guess_corrections``).

For atomic-resolution STEM of a non-magnetic specimen the field is electrostatic: the
right ``scan_rotation`` / ``flip_y`` make its curl vanish, and its divergence is strongly
negative at the atom columns (the beam is pulled towards the nuclei).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ltdask.udf.builtin.com import apply_correction

__all__ = ["GuessResult", "coordinate_check", "guess_corrections"]


class GuessResult(NamedTuple):
    """Parameters for ``CoMUDF.with_params(**guess._asdict())``."""

    scan_rotation: int
    flip_y: bool
    cy: float
    cx: float


def _default_roi(roi):
    # the last row and column of a CoM field hold edge artefacts
    return (slice(0, -1), slice(0, -1)) if roi is None else roi


def _curl(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.gradient(y, axis=-1) - np.gradient(x, axis=-2)


def coordinate_check(y_centers, x_centers, roi=None) -> tuple[np.ndarray, np.ndarray]:
    """RMS curl of the corrected field for ``scan_rotation`` 0, 1, ... 359 degrees, without
    and with ``flip_y``: ``(straight, flipped)``, two arrays of 360. `roi` selects the scan
    positions counted (default: all but the last row and column)."""
    roi = _default_roi(roi)
    y = np.asarray(y_centers, dtype=np.float64)
    x = np.asarray(x_centers, dtype=np.float64)
    out = []
    for flip_y in (False, True):
        rms = np.empty(360)
        for angle in range(360):
            fy, fx = apply_correction(y, x, angle, flip_y)
            rms[angle] = np.sqrt(np.mean(_curl(fy, fx)[roi] ** 2))
        out.append(rms)
    return out[0], out[1]


def guess_corrections(y_centers, x_centers, roi=None) -> GuessResult:
    """``scan_rotation`` and ``flip_y`` that minimise the field's RMS curl, turned by 180°
    where the divergence has the heavier tail on the positive side (it should be on the
    negative one: the atom columns), as an angle in (-180, 180]; ``cy``, ``cx``: the mean
    of `y_centers` and `x_centers` over `roi` (default: all but the last row and column).

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.udf.builtin.com_guess import guess_corrections
    >>> yy, xx = np.mgrid[-4:5, -4:5].astype(float)
    >>> field = -yy, -xx  # pulled towards one "atom" in the middle: no curl
    >>> tuple(guess_corrections(*field)[:2])
    (0, False)
    """
    roi = _default_roi(roi)
    y = np.asarray(y_centers, dtype=np.float64)
    x = np.asarray(x_centers, dtype=np.float64)
    straight, flipped = coordinate_check(y, x, roi)
    flip_y = bool(flipped.min() < straight.min())
    angle = int(np.argmin(flipped if flip_y else straight))
    fy, fx = apply_correction(y, x, angle, flip_y)
    div = (np.gradient(fy, axis=-2) + np.gradient(fx, axis=-1))[roi]
    extent = max(-div.min(), div.max())
    counts, _ = np.histogram(div, bins=5, range=(-extent, extent))
    if counts[0] < counts[-1]:
        angle += 180
    if angle > 180:
        angle -= 360
    return GuessResult(angle, flip_y, float(np.mean(y[roi])), float(np.mean(x[roi])))
