"""Finding the direct beam: its centre and radius, and how it wanders over the scan
(`find_beam`, which returns a `Beam`).

One quick pass over a sparse, even sample of the frames (read through `PickUDF` with a ROI,
so only those frames are read, with the dataset's corrections), then numpy and
scipy.ndimage on the frames in memory:

1. Hot pixels. The detector's own stand out in the per-pixel median of the frames (above
   all 8 neighbours by more than half the beam's contrast: a disk's edge pixel always has
   neighbours inside the disk, a hot one has none); a frame's own (a cosmic ray) stand
   above all neighbours in that frame by more than the whole contrast, which no disk pixel
   of a few counts does. Each is replaced by the median of its neighbours. Left in, one
   such pixel outweighs a small disk in a centre of mass or a radial profile. Where the
   median does not show the beam (frames of a few sparse counts, where single counts
   would be called hot; a beam that wanders over more than its diameter), the mean is
   used, and frames keep their own.
2. A threshold halfway between the background (the median of the pixels below the
   threshold, iterated: a beam stop's shadow or a disk that fills most of the frame do not
   move it much, where a percentile of the whole frame would) and the plateau (the
   brightest pixel of the repaired mean frame: a flat top at the dtype's maximum for a
   saturated disk).
3. The beam is the brightest (summed above the threshold) of the connected regions above
   it at least half as large as the largest (hot pixels and noise make small ones;
   diffracted disks of the beam's size are dimmer). Its centre is the centre of mass of
   the intensity above the background over that region, grown to the region above a
   tenth of the contrast and 2 px more, so that the blurred edge of a wandering beam in
   the mean frame and the anti-aliased edge of a disk count evenly on all sides:
   sub-pixel, where the threshold mask's own centroid moves in whole pixels. The same for
   each sampled frame, with the mean frame's threshold.
   Where a beam stop's shadow (pixels of the mean frame darker than half the background)
   or the frame's edge cuts the disk, the centre of mass leans away from the cut: first
   only pixels whose mirror image through the centre is seen too count (iterated), then
   the centre is that of the circle through the edge that is seen (rays from the centre,
   smoothed, the points next to the shadow or off the frame left out, least squares
   without the points far off the circle). Up to about half of the disk may be hidden.
4. The radius is where the azimuthal mean profile falls to half height: the edge itself,
   not the threshold area, which moves with the level. Of the profile around each frame's
   own centre (which a wandering beam does not blur) and the mean frame's around the
   centre, the one with the sharper edge: the first unless single frames are too sparse
   for good centres.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ltdask.exceptions import DataSetError
from ltdask.udf.builtin.pick import PickUDF
from ltdask.udf.roi import normalize_roi

__all__ = ["Beam", "find_beam"]

#: the region above the threshold is grown by this many pixels before the centre of mass
_GROW = 2
#: radial profile bins (px)
_BIN = 0.5
#: at most this many rounds of balancing a cut disk's centre of mass
_ROUNDS = 30
#: rays from the centre to the edge of a cut disk
_RAYS = 120


@dataclass(frozen=True, eq=False, repr=False)
class Beam:
    """The direct beam found by `find_beam`, in detector pixels (``cy`` down the rows,
    ``cx`` along them, as `ltdask.udf.CoMUDF` and `ltdask.masks` take them).

    Attributes
    ----------
    cy, cx : float
        The beam's centre in the mean of the sampled frames.
    r : float
        Its radius: where its edge falls to half height. `ltdask.masks` and
        `ltdask.udf.CoMUDF` take the pixels with ``d**2 <= r**2``: add a pixel or two to
        take the whole edge.
    centres : numpy.ndarray
        ``(frames, 2)``: ``(cy, cx)`` in each sampled frame (NaN where no beam was found).
    positions : numpy.ndarray
        ``(frames, nav_dims)``: the nav index of each sampled frame.
    mean_frame : numpy.ndarray
        The mean of the sampled frames (float64), hot pixels repaired.
    nav_shape : tuple of int
        The scan's nav shape.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> data = np.zeros((2, 3, 32, 32), np.float32)
    >>> yy, xx = np.mgrid[:32, :32]
    >>> data[..., (yy - 12) ** 2 + (xx - 20) ** 2 <= 36] = 100
    >>> beam = ltdask.find_beam(ltdask.from_array(data))
    >>> beam
    Beam(cy=12.00, cx=20.00, r=6.04 px; wander up to 0.00 px over 6 of 6 frames)
    >>> beam.centres.shape, beam.frames, beam.wander
    ((6, 2), 6, 0.0)
    """

    cy: float
    cx: float
    r: float
    centres: np.ndarray = field(repr=False)
    positions: np.ndarray = field(repr=False)
    mean_frame: np.ndarray = field(repr=False)
    nav_shape: tuple[int, ...] = ()

    @property
    def frames(self) -> int:
        """How many frames were sampled."""
        return len(self.centres)

    @property
    def found(self) -> int:
        """In how many of them a beam was found."""
        return int(np.isfinite(self.centres).all(axis=1).sum())

    @property
    def wander(self) -> float:
        """The largest distance (px) of a sampled frame's centre from ``(cy, cx)``."""
        ok = np.isfinite(self.centres).all(axis=1)
        if not ok.any():
            return math.nan
        return float(np.hypot(*(self.centres[ok] - (self.cy, self.cx)).T).max())

    def centre_map(self) -> np.ndarray:
        """The centres on the scan: nav shape + ``(2,)``, NaN where no frame was sampled.

        Examples
        --------
        >>> import numpy as np, ltdask
        >>> data = np.zeros((2, 3, 16, 16), np.float32)
        >>> data[0, 0, 5:8, 9:12] = data[0, 2, 6:9, 9:12] = 1  # centres (6, 10), (7, 10)
        >>> beam = ltdask.find_beam(ltdask.from_array(data), frames=2)  # (0, 0) and (0, 2)
        >>> beam.centre_map()[..., 0].tolist()
        [[6.0, nan, 7.0], [nan, nan, nan]]
        """
        out = np.full((*self.nav_shape, 2), np.nan)
        out[tuple(self.positions.T)] = self.centres
        return out

    def plot(
        self,
        ax=None,
        *,
        log: bool = False,
        title: str | None = None,
        cmap: str = "gray",
        colour_bar: bool = True,
        **kwargs,
    ):
        """Show the mean of the sampled frames with the disk found (a circle of radius
        ``r`` around ``(cy, cx)``) and each frame's centre (dots), on pixel axes.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            Where to draw; by default a new pyplot figure.
        log : bool
            A logarithmic colour scale (for a faint disk beside bright ones).
        title : str, optional
            By default the centre and radius.
        cmap : str
        colour_bar : bool
        **kwargs
            Passed to ``imshow`` (``vmin``, ``vmax``, ...).

        Returns
        -------
        matplotlib.axes.Axes

        Examples
        --------
        >>> import numpy as np, ltdask
        >>> from matplotlib.figure import Figure
        >>> data = np.zeros((2, 2, 16, 16), np.float32); data[..., 6:9, 4:7] = 1
        >>> ax = ltdask.find_beam(ltdask.from_array(data)).plot(ax=Figure().add_subplot())
        >>> ax.patches[0].center, ax.get_xlabel()
        ((5.0, 7.0), 'det_x')
        """
        import xarray as xr

        from ltdask import plot

        ax = plot._axes(ax)  # first: its error names what to install
        from matplotlib.colors import LogNorm
        from matplotlib.patches import Circle

        values = self.mean_frame
        if log:
            positive = values[values > 0]
            low = float(positive.min()) if positive.size else 1.0
            kwargs["norm"] = LogNorm(vmin=low, vmax=max(low, float(values.max())))
            values = np.maximum(values, low)
        image = xr.DataArray(values, dims=("det_y", "det_x"), name="mean frame")
        im, _ = plot._show(image, ax, cmap=cmap, **kwargs)
        if colour_bar:
            ax.figure.colorbar(im, ax=ax, label="mean intensity")
        ax.add_patch(Circle((self.cx, self.cy), self.r, fill=False, color="tab:red", lw=1.5))
        ax.plot(self.centres[:, 1], self.centres[:, 0], ".", color="tab:orange", ms=2)
        ax.plot([self.cx], [self.cy], "+", color="tab:red", ms=10)
        if title is None:
            title = f"beam at ({self.cy:.1f}, {self.cx:.1f}), r = {self.r:.1f} px"
        ax.set_title(title)
        return ax

    def __repr__(self) -> str:
        total = math.prod(self.nav_shape)
        found = "" if self.found == self.frames else f", found in {self.found}"
        return (
            f"Beam(cy={self.cy:.2f}, cx={self.cx:.2f}, r={self.r:.2f} px; wander up to "
            f"{self.wander:.2f} px over {self.frames} of {total} frames{found})"
        )


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


