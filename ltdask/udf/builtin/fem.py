"""`FEMUDF`: fluctuation electron microscopy (the spread of each frame inside a ring), and
`run_fem`."""

from __future__ import annotations

import numpy as np

from ltdask.udf.base import UDF


def disk(cy: float, cx: float, shape: tuple[int, int], radius: float) -> np.ndarray:
    """Boolean disk ``(y - cy)² + (x - cx)² <= radius²`` of `shape` (as LiberTEM's masks)."""
    h, w = shape
    y = np.arange(h, dtype=np.float64)[:, None] - cy
    x = np.arange(w, dtype=np.float64)[None, :] - cx
    return y * y + x * x <= radius * radius


class FEMUDF(UDF):
    """Fluctuation EM (Gibson 1997): the standard deviation of each frame's pixels inside a
    ring: result ``intensity``, nav-shaped, float32.

    The ring holds the pixels with ``rad_in² < d² <= rad_out²``, ``d`` the distance from
    `center`. The standard deviation is the population one (``numpy.std``); an empty ring
    gives NaN.

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

    def get_result_buffers(self):
        return {"intensity": self.buffer(kind="nav", dtype="float32")}

    def get_task_data(self):
        sig = tuple(self.meta.dataset_shape.sig)
        if len(sig) != 2:
            raise ValueError(f"FEMUDF needs 2-D frames, the data has signal shape {sig}")
        cy, cx = self.params.center[0], self.params.center[1]
        ring = disk(cy, cx, sig, self.params.rad_out) & ~disk(cy, cx, sig, self.params.rad_in)
        return {"pixels": np.flatnonzero(ring)}

    def process_frame(self, frame):
        values = frame.reshape(-1)[self.task_data.pixels]
        if values.size == 0:
            self.results.intensity[:] = np.nan  # numpy.std of nothing, without its warning
            return
        self.results.intensity[:] = np.std(values, dtype=np.float64)


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
