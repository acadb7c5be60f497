"""`LogsumUDF`: the sum of log-scaled frames, and `run_logsum`."""

from __future__ import annotations

import numpy as np

from ltdask.udf.base import UDF


class LogsumUDF(UDF):
    """Sum of log-scaled frames (inside the ROI): result ``logsum``, signal-shaped, float32.

    Each frame contributes ``log(frame - frame.min() + 1)``. Compared with the log of the
    sum, this brings out regions of slightly higher intensity that many frames share over
    very high intensity in a few frames.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> data = np.full((2, 3, 4, 5), 7, dtype=np.uint16); data[..., 0, 0] = 7 + 2
    >>> res = ltdask.udf.LogsumUDF().compute(ltdask.from_array(data))
    >>> round(float(res["logsum"][0, 0]), 4), float(res["logsum"][1, 1])
    (6.5917, 0.0)
    """

    def __init__(self):
        super().__init__()

    def get_backends(self):
        # (frames as numpy or CuPy arrays alike: numpy's functions dispatch to CuPy's)
        return (self.BACKEND_NUMPY, self.BACKEND_CUPY)

    def get_result_buffers(self):
        return {"logsum": self.buffer(kind="sig", dtype="float32", where="device")}

    def get_task_data(self):
        # a partition's frames are added in float64 and written once: no rounding per frame
        return {"acc": None}

    def process_frame(self, frame):
        # the logarithm in the frame's precision (as LiberTEM), the sum in float64
        scaled = np.log(frame - np.min(frame) + 1)
        acc = self.task_data.acc
        if acc is None:
            self.task_data.acc = scaled.astype(np.float64)
        else:
            acc += scaled

    def postprocess(self):
        acc = self.task_data.acc
        if acc is not None:
            out = self.results.logsum
            out += acc.reshape(out.shape).astype(out.dtype)

    def merge(self, dest, src):
        dest.logsum[:] += src.logsum

    def merge_all(self, ordered_results):
        parts = [b.logsum for b in ordered_results.values()]
        return {"logsum": np.stack(parts, axis=0).sum(axis=0)}


def run_logsum(ctx, dataset, roi=None):
    """Run `LogsumUDF` on `dataset` through `ctx` (an `ltdask.compat.Context`).

    Parameters
    ----------
    ctx : ltdask.compat.Context
    dataset
        A dataset from ``ctx.load`` or ``ltdask.open_*``.
    roi : numpy.ndarray, optional
        Boolean, nav-shaped: the frames to add.

    Returns
    -------
    dict
        ``{"logsum": result}``, as ``ctx.run_udf`` gives it.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> from ltdask.compat import Context
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.ones((2, 2, 3, 3), dtype=np.float32))
    >>> run_logsum(ctx, ds)["logsum"].data.shape
    (3, 3)
    """
    return ctx.run_udf(dataset=dataset, udf=LogsumUDF(), roi=roi)
