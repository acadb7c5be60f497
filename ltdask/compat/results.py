"""Results as LiberTEM shows them: `ResultBuffer` per result (``data``, ``raw_data``,
``valid_mask``, ...; made in :mod:`ltdask.views.buffers`, where the live plots read them),
`Damage` (which positions are processed), `UDFResults` (one step of a run), and `dry_run` /
`UDFInfo` (what a UDF would give, before any partition is read).

`Context` (``ltdask.compat.context``) returns them.
"""

from __future__ import annotations

import functools

import numpy as np

from ltdask.udf.roi import normalize_roi
from ltdask.views.buffers import ResultBuffer, initial_buffers, result_buffers

__all__ = ["Damage", "ResultBuffer", "UDFInfo", "UDFResults", "dry_run", "result_buffers"]


class Damage:
    """Which nav positions a step of `Context.run_udf_iter` has processed, as LiberTEM's
    nav-kind boolean buffer: ``data`` (nav-shaped, False outside the ROI) and ``raw_data``
    (flat, ROI-compressed).

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> from ltdask.udf import SumSigUDF
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.ones((2, 3, 4, 4), dtype=np.float32), sig_dims=2)
    >>> [int(step.damage.raw_data.sum()) for step in ctx.run_udf_iter(ds, SumSigUDF())]
    [2, 4, 6]
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
    return UDFResults(
        initial_buffers(dataset, udfs, roi_flat),
        Damage(np.zeros(dataset.num_frames, bool), dataset.nav_shape, roi_flat),
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