def _balanced(image, cy, cx, reach, background, hidden) -> tuple[float, float, bool]:
    """The centre of mass of a disk partly `hidden` (a beam stop's shadow) or cut by the
    frame's edge: over the pixels within reach of the centre whose mirror image through it
    is seen too, so that what is lost on one side is left out on the other; iterated.
    Where nothing within `reach` is hidden or off the frame, ``(cy, cx)`` as it is; and
    whether something was."""
    sy, sx = image.shape
    cut = False
    for _ in range(_ROUNDS):
        y0, y1 = math.floor(cy - reach), math.ceil(cy + reach) + 1
        x0, x1 = math.floor(cx - reach), math.ceil(cx + reach) + 1
        yy, xx = np.mgrid[y0:y1, x0:x1]
        near = np.hypot(yy - cy, xx - cx) <= reach
        yy, xx = yy[near], xx[near]
        my, mx = np.rint(2 * cy - yy).astype(np.int64), np.rint(2 * cx - xx).astype(np.int64)

        def seen(y, x):
            ok = (y >= 0) & (y < sy) & (x >= 0) & (x < sx)
            ok[ok] = ~hidden[y[ok], x[ok]]
            return ok

        both = seen(yy, xx) & seen(my, mx)
        if both.all():
            break
        cut = True
        weights = np.clip(image[yy[both], xx[both]] - background, 0, None)
        total = weights.sum()
        if not total > 0:
            break
        new = float(yy[both] @ weights / total), float(xx[both] @ weights / total)
        moved = math.hypot(new[0] - cy, new[1] - cx)
        cy, cx = new
        if moved < 0.01:
            break
    return cy, cx, cut


