"""Finding a detector's hot, dead and noisy pixels from a scan (`find_excluded`)."""

from __future__ import annotations

import numpy as np


class ExcludedReport:
    """What :func:`find_excluded` found: the mask and, per kind, the pixels' coordinates
    (``nonfinite``, ``hot``, ``dead``, ``noisy``: ``(sig_dims, N)`` arrays) and the
    thresholds used.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> data = np.random.default_rng(0).poisson(50, (4, 4, 16, 16)).astype(np.uint16)
    >>> data[..., 3, 5] = 4000
    >>> mask, report = ltdask.corrections.find_excluded(ltdask.from_array(data))
    >>> report
    <ExcludedReport 1 of 256 pixels (1 hot, 0 dead, 0 noisy) from 16 frames>
    >>> report.kinds["hot"].tolist(), report.thresholds["hot"]
    ([[3], [5]], 8.0)
    """

    def __init__(self, mask: np.ndarray, kinds: dict, thresholds: dict, frames: int):
        self.mask = mask
        self.kinds = kinds
        self.thresholds = thresholds
        self.frames = frames

    def __repr__(self) -> str:
        counts = ", ".join(
            f"{len(v[0]) if len(v) else 0} {'non-finite' if k == 'nonfinite' else k}"
            for k, v in self.kinds.items()
            if k != "nonfinite" or v.size
        )
        return (
            f"<ExcludedReport {int(self.mask.sum())} of {self.mask.size} pixels ({counts}) "
            f"from {self.frames} frames>"
        )


def find_excluded(
    dataset,
    hot: float = 8.0,
    dead: float = 0.1,
    noisy: float = 4.0,
    roi=None,
) -> tuple[np.ndarray, ExcludedReport]:
    """Flag hot, dead and noisy pixels of a detector from one pass over a scan (or a dark
    series), by comparing each pixel with the 3×3 neighbourhood around it.

    From the per-pixel mean and standard deviation over the frames (`StdDevUDF`), each pixel
    is compared with the third largest (``high_*``) and third smallest (``low_*``) of its 8
    neighbours' values, so that clusters of up to two bad pixels and the edges of bright
    structures (a diffraction disk: a pixel on either side of the edge has at least three
    neighbours on its own side) do not hide or fake a bad pixel:

    * hot: ``mean - high_mean > hot * s``, where ``s`` is the robust spread (1.4826 × the
      median absolute deviation) of ``mean - high_mean`` over all pixels, and at least
      ``hot * sqrt(high_mean / frames)`` (the counting noise of a mean);
    * dead: ``mean < dead * low_mean`` where the neighbours see signal (``low_mean > 0``);
    * noisy: ``std > noisy * high_std`` where the neighbours vary (``high_std > 0``) (a
      noisy pixel is not called hot, a dead one not noisy);
    * nonfinite: NaN or ±inf in any frame, always flagged (the worst pixels there are);
      they count as ordinary neighbours (the median pixel) for the others.

    Parameters
    ----------
    dataset
        The scan or dark series.
    hot, dead, noisy
        The thresholds above; ``None`` skips that kind.
    roi
        The frames to use.

    Returns
    -------
    mask, report
        The boolean mask of the signal shape (for ``CorrectionSet(excluded_pixels=mask)``)
        and an `ExcludedReport`.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> data = np.random.default_rng(0).poisson(50, (4, 4, 16, 16)).astype(np.uint16)
    >>> data[..., 3, 5] = 4000
    >>> mask, report = ltdask.corrections.find_excluded(ltdask.from_array(data))
    >>> np.argwhere(mask).tolist()
    [[3, 5]]
    """
    from scipy import ndimage

    from ltdask.udf.builtin.stddev import StdDevUDF

    res = StdDevUDF(dtype="float64").compute(dataset, roi=roi)
    mean = np.asarray(res["mean"].values, dtype=np.float64)
    std = np.asarray(res["std"].values, dtype=np.float64)
    frames = int(res["num_frames"].values[0])
    # NaN or inf in a frame makes the mean or the std NaN or inf; left in, NaN would fail
    # every comparison (the spread's median too, hiding every other bad pixel) and inf
    # would rank as the brightest neighbour
    nonfinite = ~(np.isfinite(mean) & np.isfinite(std))
    if nonfinite.any():
        finite = ~nonfinite
        mean = np.where(nonfinite, np.median(mean[finite]) if finite.any() else 0.0, mean)
        std = np.where(nonfinite, np.median(std[finite]) if finite.any() else 0.0, std)
    footprint = np.ones((3,) * mean.ndim, dtype=bool)
    footprint[(1,) * mean.ndim] = False
    n = int(footprint.sum())

    def neighbour(values, rank):
        return ndimage.rank_filter(values, rank, footprint=footprint, mode="mirror")

    high_mean, low_mean = neighbour(mean, n - 3), neighbour(mean, 2)
    high_std = neighbour(std, n - 3)
    kinds: dict = {"nonfinite": np.array(np.nonzero(nonfinite))}
    thresholds: dict = {"hot": hot, "dead": dead, "noisy": noisy}
    flagged = nonfinite.copy()
    # noisy first: a noisy pixel's mean wanders too, which is no reason to call it hot
    is_noisy = np.zeros(mean.shape, dtype=bool)
    if noisy is not None:
        is_noisy = (high_std > 0) & (std > noisy * high_std)
    if hot is not None:
        excess = mean - high_mean
        spread = 1.4826 * np.median(np.abs(excess - np.median(excess)))
        floor = hot * np.sqrt(np.maximum(high_mean, 0) / max(frames, 1))
        is_hot = (excess > np.maximum(hot * spread, floor)) & ~is_noisy & ~flagged
        kinds["hot"] = np.array(np.nonzero(is_hot))
        flagged |= is_hot
    if dead is not None:
        is_dead = (low_mean > 0) & (mean < dead * low_mean) & ~flagged
        kinds["dead"] = np.array(np.nonzero(is_dead))
        flagged |= is_dead
    if noisy is not None:
        is_noisy &= ~flagged
        kinds["noisy"] = np.array(np.nonzero(is_noisy))
        flagged |= is_noisy
    return flagged, ExcludedReport(flagged, kinds, thresholds, frames)
