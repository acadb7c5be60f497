"""`CorrectionSet`: the corrections a user asks for, checked as far as can be before the
signal shape is known; `CorrectionSet.for_shape` prepares them for one dataset."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ltdask.corrections._apply import PreparedCorrections, RepairPlan
from ltdask.exceptions import DataSetError


class CorrectionSet:
    """Corrections applied where frames are read, before any UDF sees them.

    Parameters
    ----------
    dark
        Subtracted from every frame: an array of the signal shape.
    gain
        Multiplied with every frame after the dark subtraction: an array of the signal
        shape, finite and within the range of the dtype the frames are corrected in
        (float32 unless the run asks for float64).
    excluded_pixels
        The pixels to repair: a boolean array of the signal shape (True = excluded), a
        ``sparse.COO`` array of it, or an integer ``(sig_dims, N)`` array of coordinates.
    allow_empty
        Leave a pixel whose neighbours are all excluded as it is, instead of an error.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> data = np.ones((2, 2, 4, 4), dtype=np.float32)
    >>> data[..., 1, 2] = 1000  # a hot pixel
    >>> hot = np.zeros((4, 4), dtype=bool); hot[1, 2] = True
    >>> cs = ltdask.CorrectionSet(dark=np.full((4, 4), 0.5), excluded_pixels=hot)
    >>> res = ltdask.udf.SumUDF().compute(ltdask.from_array(data), corrections=cs)
    >>> res["intensity"].values[1, 2].item()
    2.0
    """

    def __init__(self, dark=None, gain=None, excluded_pixels=None, allow_empty: bool = False):
        self.dark = None if dark is None else _as_array(dark, "dark")
        self.gain = None if gain is None else _as_array(gain, "gain")
        if self.gain is not None and not np.isfinite(self.gain).all():
            bad = np.argwhere(~np.isfinite(self.gain))[0]
            raise DataSetError(
                f"CorrectionSet: gain has non-finite values (first at {tuple(bad.tolist())}); "
                "a gain map must be finite"
            )
        if self.dark is not None and not np.isfinite(self.dark).all():
            raise DataSetError("CorrectionSet: dark has non-finite values; it must be finite")
        self.allow_empty = bool(allow_empty)
        self._excluded_input = excluded_pixels
        self.excluded = None  # coordinates (sig_dims, N), set by `for_shape` or below
        shapes = {a.shape for a in (self.dark, self.gain) if a is not None}
        if len(shapes) > 1:
            dark_shape, gain_shape = (a.shape for a in (self.dark, self.gain) if a is not None)
            raise DataSetError(
                f"CorrectionSet: dark {dark_shape} and gain {gain_shape} have "
                "different shapes; both must have the signal shape"
            )
        known = shapes.pop() if shapes else getattr(excluded_pixels, "shape", None)
        if excluded_pixels is not None and known is not None and _is_mask(excluded_pixels):
            self.excluded = _coordinates(excluded_pixels, tuple(known))
            RepairPlan.make(tuple(known), self.excluded, self.allow_empty)

    def have_corrections(self) -> bool:
        return any(x is not None for x in (self.dark, self.gain, self._excluded_input))

    def _n_excluded(self) -> int:
        if self._excluded_input is None:
            return 0
        if self.excluded is not None:
            return self.excluded.shape[1]
        return -1  # unknown until the signal shape is known

    def get_dark_frame(self):
        return self.dark

    def get_gain_map(self):
        return self.gain

    def get_excluded_pixels(self):
        """The excluded pixels as a ``sparse.COO`` boolean array (LiberTEM's form)."""
        if self.excluded is None:
            return None
        import sparse

        shape = None if self.dark is None else self.dark.shape
        shape = shape or (None if self.gain is None else self.gain.shape)
        return sparse.COO(self.excluded, data=True, shape=shape)

    def for_shape(
        self, sig_shape: Sequence[int], where: str = "", tile_dtype=None, out_dtype=np.float32
    ) -> PreparedCorrections:
        """The corrections checked against a dataset's signal shape, ready to apply to tiles
        read as `tile_dtype` (by default `out_dtype`), giving `out_dtype`."""
        sig_shape = tuple(int(s) for s in sig_shape)
        prefix = f"{where}: " if where else ""
        for name, arr in (("dark", self.dark), ("gain", self.gain)):
            if arr is not None and arr.shape != sig_shape:
                if arr.size == np.prod(sig_shape) and arr.ndim == 1:
                    continue
                raise DataSetError(
                    f"{prefix}CorrectionSet {name} has shape {arr.shape}; expected the "
                    f"signal shape {sig_shape}"
                )
        out_dtype = np.dtype(out_dtype)
        if out_dtype.kind == "f":
            for name, arr in (("dark", self.dark), ("gain", self.gain)):
                _check_fits(arr, name, out_dtype, prefix)
        excluded = np.zeros((len(sig_shape), 0), dtype=np.int64)
        if self._excluded_input is not None:
            excluded = _coordinates(self._excluded_input, sig_shape, prefix)
        plan = RepairPlan.make(sig_shape, excluded, self.allow_empty, prefix)
        tile_dtype = out_dtype if tile_dtype is None else np.dtype(tile_dtype)
        return PreparedCorrections(self, sig_shape, plan, tile_dtype, out_dtype)

    def __dask_tokenize__(self):
        from dask.base import tokenize

        return (
            "ltdask.CorrectionSet",
            tokenize(self.dark, self.gain),
            repr(self._excluded_token()),
            self.allow_empty,
        )

    def _excluded_token(self):
        from dask.base import tokenize

        x = self._excluded_input
        if x is None:
            return None
        if hasattr(x, "coords"):
            return tokenize(np.asarray(x.coords), x.shape)
        return tokenize(np.asarray(x))

    def __repr__(self) -> str:
        parts = []
        if self.dark is not None:
            parts.append(f"dark {self.dark.shape}")
        if self.gain is not None:
            parts.append(f"gain {self.gain.shape}")
        if self._excluded_input is not None:
            n = self._n_excluded()
            parts.append(f"{n if n >= 0 else '?'} excluded pixels")
        return f"<CorrectionSet {', '.join(parts) or 'empty'}>"


def _as_array(value, name: str) -> np.ndarray:
    try:
        arr = np.asarray(value.todense() if hasattr(value, "todense") else value)
    except Exception as e:
        raise DataSetError(f"CorrectionSet: {name} is not an array ({e})") from None
    if arr.dtype.kind not in "biuf":
        raise DataSetError(
            f"CorrectionSet: {name} has dtype {arr.dtype}; expected a real number array"
        )
    return arr.astype(np.float64 if arr.dtype == np.float64 else np.float32)


def _check_fits(arr, name: str, dtype: np.dtype, prefix: str) -> None:
    """Refuse a dark frame or gain map with values beyond `dtype`'s range (the frames' dtype
    of the run): they would become inf there (a float64 gain of 1e39 in float32 frames),
    and the results inf or NaN."""
    if arr is None or arr.dtype.itemsize <= dtype.itemsize or not arr.size:
        return
    limit = np.finfo(dtype).max
    beyond = np.abs(arr) > limit
    if beyond.any():
        at = np.unravel_index(int(np.argmax(beyond)), arr.shape)
        value = float(arr[at])
        raise DataSetError(
            f"{prefix}CorrectionSet {name} holds {value:g} (at {tuple(int(i) for i in at)}), "
            f"beyond the range of {dtype} (±{limit:.4g}), the dtype the frames are corrected "
            f"in; scale the {name}, or run in float64 (e.g. to_dask(dtype='float64') or a "
            "UDF's dtype='float64')"
        )


def _is_mask(value) -> bool:
    return hasattr(value, "coords") or np.asarray(value).dtype == bool


def _coordinates(value, sig_shape: tuple[int, ...], prefix: str = "") -> np.ndarray:
    """Excluded pixels as integer coordinates ``(sig_dims, N)``, checked against the shape."""
    if hasattr(value, "coords"):  # sparse.COO
        if tuple(value.shape) != sig_shape:
            raise DataSetError(
                f"{prefix}CorrectionSet excluded_pixels has shape {tuple(value.shape)}; "
                f"expected the signal shape {sig_shape}"
            )
        coords = np.asarray(value.coords)[:, np.asarray(value.data).astype(bool)]
        return coords.astype(np.int64)
    arr = np.asarray(value)
    if arr.dtype == bool:
        if arr.shape != sig_shape:
            raise DataSetError(
                f"{prefix}CorrectionSet excluded_pixels (a mask) has shape {arr.shape}; "
                f"expected the signal shape {sig_shape}"
            )
        return np.argwhere(arr).T.astype(np.int64)
    if arr.dtype.kind not in "iu" or arr.ndim != 2 or arr.shape[0] != len(sig_shape):
        raise DataSetError(
            f"{prefix}CorrectionSet excluded_pixels: expected a boolean mask of shape "
            f"{sig_shape}, a sparse.COO of it, or integer coordinates of shape "
            f"({len(sig_shape)}, N); got {arr.dtype} of shape {arr.shape}"
        )
    for dim, size in enumerate(sig_shape):
        bad = (arr[dim] < 0) | (arr[dim] >= size)
        if bad.any():
            raise DataSetError(
                f"{prefix}CorrectionSet excluded_pixels: coordinate {int(arr[dim][bad][0])} "
                f"in dim {dim} is outside the signal shape {sig_shape}"
            )
    return np.unique(arr.astype(np.int64), axis=1)
