"""Results as LiberTEM shows them: `ResultBuffer` per result (``data``, ``raw_data``,
``valid_mask``, ...), `Damage` (which positions are processed), `UDFResults` (one step of a
run), and `dry_run` / `UDFInfo` (what a UDF would give, before any partition is read).

`Context` (``ltdask.compat.context``) returns them, and feeds them to its live plots
(:mod:`ltdask.views.viz`).
"""

from __future__ import annotations

import functools

import numpy as np

from ltdask.compat.buffers import BufferWrapper
from ltdask.udf.api import compute_datasets, initial_datasets
from ltdask.udf.interface import UDFBase
from ltdask.udf.roi import normalize_roi
from ltdask.views.buffers import BufferView, buffer_views


class ResultBuffer(BufferWrapper):
    """One result as LiberTEM's ``BufferWrapper`` shows it (and a
    `ltdask.compat.buffers.BufferWrapper`): ``data`` (nav-shaped, fill values outside the
    ROI), ``raw_data`` (nav results flat and ROI-compressed, the shape of the buffer:
    ``shape``), ``valid_mask`` (shaped as ``data``), ``masked_data``, ``raw_masked_data``,
    ``valid_slice_bounding``, ``kind``, ``extra_shape``, ``dtype``; and LiberTEM's private
    ``_valid_mask`` (shaped as ``raw_data``) and ``_roi`` (the run's ROI, flat, as it was
    when the run started; None without one).

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> from ltdask.udf import SumSigUDF
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.ones((2, 3, 4, 4), dtype=np.float32), sig_dims=2)
    >>> roi = np.array([[True, True, False], [False, False, False]])
    >>> buf = ctx.run_udf(dataset=ds, udf=SumSigUDF(), roi=roi)["intensity"]
    >>> buf
    <ResultBuffer kind=nav shape=(2,) dtype=float32>
    >>> buf.data.tolist(), buf.raw_data.tolist()
    ([[16.0, 16.0, nan], [nan, nan, nan]], [16.0, 16.0])
    >>> buf.valid_slice_bounding
    (slice(0, 1, None), slice(0, 2, None))
    """

    def __init__(self, variable, valid, kind: str, roi_flat, nav_dims: int):
        # a copy of the ROI: the caller may change its array after the run
        self._roi = None if roi_flat is None else np.array(roi_flat, dtype=bool).reshape(-1)
        #: the views of the live plots read the same buffer the same way
        self._view = BufferView(variable, valid, kind, self._roi, nav_dims)
        super().__init__(kind=kind, extra_shape=self._view.extra_shape, dtype=self._view.dtype)
        self.data = self._view.data
        self.valid_mask = self._view.valid_mask

    @property
    def raw_data(self) -> np.ndarray:
        return self._view.raw_data

    @property
    def _valid_mask(self) -> np.ndarray:
        """The valid mask shaped as ``raw_data`` (LiberTEM's private attribute)."""
        return self._view.raw_valid_mask

    @property
    def masked_data(self) -> np.ma.MaskedArray:
        return self._view.masked_data

    @property
    def raw_masked_data(self) -> np.ma.MaskedArray:
        return self._view.raw_masked_data

    @property
    def valid_slice_bounding(self) -> tuple[slice, ...]:
        """Per dim of ``data``, the slice from the first to the last valid element (for no
        valid element, LiberTEM's empty ``slice(size, 1)``)."""
        return self._view.valid_slice_bounding

    @property
    def shape(self):
        return self.raw_data.shape

    def __array__(self, dtype=None, copy=None):
        return self.data if dtype is None else self.data.astype(dtype)

    def __repr__(self) -> str:
        return f"<ResultBuffer kind={self.kind} shape={self.shape} dtype={self.data.dtype}>"


def result_buffers(result, udf: UDFBase, dataset, roi) -> dict[str, ResultBuffer]:
    """The variables of one UDF's results (an `xarray.Dataset`) as `ResultBuffer` objects,
    each with its kind (nav, sig or single) as the live plots tell it from its leading dims
    (`ltdask.views.buffers.buffer_views`)."""
    nav_dims = len(dataset.nav_shape)
    return {
        name: ResultBuffer(view.data, view.valid_mask, view.kind, roi, nav_dims)
        for name, view in buffer_views(result, udf, dataset, roi).items()
    }


