"""`FEMUDF`: fluctuation electron microscopy (the spread of each frame inside a ring), and
`run_fem`."""

from __future__ import annotations

import numba
import numpy as np

from ltdask.udf.base import UDF


def disk(cy: float, cx: float, shape: tuple[int, int], radius: float) -> np.ndarray:
    """Boolean disk ``(y - cy)² + (x - cx)² <= radius²`` of `shape` (as LiberTEM's masks)."""
    h, w = shape
    y = np.arange(h, dtype=np.float64)[:, None] - cy
    x = np.arange(w, dtype=np.float64)[None, :] - cx
    return y * y + x * x <= radius * radius


@numba.njit(nogil=True, cache=True)
def ring_moments(frames, p0, pixels, seen, mean, m2):
    """Per frame ``i`` of the flat tile: the values ``frames[i, p0 + pixels]`` (two passes
    over them: their mean, then the squared deviations from it) merged into the frame's
    ``seen``, ``mean`` and ``m2`` (Chan et al.'s pairwise update)."""
    k = pixels.size
    for i in range(frames.shape[0]):
        row = frames[i]
        total = 0.0
        for j in range(k):
            total += row[p0 + pixels[j]]
        part_mean = total / k
        squares = 0.0
        for j in range(k):
            d = row[p0 + pixels[j]] - part_mean
            squares += d * d
        before = seen[i]
        n = before + k
        delta = part_mean - mean[i]
        mean[i] += delta * (k / n)
        m2[i] += squares + delta * delta * (before * k / n)
        seen[i] = n


class FEMUDF(UDF):
    """Fluctuation EM (Gibson 1997): the standard deviation of each frame's pixels inside a
    ring: result ``intensity``, nav-shaped, float32.

    The ring holds the pixels with ``rad_in² < d² <= rad_out²``, ``d`` the distance from
    `center`. The standard deviation is the population one (``numpy.std``); an empty ring
    gives NaN.

    Tiles, numpy (a numba kernel on flat tiles) or CuPy: each tile's ring pixels give per
    frame their count, mean and sum of squared deviations (in float64), merged across the
    signal slices of tiles that cut the frame (Chan et al.'s pairwise update), so that no
    frame loops in Python (LiberTEM processes frame by frame) and a GPU gets whole tiles.

    Parameters
    ----------
    center : tuple of float
        Centre of the ring. As in LiberTEM, the first value is the row (y) and the second
        the column (x), although LiberTEM's documentation calls it ``(x, y)``.
    rad_in : float
        Inner radius of the ring.
    rad_out : float
        Outer radius of the ring.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> data = np.zeros((2, 3, 9, 9), dtype=np.float32); data[..., 4, 7] = 8
    >>> res = ltdask.udf.FEMUDF(center=(4, 4), rad_in=2, rad_out=3).compute(
    ...     ltdask.from_array(data))
    >>> round(float(res["intensity"][0, 0]), 4)  # one 8 among 16 ring pixels
    1.9365
    """

    def __init__(self, center, rad_in, rad_out):
        super().__init__(center=center, rad_in=rad_in, rad_out=rad_out)

    def get_backends(self):
        return (self.BACKEND_NUMPY, self.BACKEND_CUPY)

    def get_result_buffers(self):
        # per frame: the ring pixels seen so far, their mean and sum of squared deviations
        state = {"kind": "nav", "dtype": "float64", "use": "private", "where": "device"}
        return {
            "intensity": self.buffer(kind="nav", dtype="float32"),
            "seen": self.buffer(**state),
            "mean": self.buffer(**state),
            "m2": self.buffer(**state),
        }

    def get_task_data(self):
        sig = tuple(self.meta.dataset_shape.sig)
        if len(sig) != 2:
            raise ValueError(f"FEMUDF needs 2-D frames, the data has signal shape {sig}")
        cy, cx = self.params.center[0], self.params.center[1]
        ring = disk(cy, cx, sig, self.params.rad_out) & ~disk(cy, cx, sig, self.params.rad_in)
        return {"ring": ring, "local": {}}

    def _local(self):
        """The ring's pixels in the current tile's signal slice (flat indices into it), as
        the tile's array module wants them."""
        local, idx = self.task_data.local, self.meta.tiling_scheme_idx
        if idx not in local:
            inside = np.flatnonzero(self.task_data.ring[self.meta.sig_slice.get()])
            local[idx] = self.xp.asarray(inside)
        return local[idx]

    def process_flat_tile(self, frames, p0, p1):
        local = self._local()
        if local.size:
            r = self.results
            ring_moments(frames, p0, local, r.seen, r.mean, r.m2)

    def process_tile(self, tile):
        local = self._local()
        if local.size == 0:
            return
        n = tile.shape[0]
        values = tile.reshape(n, -1)[:, local].astype(np.float64)
        k = local.size
        mean = values.mean(axis=1)
        m2 = ((values - mean[:, None]) ** 2).sum(axis=1)
        r = self.results
        before = r.seen.copy()
        total = before + k
        delta = mean - r.mean
        r.mean[:] += delta * (k / total)
        r.m2[:] += m2 + delta * delta * (before * k / total)
        r.seen[:] = total

    def postprocess(self):
        r = self.results
        xp = self.xp
        seen = r.seen
        # (an empty ring: NaN, as numpy.std of nothing, without its warning)
        std = xp.where(seen > 0, xp.sqrt(r.m2 / xp.maximum(seen, 1)), xp.nan)
        r.intensity[:] = self.forbuf(std, r.intensity)


def run_fem(ctx, dataset, center, rad_in, rad_out, roi=None):
    """The standard deviation of each frame's pixels inside a ring (see `FEMUDF`).

    Parameters
    ----------
    ctx : ltdask.compat.Context
    dataset
        A dataset with 1- or 2-D nav and 2-D signal dims.
    center : tuple of float
        Centre of the ring, row first (see `FEMUDF`).
    rad_in, rad_out : float
        Inner and outer radius of the ring.
    roi : numpy.ndarray, optional
        Boolean, nav-shaped: the frames to analyse.

    Returns
    -------
    dict
        ``{"intensity": result}`` as ``ctx.run_udf`` gives it; ``["intensity"].data`` is
        the nav-shaped array.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.ones((2, 2, 9, 9), dtype=np.float32))
    >>> run_fem(ctx, ds, center=(4, 4), rad_in=1, rad_out=3)["intensity"].data.tolist()
    [[0.0, 0.0], [0.0, 0.0]]
    """
    udf = FEMUDF(center=center, rad_in=rad_in, rad_out=rad_out)
    return ctx.run_udf(dataset=dataset, udf=udf, roi=roi)
