"""Results as the live plots read them: one `BufferView` per variable of a UDF's result
(an `xarray.Dataset`), with the attributes of LiberTEM's result buffers (``data``,
``kind``, ``valid_mask``, ``masked_data``, ...), which plot channels are written against;
and a `Step` of a run (the buffers of each UDF, and the positions processed).

The LiberTEM compatibility layer feeds the plots its own result buffers
(``ltdask.compat.ResultBuffer``, LiberTEM's ``BufferWrapper`` in full), whose kinds it
takes from `buffer_views`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ltdask.common.roi import normalize_roi
from ltdask.udf.api import compute_datasets, initial_datasets
from ltdask.udf.buffers import valid_names
from ltdask.udf.interface import UDFBase

__all__ = ["BufferView", "Step", "buffer_views", "initial_buffers"]


class BufferView:
    """One result variable as LiberTEM's result buffers show it: ``data`` (nav-shaped, fill
    values outside the ROI), ``raw_data`` (nav results flat and ROI-compressed, the shape
    of the buffer: ``shape``), ``valid_mask`` (shaped as ``data``), ``masked_data``,
    ``raw_masked_data``, ``valid_slice_bounding``, ``kind``, ``extra_shape``, ``dtype``.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> from ltdask.views.buffers import buffer_views
    >>> ds = ltdask.from_array(np.ones((2, 3, 4, 4), dtype=np.float32))
    >>> roi = np.array([[True, True, False], [False, False, False]])
    >>> udf = ltdask.udf.SumSigUDF()
    >>> buf = buffer_views(udf.compute(ds, roi=roi), udf, ds, roi.reshape(-1))["intensity"]
    >>> buf
    <BufferView kind=nav shape=(2,) dtype=float32>
    >>> buf.data.tolist(), buf.raw_data.tolist()
    ([[16.0, 16.0, nan], [nan, nan, nan]], [16.0, 16.0])
    >>> buf.valid_slice_bounding
    (slice(0, 1, None), slice(0, 2, None))
    """

    def __init__(self, variable, valid, kind: str, roi_flat, nav_dims: int):
        self.data = np.asarray(variable)
        self.valid_mask = np.asarray(valid)
        self.kind = kind
        self._roi_flat = roi_flat
        self._nav_dims = nav_dims

    def _raw(self, arr: np.ndarray) -> np.ndarray:
        if self.kind != "nav":
            return arr
        flat = arr.reshape((-1, *arr.shape[self._nav_dims :]))
        return flat if self._roi_flat is None else flat[self._roi_flat]

    @property
    def raw_data(self) -> np.ndarray:
        return self._raw(self.data)

    @property
    def masked_data(self) -> np.ma.MaskedArray:
        return np.ma.masked_array(self.data, mask=~self.valid_mask)

    @property
    def raw_valid_mask(self) -> np.ndarray:
        """The valid mask shaped as ``raw_data``."""
        return self._raw(self.valid_mask)

    @property
    def raw_masked_data(self) -> np.ma.MaskedArray:
        return np.ma.masked_array(self.raw_data, mask=~self.raw_valid_mask)

    @property
    def valid_slice_bounding(self) -> tuple[slice, ...]:
        """Per dim of ``data``, the slice from the first to the last valid element (for no
        valid element, LiberTEM's empty ``slice(size, 1)``)."""
        out = []
        for axis in range(self.valid_mask.ndim):
            others = tuple(d for d in range(self.valid_mask.ndim) if d != axis)
            hits = np.flatnonzero(self.valid_mask.any(axis=others))
            size = self.valid_mask.shape[axis]
            out.append(slice(int(hits[0]), int(hits[-1]) + 1) if hits.size else slice(size, 1))
        return tuple(out)

    @property
    def extra_shape(self) -> tuple[int, ...]:
        if self.kind == "nav":
            return tuple(self.data.shape[self._nav_dims :])
        if self.kind == "sig":
            return tuple(self.data.shape[self._nav_dims :])
        return tuple(self.data.shape) if self.data.shape != (1,) else ()

    @property
    def shape(self):
        return self.raw_data.shape

    @property
    def dtype(self):
        return self.data.dtype

    def __array__(self, dtype=None, copy=None):
        return self.data if dtype is None else self.data.astype(dtype)

    def __repr__(self) -> str:
        return f"<BufferView kind={self.kind} shape={self.shape} dtype={self.data.dtype}>"


def buffer_views(result, udf: UDFBase, dataset, roi) -> dict[str, BufferView]:
    """The variables of one UDF's results (an `xarray.Dataset`) as `BufferView` objects,
    each with its kind (nav, sig or single) told from its leading dims."""
    roi_flat = None if roi is None else np.asarray(roi, dtype=bool).reshape(-1)  # normalized
    nav_dims = len(dataset.nav_shape)
    nav_names = tuple(dataset.dims[:nav_dims])
    sig_names = tuple(dataset.dims[nav_dims:])
    out = {}
    mask_names = valid_names(result.data_vars)
    for name, var in result.data_vars.items():
        # nav and sig buffers lead with those dims (extra dims, e.g. PickUDF's stack of
        # frames, may come before the signal dims of a single buffer)
        if nav_names and var.dims[:nav_dims] == nav_names:
            kind = "nav"
        elif var.dims[: len(sig_names)] == sig_names:
            kind = "sig"
        else:
            kind = "single"
        out[name] = BufferView(
            var.values, result[mask_names[name]].values, kind, roi_flat, nav_dims
        )
    return out


@dataclass(frozen=True)
class Step:
    """One step of a run as plots take it (the shape of LiberTEM's ``UDFResults``):
    `buffers`, a dict of `BufferView` per UDF, and `damage`, the positions processed
    (nav-shaped booleans)."""

    buffers: tuple[dict[str, BufferView], ...]
    damage: Any


def initial_buffers(dataset, udfs, roi=None) -> tuple[dict[str, BufferView], ...]:
    """The result buffers of `udfs` before any partition is processed (after
    ``preprocess``): what a run will give, for the plots made before it starts.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> from ltdask.views.buffers import initial_buffers
    >>> ds = ltdask.from_array(np.ones((2, 3, 4, 4), dtype=np.float32))
    >>> (buffers,) = initial_buffers(ds, [ltdask.udf.SumSigUDF()])
    >>> buffers["intensity"]
    <BufferView kind=nav shape=(6,) dtype=float32>
    """
    roi_flat = normalize_roi(roi, dataset)
    results = compute_datasets(initial_datasets(dataset, udfs, roi_flat))
    return tuple(buffer_views(r, u, dataset, roi_flat) for r, u in zip(results, udfs, strict=True))