class Damage:
    """Which nav positions a step of `Context.run_udf_iter` has processed, as LiberTEM's
    nav-kind boolean buffer: ``data`` (nav-shaped, False outside the ROI) and ``raw_data``
    (flat, ROI-compressed).

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> from ltdask.udf import SumSigUDF
    >>> ctx = Context.make_with("inline")  # (one partition a step)
    >>> data = np.ones((2, 3, 4, 4), dtype=np.float32)
    >>> ds = ctx.load("memory", data=data, sig_dims=2, num_partitions=2)
    >>> [int(step.damage.raw_data.sum()) for step in ctx.run_udf_iter(ds, SumSigUDF())]
    [3, 6]
    """

    def __init__(self, flat: np.ndarray, nav_shape, roi_flat):
        self._flat = flat if roi_flat is None else flat & roi_flat
        self._nav_shape = tuple(nav_shape)
        self._roi_flat = roi_flat
        self.kind = "nav"
        self.dtype = np.dtype(bool)

    @property
    def data(self) -> np.ndarray:
        return self._flat.reshape(self._nav_shape)

    @property
    def raw_data(self) -> np.ndarray:
        return self._flat if self._roi_flat is None else self._flat[self._roi_flat]

    def __array__(self, dtype=None, copy=None):
        return self.data if dtype is None else self.data.astype(dtype)


class UDFResults:
    """One step of :meth:`Context.run_udf_iter`: ``buffers`` (a tuple with one dict per
    UDF; computed, and ``get_results`` run, when first read) and ``damage``.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> from ltdask.udf import SumSigUDF
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.ones((2, 3, 4, 4), dtype=np.float32), sig_dims=2)
    >>> *_, last = ctx.run_udf_iter(dataset=ds, udf=SumSigUDF())
    >>> last.buffers[0]["intensity"].data.tolist()
    [[16.0, 16.0, 16.0], [16.0, 16.0, 16.0]]
    >>> bool(last.damage.data.all())
    True
    """

    def __init__(self, buffers, damage):
        self._buffers = buffers
        self.damage = damage

    @functools.cached_property
    def buffers(self):
        return self._buffers() if callable(self._buffers) else self._buffers


def dry_run(dataset, udfs, roi=None) -> UDFResults:
    """The results of `udfs` before any partition is processed (their buffers after
    ``preprocess``), as a `UDFResults` step: shapes and dtypes of what a run gives.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> from ltdask.compat import dry_run
    >>> ds = ltdask.from_array(np.ones((2, 3, 4, 4), dtype=np.float32))
    >>> for buffers in dry_run(ds, [ltdask.udf.SumSigUDF(), ltdask.udf.SumUDF()]).buffers:
    ...     print(buffers["intensity"])
    <ResultBuffer kind=nav shape=(6,) dtype=float32>
    <ResultBuffer kind=sig shape=(4, 4) dtype=float32>
    """
    roi_flat = normalize_roi(roi, dataset)
    results = compute_datasets(initial_datasets(dataset, udfs, roi_flat))
    buffers = tuple(
        result_buffers(r, u, dataset, roi_flat) for r, u in zip(results, udfs, strict=True)
    )
    return UDFResults(
        buffers, Damage(np.zeros(dataset.num_frames, bool), dataset.nav_shape, roi_flat)
    )


class UDFInfo:
    """A UDF's result buffers on a dataset (from :meth:`Context.display`).

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> from ltdask.udf import SumSigUDF
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.ones((2, 3, 4, 4), dtype=np.float32), sig_dims=2)
    >>> ctx.display(ds, SumSigUDF())
    SumSigUDF
      intensity: kind=nav, extra_shape=(), shape=(6,), dtype=float32
    """

    def __init__(self, title: str, buffers: dict):
        self.title = title
        self.buffers = buffers

    def rows(self) -> list[tuple]:
        return [(name, b.kind, b.extra_shape, b.shape, b.dtype) for name, b in self.buffers.items()]

    def __repr__(self) -> str:
        lines = [self.title] + [
            f"  {n}: kind={k}, extra_shape={e}, shape={s}, dtype={d}"
            for n, k, e, s, d in self.rows()
        ]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html

        cells = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>"
            for row in self.rows()
        )
        head = "".join(f"<th>{h}</th>" for h in ("name", "kind", "extra_shape", "shape", "dtype"))
        return (
            f"<h4>{html.escape(self.title)}</h4><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{cells}</tbody></table>"
        )
