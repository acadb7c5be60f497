"""`CrystallinityUDF`: integration over a ring of each frame's Fourier spectrum, and
`run_analysis_crystall`."""

from __future__ import annotations

import numpy as np

from ltdask.udf.base import UDF
from ltdask.udf.builtin.fem import disk


def fourier_weights(sig: tuple[int, int], rad_in: float, rad_out: float) -> np.ndarray:
    """Weights of ``numpy.fft.rfft2``'s coefficients: a ring around the zero frequency.

    As in LiberTEM: +1 inside the outer disk, -1 inside the inner one (both centred on
    ``(h/2, w/2)`` of the shifted spectrum, so an inner radius larger than the outer one
    subtracts), moved to unshifted frequency order and cut to the half-spectrum columns.
    """
    h, w = sig
    shifted = disk(h / 2, w / 2, sig, rad_out).astype(np.int8) - disk(
        h / 2, w / 2, sig, rad_in
    ).astype(np.int8)
    return np.fft.fftshift(shifted)[:, : w // 2 + 1].astype(np.float64)


class CrystallinityUDF(UDF):
    """Crystallinity of each frame: the sum of ``|rfft2(frame)|`` over a ring of spatial
    frequencies: result ``intensity``, nav-shaped, float32.

    Parameters
    ----------
    rad_in : float
        Inner radius (in Fourier-space pixels) of the integration ring.
    rad_out : float
        Outer radius of the integration ring.
    real_center : tuple of float or None
        ``(y, x)``: centre of a disk in the frame (e.g. the zero-order peak) that is set to
        zero before the transform.
    real_rad : float or None
        Radius of that disk. Without `real_center` or `real_rad` nothing is masked.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> y, x = np.mgrid[:16, :16]
    >>> frame = np.cos(2 * np.pi * 4 * x / 16).astype(np.float32)  # lattice: frequency 4
    >>> data = np.broadcast_to(frame, (2, 2, 16, 16))
    >>> udf = ltdask.udf.CrystallinityUDF(rad_in=3, rad_out=5, real_center=None, real_rad=None)
    >>> round(float(udf.compute(ltdask.from_array(data))["intensity"][0, 0]))  # |F| at kx=4
    128
    """

    def __init__(self, rad_in, rad_out, real_center, real_rad):
        super().__init__(rad_in=rad_in, rad_out=rad_out, real_center=real_center, real_rad=real_rad)

    def get_result_buffers(self):
        return {"intensity": self.buffer(kind="nav", dtype="float32")}

    def get_task_data(self):
        sig = tuple(self.meta.dataset_shape.sig)
        if len(sig) != 2:
            raise ValueError(f"CrystallinityUDF needs 2-D frames, the data has signal shape {sig}")
        p = self.params
        real_mask = None
        if p.real_center is not None and p.real_rad is not None:
            # a float64 factor: the masked frame is float64 right away (as LiberTEM's)
            real_mask = (~disk(p.real_center[0], p.real_center[1], sig, p.real_rad)).astype(
                np.float64
            )
        return {"real_mask": real_mask, "weights": fourier_weights(sig, p.rad_in, p.rad_out)}

    def process_frame(self, frame):
        real_mask = self.task_data.real_mask
        if real_mask is not None:
            frame = frame * real_mask
        spectrum = np.abs(np.fft.rfft2(frame.astype(np.float64, copy=False)))
        self.results.intensity[:] = np.vdot(spectrum, self.task_data.weights)


def run_analysis_crystall(
    ctx, dataset, rad_in, rad_out, real_center=None, real_rad=None, roi=None, progress=False
):
    """Crystallinity of each frame (see `CrystallinityUDF`).

    Parameters
    ----------
    ctx : ltdask.compat.Context
    dataset
        A dataset with 1- or 2-D nav and 2-D signal dims.
    rad_in, rad_out : float
        Inner and outer radius (Fourier-space pixels) of the integration ring.
    real_center : tuple of float, optional
        ``(y, x)`` centre of a disk in the frame to set to zero first.
    real_rad : float, optional
        Radius of that disk; without both, nothing is masked.
    roi : numpy.ndarray, optional
        Boolean, nav-shaped: the frames to analyse.
    progress : bool
        Show dask's progress bar.

    Returns
    -------
    dict
        ``{"intensity": result}`` as ``ctx.run_udf`` gives it.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.ones((2, 3, 8, 8), dtype=np.float32))
    >>> run_analysis_crystall(ctx, ds, rad_in=1, rad_out=3)["intensity"].data.shape
    (2, 3)
    """
    udf = CrystallinityUDF(
        rad_in=rad_in, rad_out=rad_out, real_center=real_center, real_rad=real_rad
    )
    return ctx.run_udf(dataset=dataset, udf=udf, roi=roi, progress=progress)