def _fit_edge(image, cy, cx, reach, level, hidden) -> tuple[float, float] | None:
    """The centre of the circle through the disk's edge: where rays from ``(cy, cx)``
    last fall below `level` (linear between samples a quarter pixel apart, on the image
    smoothed), leaving out those points next to a `hidden` pixel or off the frame, by
    least squares without the points far off the circle; None where fewer than a third
    of the rays remain."""
    from scipy import ndimage

    sy, sx = image.shape
    angles = np.linspace(0, 2 * np.pi, _RAYS, endpoint=False)
    t = np.arange(0, reach + 2, 0.25)
    ys = cy + np.sin(angles)[:, None] * t
    xs = cx + np.cos(angles)[:, None] * t
    # smoothed, so that the counting noise inside the disk does not end rays early (a
    # circle's edge stays where it is but for a curvature term of sigma² / 2r)
    smooth = ndimage.gaussian_filter(image, 1.0, mode="nearest")
    values = ndimage.map_coordinates(smooth, [ys.ravel(), xs.ravel()], order=1, mode="nearest")
    values = values.reshape(ys.shape)
    # an edge point is where a ray last falls below the level (a ray may cross a shadow
    # on its way), unless that is next to a hidden pixel (which the smoothing spreads) or
    # off the frame: there the shadow or the frame's edge cut the disk
    blocked = ndimage.binary_dilation(hidden, iterations=3)
    iy, ix = np.rint(ys).astype(np.int64), np.rint(xs).astype(np.int64)
    off = (iy < 0) | (iy >= sy) | (ix < 0) | (ix >= sx)
    off[~off] = blocked[iy[~off], ix[~off]]
    above = (values >= level) & ~((iy < 0) | (iy >= sy) | (ix < 0) | (ix >= sx))
    last = len(t) - 1 - above[:, ::-1].argmax(axis=1)
    rows = np.arange(_RAYS)
    good = above.any(axis=1) & (last < len(t) - 1)
    good[good] &= ~off[rows[good], last[good]] & ~off[rows[good], last[good] + 1]
    if good.sum() < _RAYS // 3:
        return None
    rows, k = rows[good], last[good] + 1
    v0, v1 = values[rows, k - 1], values[rows, k]
    at = t[k - 1] + 0.25 * (v0 - level) / (v0 - v1)
    py, px = cy + np.sin(angles[rows]) * at, cx + np.cos(angles[rows]) * at
    keep = np.ones(len(py), dtype=bool)
    for _ in range(3):
        # the circle (y - a)² + (x - b)² = r², linear in a, b and r² - a² - b²
        design = np.column_stack([2 * py[keep], 2 * px[keep], np.ones(int(keep.sum()))])
        (fy, fx, c), *_ = np.linalg.lstsq(design, py[keep] ** 2 + px[keep] ** 2, rcond=None)
        residual = np.hypot(py - fy, px - fx) - math.sqrt(max(c + fy * fy + fx * fx, 0.0))
        spread = 1.4826 * float(np.median(np.abs(residual[keep])))
        keep = np.abs(residual) < max(3 * spread, 0.5)  # noise that ended a ray early
        if keep.sum() < _RAYS // 3:
            return None
    if not math.hypot(fy - cy, fx - cx) < reach:
        return None
    return float(fy), float(fx)


