"""`find_beam`: sampling frames, cleaning them, the threshold and the centre."""

from __future__ import annotations

import math

import numpy as np

from ltdask.beam._constants import _GROW
from ltdask.beam._edges import _balanced, _edge, _fit_edge
from ltdask.beam._result import Beam
from ltdask.exceptions import DataSetError
from ltdask.udf.builtin.pick import PickUDF
from ltdask.udf.roi import normalize_roi


def _sample(nav_shape: tuple[int, ...], frames: int) -> np.ndarray:
    """Flat positions of an even grid of about `frames` positions over the scan (ends
    included), each dim getting a share in proportion to its length."""
    counts = [1] * len(nav_shape)
    while math.prod(counts) < frames:
        # the dim whose samples lie furthest apart gets one more
        spacing = [n / c if c < n else 0 for n, c in zip(nav_shape, counts, strict=True)]
        dim = int(np.argmax(spacing))
        if spacing[dim] == 0:
            break
        counts[dim] += 1
        if math.prod(counts) > frames:
            counts[dim] -= 1
            break
    axes = [
        np.unique(np.linspace(0, n - 1, c).round().astype(np.int64))
        for n, c in zip(nav_shape, counts, strict=True)
    ]
    grid = np.meshgrid(*axes, indexing="ij")
    return np.ravel_multi_index(tuple(g.ravel() for g in grid), nav_shape)


def _read(dataset, frames: int, roi, corrections) -> tuple[np.ndarray, np.ndarray]:
    """The flat positions chosen and their frames ``(n, sy, sx)``: an even sample of the
    valid positions (within `roi`)."""
    valid = dataset.valid_nav_mask().reshape(-1)
    chosen = normalize_roi(roi, dataset)
    if chosen is None:
        flat = _sample(dataset.nav_shape, frames)
        flat = flat[valid[flat]]
        if flat.size == 0:  # the grid fell on missing frames only
            flat = np.flatnonzero(valid)
    else:
        flat = np.flatnonzero(chosen & valid)
    if flat.size > frames:
        flat = flat[np.linspace(0, flat.size - 1, frames).round().astype(np.int64)]
    if flat.size == 0:
        where = "in the ROI" if roi is not None else "in the scan"
        raise DataSetError(
            f"{dataset.path}: no frames to find the beam in: none of the positions {where} "
            f"holds a frame (sync_offset={dataset.sync_offset}); choose positions that do"
        )
    mask = np.zeros(dataset.num_frames, dtype=bool)
    mask[flat] = True
    result = PickUDF().compute(
        dataset, roi=mask.reshape(dataset.nav_shape), corrections=corrections
    )
    picked = np.asarray(result["intensity"].values)
    if picked.dtype.kind == "f" and not np.isfinite(picked).all():
        # pixels without a value (detector gaps) are dark, as a beam stop's shadow is
        picked = np.nan_to_num(picked, nan=0.0, posinf=0.0, neginf=0.0)
    return flat, picked


def _above_neighbours(image: np.ndarray, margin: float) -> np.ndarray:
    """Coordinates ``(2, N)`` of the pixels of `image` above all 8 neighbours by more than
    `margin`."""
    from scipy import ndimage

    ring = np.ones((3, 3), dtype=bool)
    ring[1, 1] = False
    # mirror: an edge pixel's missing neighbours are other pixels, never itself
    neighbours = ndimage.maximum_filter(image, footprint=ring, mode="mirror")
    return np.array(np.nonzero(image - neighbours > margin))


