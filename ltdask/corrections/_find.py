"""Finding a detector's hot, dead and noisy pixels from a scan (`find_excluded`).

The per-pixel statistics come from the dataset's dask array and the shared moments kernel
(`pixel_statistics`), not from a UDF run: corrections sit below the UDF layer, which
applies them.
"""

from __future__ import annotations

import math

import numpy as np

from ltdask.common.roi import normalize_roi
from ltdask.exceptions import DataSetError
from ltdask.kernels.statistics import BLOCK, moments


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

    From the per-pixel mean and standard deviation over the frames (`pixel_statistics`, as
    `StdDevUDF` computes them), each pixel
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

    mean, std, frames = pixel_statistics(dataset, roi)
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


def pixel_statistics(dataset, roi=None) -> tuple[np.ndarray, np.ndarray, int]:
    """The per-pixel mean and (population) standard deviation in float64 over the frames of
    `dataset` (those `roi` selects), and how many frames that is.

    One pass: each chunk of the dataset's dask array gets its per-pixel count, mean and
    centred sum of squares from the moments kernel the UDFs use, in a task of its own; the
    chunks' statistics then join by Chan et al.'s formula.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> from ltdask.corrections._find import pixel_statistics
    >>> data = np.arange(2 * 3 * 2 * 2, dtype=np.uint16).reshape(2, 3, 2, 2)
    >>> mean, std, frames = pixel_statistics(ltdask.from_array(data))
    >>> mean.tolist(), frames
    ([[10.0, 11.0], [12.0, 13.0]], 6)
    >>> bool(np.allclose(std, data.std(axis=(0, 1))))
    True
    """
    import dask

    from ltdask.runtime.progress import compute

    arr = dataset.to_dask()
    if np.dtype(arr.dtype).kind == "c":
        raise DataSetError(
            f"find_excluded takes real pixel values; this dataset's are {arr.dtype} (pass "
            "the magnitudes, e.g. ltdask.from_array(abs(data)))"
        )
    nav = len(dataset.nav_shape)
    roi_flat = normalize_roi(roi, dataset)
    roi_nd = None if roi_flat is None else roi_flat.reshape(tuple(dataset.nav_shape))
    starts = [np.cumsum((0, *sizes)).tolist() for sizes in arr.chunks]
    tasks, regions = [], []
    for index, block in np.ndenumerate(arr.to_delayed()):
        cut = tuple(slice(starts[d][i], starts[d][i + 1]) for d, i in enumerate(index))
        keep = None if roi_nd is None else roi_nd[cut[:nav]]
        if keep is not None and not keep.any():
            continue
        tasks.append(dask.delayed(_chunk_moments, pure=True)(block, keep, nav))
        regions.append(cut[nav:])
    sig_shape = tuple(arr.shape[nav:])
    count = np.zeros(sig_shape, dtype=np.int64)
    mean = np.zeros(sig_shape)
    m2 = np.zeros(sig_shape)
    for region, (n, part_mean, part_m2) in zip(regions, compute(*tasks), strict=True):
        if n == 0:
            continue
        have = count[region]
        total = have + n
        delta = part_mean - mean[region]
        m2[region] += part_m2 + delta * delta * (have * n / total)
        mean[region] += delta * (n / total)
        count[region] = total
    frames = int(count.flat[0]) if count.size else 0
    std = np.sqrt(m2 / frames) if frames else np.full(sig_shape, np.nan)
    return (mean if frames else np.full(sig_shape, np.nan)), std, frames


def _chunk_moments(block, keep, nav: int) -> tuple[int, np.ndarray, np.ndarray]:
    """``(frames, per-pixel mean, per-pixel centred sum of squares)`` of one chunk (`nav`
    dims of positions, then the signal's), over the positions `keep` selects."""
    if hasattr(block, "todense"):  # a sparse chunk
        block = block.todense()
    block = np.asarray(block)
    sig_shape = block.shape[nav:]
    px = math.prod(sig_shape)
    frames = block.reshape(-1, px)
    if keep is not None:
        frames = frames[keep.reshape(-1)]
    frames = np.ascontiguousarray(frames)
    mean, m2, shift = np.zeros(px), np.zeros(px), np.zeros(px)
    n = moments(frames, 0, px, 0, mean, m2, shift, np.empty(2 * BLOCK))
    return n, mean.reshape(sig_shape), m2.reshape(sig_shape)