def _edge(frames, centres: np.ndarray, background: float, reach: float, inner: float, hidden):
    """``(radius, width)`` of the disk's edge in the azimuthal mean of `frames` around their
    `centres` (out to `reach` px, leaving out `hidden` pixels): where it first falls below
    half way from its plateau (its mean within `inner` px) to `background`, and how far it
    takes to fall from 3/4 to 1/4 of the way; NaN where it does not fall."""
    nbins = int(reach / _BIN) + 2
    sums = np.zeros(nbins)
    counts = np.zeros(nbins)
    distances = np.zeros(nbins)
    for frame, (cy, cx) in zip(frames, centres, strict=True):
        if not (np.isfinite(cy) and np.isfinite(cx)):
            continue
        sy, sx = frame.shape
        y0, y1 = max(int(cy - reach), 0), min(int(cy + reach) + 2, sy)
        x0, x1 = max(int(cx - reach), 0), min(int(cx + reach) + 2, sx)
        yy, xx = np.mgrid[y0:y1, x0:x1]
        d = np.hypot(yy - cy, xx - cx).ravel()
        inside = (d < reach) & ~hidden[y0:y1, x0:x1].ravel()
        d = d[inside]
        index = (d / _BIN).astype(np.int64)
        sums += np.bincount(index, frame[y0:y1, x0:x1].ravel()[inside], nbins)
        counts += np.bincount(index, None, nbins)
        distances += np.bincount(index, d, nbins)
    filled = counts > 0
    if not filled.any():
        return math.nan, math.nan
    profile = sums[filled] / counts[filled]
    d = distances[filled] / counts[filled]
    plateau = float(profile[: max(1, int(np.searchsorted(d, inner)))].mean())

    def crossing(fraction: float) -> float:
        level = background + fraction * (plateau - background)
        below = np.flatnonzero(profile < level)
        if below.size == 0 or below[0] == 0:
            return math.nan
        k = below[0]
        # linear between the last bin above the level and the first below
        step = (profile[k - 1] - level) / (profile[k - 1] - profile[k])
        return float(d[k - 1] + step * (d[k] - d[k - 1]))

    return crossing(0.5), crossing(0.25) - crossing(0.75)


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
    >>> from ltdask.synthetic import synthetic_scan
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
