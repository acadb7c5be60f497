"""The corrections as one linear map of the frame, for UDFs whose results are linear in it.

For a frame ``x`` (flat), the corrected frame is ``A (x - dark)`` with ``A = P G``: ``G`` the
gain map on the diagonal, ``P`` the identity except in the rows of the excluded pixels,
which hold ``1 / count`` at each of their sources (a repaired pixel is the mean of its
corrected neighbours, none of them excluded). A sum over frames is then corrected after
the sum (`LinearCorrection.repair` after the gain), and a mask product ``m . corrected(x)`` is
``(A^T m) . x - (A^T m) . dark`` (`LinearCorrection.adjoint`): the masks change, the
frames are not touched.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ltdask.corrections._kernels import repair_values
from ltdask.kernels.repaired import add_repaired_moments, repaired_shift
from ltdask.kernels.statistics import BLOCK


class LinearCorrection:
    """The corrections of one signal slice as ``A (x - dark)`` (see the module).

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> hot = np.zeros((3, 3), dtype=bool); hot[0, 0] = True
    >>> cs = ltdask.CorrectionSet(gain=np.full((3, 3), 2.0), excluded_pixels=hot)
    >>> linear = cs.for_shape((3, 3)).linear()
    >>> weights = linear.adjoint(np.ones((1, 9)))[0]  # a corrected frame's sum: weights . x
    >>> (weights.reshape(3, 3) * 3).round(6).tolist()  # the corner's 2/3 go to its sources
    [[0.0, 8.0, 6.0], [8.0, 8.0, 6.0], [6.0, 6.0, 6.0]]
    """

    def __init__(self, dark: np.ndarray, gain: np.ndarray, plan, pixels: int) -> None:
        #: flat float64 arrays of the slice; empty where not given
        self.dark = dark
        self.gain = gain
        self.plan = plan
        #: the pixels of the slice
        self.pixels = int(pixels)
        self._derived: dict = {}

    def derived(self, key, make: Callable[[], Any]) -> Any:
        """``make()``, made once per `key` (hashable) for this correction and kept: what a
        UDF derives from it (its masks with the corrections folded in) is made once per
        process, not once per partition or run (a process keeps the `LinearCorrection` of
        each signal slice of the last corrections used, by their content: see
        `PreparedCorrections.linear`). `key` names all that the result depends on
        besides the correction (the UDF's parameters, dtypes)."""
        if key not in self._derived:
            self._derived[key] = make()
        return self._derived[key]

    def repair(self, values: np.ndarray) -> np.ndarray:
        """``P values`` in place (`values` flat float64 of gain-corrected pixels, e.g.
        ``(sums - frames * dark) * gain``): the excluded pixels repaired."""
        plan = self.plan
        repair_values(values, plan.excluded, plan.sources, plan.counts)
        return values

    @functools.cached_property
    def matrix(self):
        """``A`` as a scipy CSR matrix ``(pixels, pixels)``."""
        import scipy.sparse

        plan = self.plan
        size = self.pixels
        gain = self.gain if self.gain.size else np.ones(size)
        rows = np.arange(size)
        keep = np.ones(size, bool)
        repaired = plan.counts > 0
        excluded, counts = plan.excluded[repaired], plan.counts[repaired]
        keep[excluded] = False
        used = np.arange(plan.sources.shape[1])[None, :] < counts[:, None]
        at, slot = np.nonzero(used)
        sources = plan.sources[repaired][at, slot]
        row = np.concatenate([rows[keep], excluded[at]])
        col = np.concatenate([rows[keep], sources])
        value = np.concatenate([gain[keep], gain[sources] / counts[at]])
        return scipy.sparse.csr_matrix((value, (row, col)), shape=(size, size))

    def adjoint(self, masks):
        """``A^T`` applied to each row of `masks` (``(k, pixels)``, dense or scipy
        sparse): float64 (complex128) masks of the same kind whose products with uncorrected frames
        are the products of `masks` with corrected frames, less `offsets`."""
        if hasattr(masks, "tocsr"):
            return (self.matrix.T @ masks.T).T.tocsr()
        # dense: each excluded pixel's weight shared out to its sources, then the gain (2 ms
        # for 16 masks of 256x256 pixels, 1 % excluded; with the matrix built, 6.5 ms)
        masks = np.asarray(masks)
        out = np.array(masks, dtype=np.result_type(masks.dtype, np.float64), copy=True, ndmin=2)
        plan = self.plan
        repaired = plan.counts > 0
        if repaired.any():
            excluded, counts = plan.excluded[repaired], plan.counts[repaired]
            share = out[:, excluded] / counts
            out[:, excluded] = 0.0
            at, slot = np.nonzero(np.arange(plan.sources.shape[1])[None, :] < counts[:, None])
            sources = plan.sources[repaired][at, slot]
            for row, part in zip(out, share, strict=True):
                row += np.bincount(sources, weights=part[at].real, minlength=row.size)
                if out.dtype.kind == "c":  # (bincount adds real weights only)
                    row += 1j * np.bincount(sources, weights=part[at].imag, minlength=row.size)
        if self.gain.size:
            out *= self.gain
        return out

    def offsets(self, adjoint_masks: np.ndarray) -> np.ndarray:
        """``adjoint_masks . dark`` per row: what the dark frame takes from each product."""
        if not self.dark.size:
            return np.zeros(adjoint_masks.shape[0])
        if hasattr(adjoint_masks, "tocsr"):
            return np.asarray(adjoint_masks @ self.dark).reshape(-1)
        # (not ``@``: a BLAS call took 8 ms where other processes kept the CPUs busy, its
        # threads waiting for them; einsum's loop 0.04 ms for one 256x256 mask)
        return np.einsum("kp,p->k", adjoint_masks, self.dark)


class RepairedMoments:
    """The per-pixel moments of the repaired pixels of one signal slice, from uncorrected
    tiles: a repaired pixel's variance needs the covariances of its sources, so its
    values are worked out frame by frame (a few per thousand pixels) and their moments
    kept beside those of the uncorrected pixels (`finish` puts them in). The pass over the
    tile that takes the other pixels' moments works them out from the rows it has just
    read (`during`); `add` is a pass of its own.

    Parameters
    ----------
    linear
        The slice's `LinearCorrection`.
    raw_index
        Where the tiles are a `PixelLayout`'s raw frames: its ``index`` (image pixel to
        raw pixel), to read the sources from.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> hot = np.zeros((3, 3), dtype=bool); hot[1, 1] = True
    >>> cs = ltdask.CorrectionSet(dark=np.ones((3, 3)), excluded_pixels=hot)
    >>> moments = RepairedMoments(cs.for_shape((3, 3)).linear())
    >>> frames = np.arange(2 * 9, dtype=np.uint16).reshape(2, 9)  # two uncorrected frames
    >>> moments.add(frames, 0, 9)
    >>> sums, m2 = np.zeros(9), np.zeros(9)
    >>> moments.finish(sums, m2)
    >>> corrected = frames - 1.0  # dark; the centre is the mean of its 8 neighbours
    >>> centre = corrected[:, [0, 1, 2, 3, 5, 6, 7, 8]].mean(axis=1)
    >>> bool(np.isclose(sums[4], centre.sum()) and np.isclose(m2[4], centre.var() * 2))
    True
    """

    def __init__(self, linear: LinearCorrection, raw_index: np.ndarray | None = None) -> None:
        # (what does not change from partition to partition, made once per process: 0.3 ms
        # for 1 % of 256x256 pixels, 32 partitions of a 2 GiB scan)
        key = ("RepairedMoments", None if raw_index is None else id(raw_index))
        fixed = linear.derived(key, lambda: _repaired_order(linear, raw_index))
        self._keys, self.excluded, self.counts, self.sources, self.weights = fixed[:5]
        #: what the dark frame takes from each repaired value
        self.offsets = fixed[5]
        size = self.excluded.size
        self.shift, self.s1, self.s2 = np.zeros(size), np.zeros(size), np.zeros(size)
        self.frames = 0
        self._starts = fixed[6]

    def add(self, frames: np.ndarray, p0: int, p1: int) -> None:
        """Add the frames of the flat tile ``frames[:, p0:p1]`` (uncorrected)."""
        add_repaired_moments(
            frames,
            p0,
            p1,
            self.sources,
            self.weights,
            self.counts,
            self.frames == 0,
            self.shift,
            self.s1,
            self.s2,
        )
        self.frames += frames.shape[0]

    def during(self, frames: np.ndarray, p0: int, p1: int, run: Callable[[tuple], None]) -> None:
        """Add the frames of the flat tile ``frames[:, p0:p1]`` (uncorrected) in the pass
        ``run(repaired)`` makes over it (a pass of :mod:`ltdask.kernels.repaired` that
        takes the ``repaired`` tuple); the few pixels whose sources lie in two of the
        pass's blocks are added after it."""
        if self.frames == 0:
            repaired_shift(frames, p0, self.sources, self.weights, self.counts, self.shift)
        starts = self._starts.get(p1 - p0)
        if starts is None:
            blocks = -(-(p1 - p0) // BLOCK)
            starts = np.searchsorted(self._keys, np.arange(blocks + 2)).astype(np.int64)
            starts[-1] = self.excluded.size
            starts = self._starts[p1 - p0] = starts
        run((starts, self.sources, self.weights, self.counts, self.shift, self.s1, self.s2))
        rest = int(starts[-2])
        if rest < self.excluded.size:
            add_repaired_moments(
                frames,
                p0,
                p1,
                self.sources[rest:],
                self.weights[rest:],
                self.counts[rest:],
                False,
                self.shift[rest:],
                self.s1[rest:],
                self.s2[rest:],
            )
        self.frames += frames.shape[0]

    def finish(self, sums: np.ndarray, m2: np.ndarray) -> None:
        """Put the repaired pixels' corrected sums and sums of squared deviations into the
        flat `sums` and `m2` of the slice (those of corrected frames elsewhere)."""
        if not self.frames or not self.excluded.size:
            return
        n = self.frames
        sums[self.excluded] = (self.shift - self.offsets) * n + self.s1
        m2[self.excluded] = np.maximum(self.s2 - self.s1 * self.s1 / n, 0.0)


def _repaired_order(linear: LinearCorrection, raw_index: np.ndarray | None) -> tuple:
    """`RepairedMoments`' fixed arrays: the block keys, the repaired pixels, their counts,
    sources (raw pixels where `raw_index`) and weights, what the dark frame takes from each
    repaired value, a cache of the block starts per tile width, and `raw_index`."""
    plan = linear.plan
    repaired = plan.counts > 0
    counts = plan.counts[repaired]
    sources = plan.sources[repaired]
    if raw_index is not None:
        sources = np.asarray(raw_index)[sources]
    used = np.arange(sources.shape[1])[None, :] < counts[:, None]
    # in the order of the blocks of pixels of the passes (`ltdask.kernels.repaired`): by
    # the block that holds all of a pixel's sources, those in two blocks last
    low = np.where(used, sources, np.iinfo(np.int64).max).min(axis=1) // BLOCK
    high = np.where(used, sources, -1).max(axis=1) // BLOCK
    key = np.where(low == high, low, np.iinfo(np.int64).max)
    order = np.argsort(key, kind="stable")
    counts = np.ascontiguousarray(counts[order])
    used = used[order]
    source_pixels = plan.sources[repaired][order]
    gain = linear.gain[source_pixels] if linear.gain.size else np.ones(used.shape)
    weights = np.ascontiguousarray(np.where(used, gain / counts[:, None], 0.0))
    dark = linear.dark[source_pixels] if linear.dark.size else np.zeros(used.shape)
    offsets = (weights * dark).sum(axis=1)
    excluded = plan.excluded[repaired][order]
    starts: dict[int, np.ndarray] = {}
    # (`raw_index` kept with them: its id, in the key they are kept under, then stays its
    # own while they are kept)
    return (
        key[order],
        excluded,
        counts,
        np.ascontiguousarray(sources[order]),
        weights,
        offsets,
        starts,
        raw_index,
    )
