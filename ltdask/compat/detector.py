"""``libertem.corrections.detector`` on ltdask's corrections: `correct` an array of frames
with a dark frame, a gain map and excluded pixels, as a `CorrectionSet` corrects the frames
of a run (``ltdask.corrections``: ``(frame - dark) * gain``, then each excluded pixel the
mean of its neighbours that are not excluded)."""

from __future__ import annotations

import numpy as np

from ltdask.corrections import CorrectionSet, RepairPlan
from ltdask.exceptions import DataSetError

__all__ = ["RepairDescriptor", "RepairValueError", "correct"]


class RepairValueError(DataSetError):
    """An excluded pixel has no neighbour that is not excluded, so it cannot be repaired
    (LiberTEM's name; a `DataSetError` and a `ValueError`)."""


class RepairDescriptor:
    """The excluded pixels of one signal shape and where each is repaired from, worked
    out once for several calls of `correct` (LiberTEM's ``RepairDescriptor``).

    Examples
    --------
    >>> from ltdask.compat.detector import RepairDescriptor
    >>> desc = RepairDescriptor((4, 4), excluded_pixels=[[0], [0]])  # the corner pixel
    >>> desc.exclude_flat.tolist(), desc.repair_counts.tolist()
    ([0], [3])
    """

    def __init__(self, sig_shape, excluded_pixels=None, allow_empty: bool = False) -> None:
        self.sig_shape = tuple(int(s) for s in sig_shape)
        coords = np.zeros((len(self.sig_shape), 0), dtype=np.int64)
        if excluded_pixels is not None:
            # the checks and the forms taken (a mask, sparse.COO, coordinates) of CorrectionSet
            probe = CorrectionSet(excluded_pixels=excluded_pixels, allow_empty=True)
            coords = probe.for_shape(self.sig_shape, "RepairDescriptor").excluded_coordinates
        self.plan = RepairPlan.make(self.sig_shape, coords, allow_empty=True)
        self.check_empty_repairs(allow_empty)

    @property
    def exclude_flat(self) -> np.ndarray:
        """Flat indices of the excluded pixels."""
        return self.plan.excluded

    @property
    def repair_flat(self) -> np.ndarray:
        """Per excluded pixel, the flat indices it is repaired from (``repair_counts`` of
        each row are used)."""
        return self.plan.sources

    @property
    def repair_counts(self) -> np.ndarray:
        return self.plan.counts

    def empty_repairs(self) -> np.ndarray:
        """The rows of the excluded pixels that have no neighbour to be repaired from."""
        return np.argwhere(self.plan.counts == 0)

    def check_empty_repairs(self, allow_empty: bool) -> None:
        empty = self.plan.excluded[self.plan.counts == 0]
        if len(empty) and not allow_empty:
            where = [tuple(int(c) for c in np.unravel_index(i, self.sig_shape)) for i in empty]
            raise RepairValueError(
                f"excluded pixel(s) {where} have no neighbour that is not excluded, so they "
                "cannot be repaired; exclude fewer pixels or pass allow_empty=True to leave "
                "them as they are"
            )


def correct(
    buffer,
    dark_image=None,
    gain_map=None,
    excluded_pixels=None,
    repair_descriptor: RepairDescriptor | None = None,
    inplace: bool = False,
    sig_shape=None,
    allow_empty: bool = False,
):
    """Frames ``(*nav, *sig)`` corrected: ``(buffer - dark_image) * gain_map``, then each
    excluded pixel the mean of its 3×3 (3^n - 1) neighbours that are not excluded.

    Parameters
    ----------
    buffer : array ``(*nav, *sig)``
    dark_image, gain_map : array ``sig``, optional
        They give the signal shape; without either, pass `sig_shape`.
    excluded_pixels : int array ``(sig_dims, k)``, optional
        Coordinates of the pixels to repair (or a boolean mask of the signal shape).
    repair_descriptor : RepairDescriptor, optional
        The excluded pixels worked out before (instead of `excluded_pixels`).
    inplace : bool
        Write into `buffer` (float or complex only) and return it; else a copy in
        ``result_type(float32, buffer)``.
    sig_shape : tuple, optional
    allow_empty : bool
        Leave excluded pixels without a usable neighbour as they are instead of raising
        `RepairValueError`.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat.detector import correct
    >>> frames = np.ones((2, 3, 3), dtype=np.uint16); frames[:, 1, 1] = 900  # a hot pixel
    >>> out = correct(frames, dark_image=np.full((3, 3), 0.5), excluded_pixels=[[1], [1]])
    >>> out.dtype, out[0].tolist()
    (dtype('float32'), [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5], [0.5, 0.5, 0.5]])
    """
    buffer_shape = np.shape(buffer)
    for arr in (dark_image, gain_map):
        if arr is not None:
            sig_shape = np.shape(arr)
    if sig_shape is None:
        raise ValueError("correct: need dark_image, gain_map or sig_shape to know the frames")
    sig_shape = tuple(int(s) for s in sig_shape)
    if tuple(buffer_shape[len(buffer_shape) - len(sig_shape) :]) != sig_shape:
        raise DataSetError(
            f"correct: buffer of shape {buffer_shape} does not end in the signal shape "
            f"{sig_shape} of the dark image / gain map / sig_shape"
        )
    if repair_descriptor is not None:
        if excluded_pixels is not None:
            raise ValueError(
                "correct: both repair_descriptor and excluded_pixels are given; pass one"
            )
        if repair_descriptor.sig_shape != sig_shape:
            raise DataSetError(
                f"correct: repair_descriptor is for the signal shape "
                f"{repair_descriptor.sig_shape}, the frames have {sig_shape}"
            )
        repair_descriptor.check_empty_repairs(allow_empty)
    else:
        repair_descriptor = RepairDescriptor(sig_shape, excluded_pixels, allow_empty)
    if inplace:
        if buffer.dtype.kind not in "fc":
            raise TypeError(
                f"correct: inplace=True needs a float or complex buffer, not {buffer.dtype}; "
                "pass inplace=False for a corrected copy"
            )
        out_dtype = buffer.dtype
    else:
        out_dtype = np.result_type(np.float32, buffer)
    corrections = CorrectionSet(dark=dark_image, gain=gain_map, allow_empty=True)
    prepared = corrections.for_shape(sig_shape, "correct", out_dtype=out_dtype)
    prepared.plan = repair_descriptor.plan
    frames = np.reshape(buffer, (-1, *sig_shape))
    corrected = prepared.apply(frames, out_dtype=out_dtype).reshape(buffer_shape)
    if inplace:
        buffer[...] = corrected
        return buffer
    return corrected