def _typical_frame(frames: np.ndarray) -> np.ndarray:
    """The per-pixel median of `frames` (float64), a few rows at a time."""
    n, sy, sx = frames.shape
    rows = max(1, 2**22 // max(n * sx, 1))
    return np.concatenate(
        [np.median(frames[:, y : y + rows], axis=0) for y in range(0, sy, rows)], axis=0
    )


def _defects(frames: np.ndarray) -> tuple[np.ndarray, float]:
    """The detector's hot pixels (coordinates ``(2, N)``) and the margin above all
    neighbours that makes a pixel of one frame hot (the beam's contrast; infinite where
    single frames do not show the beam).

    Both from the per-pixel median of the frames, which a frame's own hot pixels do not
    reach (they pile up in the mean, around a small disk too); its hot pixels stand above
    all 8 neighbours by more than half the contrast of its 3×3 median, which single pixels
    do not reach. Where the median shows no beam (frames of a few sparse counts), the mean
    is used, and no frame's pixel is called hot: its single counts would be."""
    from scipy import ndimage

    spike = math.inf
    typical = _typical_frame(frames)
    background, top = _levels(ndimage.median_filter(typical, size=3, mode="nearest"))
    if top > background:
        spike = top - background
    else:
        typical = frames.mean(axis=0, dtype=np.float64)
        background, top = _levels(ndimage.median_filter(typical, size=3, mode="nearest"))
    if not top > background:
        return np.zeros((2, 0), dtype=np.int64), spike
    return _above_neighbours(typical, (top - background) / 2), spike


def _repair(frame: np.ndarray, hot: np.ndarray) -> np.ndarray:
    """`frame` (float64) with the `hot` pixels replaced by the median of their 8
    neighbours (those inside the frame and not hot themselves)."""
    out = frame.copy()
    if hot.shape[1] == 0:
        return out
    sy, sx = frame.shape
    offsets = np.array([(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1) if dy or dx])
    ys = hot[0][:, None] + offsets[:, 0]
    xs = hot[1][:, None] + offsets[:, 1]
    inside = (ys >= 0) & (ys < sy) & (xs >= 0) & (xs < sx)
    ys, xs = np.clip(ys, 0, sy - 1), np.clip(xs, 0, sx - 1)
    is_hot = np.zeros(frame.shape, dtype=bool)
    is_hot[tuple(hot)] = True
    neighbours = np.where(inside & ~is_hot[ys, xs], out[ys, xs], np.nan)
    # the median of each row's numbers: sorted, the NaNs go last
    count = (~np.isnan(neighbours)).sum(axis=1)
    usable = count > 0
    ordered = np.sort(neighbours[usable], axis=1)
    rows, count = np.arange(len(ordered)), count[usable]
    median = (ordered[rows, (count - 1) // 2] + ordered[rows, count // 2]) / 2
    out[hot[0][usable], hot[1][usable]] = median
    return out


def _clean(frame: np.ndarray, hot: np.ndarray, spike: float) -> np.ndarray:
    """`frame` as float64 with the detector's `hot` pixels repaired, and any pixel above
    all 8 neighbours by more than `spike` (a hot pixel of this frame alone, a cosmic ray):
    no count of a disk's pixels does that where each holds a few counts. Three rounds: the
    second pixel of a pair stands out once the first is gone."""
    out = _repair(frame.astype(np.float64), hot)
    for _ in range(3 if math.isfinite(spike) else 0):
        spikes = _above_neighbours(out, spike)
        if spikes.shape[1] == 0:
            break
        out = _repair(out, spikes)
    return out


def _levels(mean: np.ndarray) -> tuple[float, float]:
    """``(background, plateau)`` of `mean`: the plateau its brightest pixel, the background
    the median of the pixels below the level halfway between the two (iterated from the
    darkest pixel)."""
    top = float(mean.max())
    background = float(mean.min())
    for _ in range(20):
        below = mean[mean < (top + background) / 2]
        if below.size == 0:
            break
        new = float(np.median(below))
        if new == background:
            break
        background = new
    return background, top


def _centre(
    image: np.ndarray, level: float, background: float, contrast: float, hidden: np.ndarray
) -> tuple[float, float, int]:
    """``(cy, cx, area)`` of the beam in `image`: the centre of mass of the intensity above
    `background` over the brightest large region above `level`, grown (see the module's
    description), balanced where part of the disk is `hidden` or off the frame; NaN and 0
    where nothing is above `level`."""
    from scipy import ndimage

    labels, count = ndimage.label(image > level)
    if count == 0:
        return math.nan, math.nan, 0
    areas = np.bincount(labels.ravel())
    areas[0] = 0
    # of the regions at least half as large as the largest (not a hot pixel, not noise),
    # the brightest: the direct beam among diffracted disks of its size
    excess = np.bincount(labels.ravel(), image.ravel() - level)
    excess[areas < areas.max() / 2] = -np.inf
    excess[0] = -np.inf
    chosen = int(np.argmax(excess))
    main = labels == chosen
    # grow to the region above a tenth of the contrast that holds it, then a little more
    low_labels, low_count = ndimage.label(image > background + contrast / 10)
    holds_main = np.zeros(low_count + 1, dtype=bool)
    holds_main[low_labels[main]] = True
    holds_main[0] = False
    region = holds_main[low_labels]
    region = ndimage.binary_dilation(region | main, iterations=_GROW)
    ys, xs = np.nonzero(region)
    weights = np.clip(image[ys, xs] - background, 0, None)
    total = weights.sum()
    if not total > 0:
        return math.nan, math.nan, 0
    cy, cx = float(ys @ weights / total), float(xs @ weights / total)
    reach = float(np.hypot(ys - cy, xs - cx).max()) + 1
    cy, cx, cut = _balanced(image, cy, cx, reach, background, hidden)
    if cut:
        fitted = _fit_edge(image, cy, cx, reach, level, hidden)
        if fitted is not None:
            cy, cx = fitted
    return cy, cx, int(areas[chosen])


def find_beam(dataset, frames: int = 64, *, roi=None, corrections=None) -> Beam:
    """Find the direct beam: its centre and radius, and its centre in each of a few frames
    spread over the scan (how it wanders), from one quick pass over those frames.

    Robust to hot pixels (single pixels of any value, in every frame or in one), a
    saturated disk (flat at the dtype's maximum), a beam stop's shadow (darker than the
    background) beside the disk or across up to about half of it, and a disk partly off
    the frame; see `ltdask.beam` for the method. The beam must stand out of the
    background, and be the brightest of the disks its size: pass a `roi` where it is
    alone (e.g. over vacuum) where diffracted disks are as bright, and where they are
    larger.
    Each frame's centre needs a disk of a few counts per pixel in that frame; frames of
    sparser counts give scattered ones (the mean frame still gives ``cy``, ``cx``, ``r``).

    Parameters
    ----------
    dataset : ltdask.DataSet
        A scan with 2-D frames.
    frames : int
        How many frames to sample: an even grid over the scan (its ends included), or
        spread evenly over the positions of `roi`. Only these frames are read, and held
        in memory together (64 frames of 256 × 256 uint16: 8 MiB).
    roi : array-like of bool, optional
        Sample only positions where it is True (nav-shaped, as for `ltdask.compute`).
    corrections : ltdask.CorrectionSet, optional
        Corrections applied to the frames read (by default the acquisition's own).
        Pixels that are NaN or infinite (detector gaps) count as dark, as a shadow.

    Returns
    -------
    Beam
        ``cy``, ``cx``, ``r`` (px) and each sampled frame's centre; ``beam.plot()``
        draws the mean frame with the disk found.

    Raises
    ------
    ltdask.DataSetError
        The frames are not 2-D or complex, the sampled frames are blank (zero or one value
        everywhere) or nothing stands out of their background, or no position to sample
        holds a frame.
    ValueError
        `frames` is not a positive integer.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> from ltdask.io.synthetic import synthetic_scan
    >>> scan, shifts = synthetic_scan((16, 16), (64, 64))  # r = 8 around (32, 32) + shifts
    >>> beam = ltdask.find_beam(ltdask.from_array(scan))
    >>> round(beam.cy), round(beam.cx), round(beam.r)
    (32, 32, 8)
    >>> com = ltdask.udf.CoMUDF.with_params(cy=beam.cy, cx=beam.cx, r=beam.r + 2)
    """
    if isinstance(frames, bool) or not isinstance(frames, (int, np.integer)) or frames < 1:
        raise ValueError(f"find_beam: frames={frames!r}; expected a positive integer")
    if dataset.dtype.kind == "c":
        raise DataSetError(
            f"{dataset.path}: find_beam needs real intensities, this scan holds "
            f"{dataset.dtype}; give it the intensities (e.g. abs(data) ** 2 through "
            f"ltdask.from_array)"
        )
    if len(dataset.sig_shape) != 2:
        raise DataSetError(
            f"{dataset.path}: find_beam needs 2-D frames, this scan's are "
            f"{dataset.sig_shape} ({len(dataset.sig_shape)} signal dims); open it with "
            f"two signal dims (sig_dims=2 or a sig_shape of two numbers)"
        )
    flat, picked = _read(dataset, int(frames), roi, corrections)
    hot, spike = _defects(picked)

    def cleaned():
        return (_clean(frame, hot, spike) for frame in picked)

    mean = sum(cleaned(), start=np.zeros(picked.shape[1:])) / len(picked)
    background, top = _levels(mean)
    contrast = top - background
    if not contrast > 0:
        raise DataSetError(
            f"{dataset.path}: the {len(flat)} frames sampled are blank (every pixel "
            f"{top:g}): no beam to find; check the file, its dtype and offsets"
        )
    # the mean frame's noise: is the disk more than a fluctuation of it?
    below = mean[mean < background + contrast / 2]
    noise = 1.4826 * float(np.median(np.abs(below - np.median(below))))
    if contrast < 10 * noise:
        raise DataSetError(
            f"{dataset.path}: no beam stands out of the background in the {len(flat)} "
            f"frames sampled (contrast {contrast:.3g}, noise {noise:.3g}); is the beam "
            f"on the detector?"
        )
    level = background + contrast / 2
    # a beam stop's shadow: darker than the background, where the background stands out
    # of the noise (detector pixels without counts are not a shadow)
    hidden = mean < background / 2 if background > 3 * noise else np.zeros(mean.shape, bool)
    cy, cx, area = _centre(mean, level, background, contrast, hidden)
    centres = np.array(
        [_centre(frame, level, background, contrast, hidden)[:2] for frame in cleaned()]
    ).reshape(-1, 2)
    # out to twice the threshold region's radius, and past the wander
    ok = np.isfinite(centres).all(axis=1)
    spread = float(np.hypot(*(centres[ok] - (cy, cx)).T).max()) if ok.any() else 0.0
    reach = 2 * math.sqrt(area / math.pi) + 4
    # the edge around each frame's centre is as sharp as the disk's where those centres
    # hold, the mean frame's is blurred by the wander: the sharper one gives the radius
    # (frames of a few sparse counts give poor centres, and the mean frame's edge)
    inner = math.sqrt(area / math.pi) / 2
    edges = [_edge([mean], np.array([[cy, cx]]), background, reach + spread, inner, hidden)]
    if ok.any():
        edges.append(_edge(cleaned(), centres, background, reach, inner, hidden))
    edges = [e for e in edges if np.isfinite(e[0])]
    radius = min(edges, key=lambda e: e[1])[0] if edges else math.sqrt(area / math.pi)
    for array in (centres, mean):
        array.flags.writeable = False
    positions = np.stack(np.unravel_index(flat, dataset.nav_shape), axis=-1)
    positions.flags.writeable = False
    return Beam(cy, cx, float(radius), centres, positions, mean, tuple(dataset.nav_shape))
