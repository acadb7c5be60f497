"""A landing place for LiberTEM scripts: ``Context().load(...)``, ``run_udf``, ``map``.

Only the imports of a LiberTEM script change::

    from ltdask.compat import Context
    from ltdask.udf import SumUDF

    ctx = Context()
    ds = ctx.load("raw", path="scan.raw", nav_shape=(64, 64), sig_shape=(128, 128),
                  dtype="uint16")
    res = ctx.run_udf(dataset=ds, udf=SumUDF())
    res["intensity"].data
"""

from __future__ import annotations

import numpy as np

import ltdask
from ltdask.exceptions import DataSetError
from ltdask.udf.api import compute, iter_with_damage
from ltdask.udf.base import UDF
from ltdask.udf.builtin.pick import AutoUDF

_IGNORED_LOAD_KEYS = ("num_partitions", "io_backend", "tileshape", "enable_direct")


class ResultBuffer:
    """One result as LiberTEM's ``BufferWrapper`` shows it: ``data`` (nav-shaped, fill
    values outside the ROI), ``raw_data`` (nav results flat and ROI-compressed),
    ``valid_mask`` and ``masked_data``."""

    def __init__(self, variable, valid, kind: str, roi_flat, nav_dims: int):
        self.data = np.asarray(variable)
        self.valid_mask = np.asarray(valid)
        self.kind = kind
        self._roi_flat = roi_flat
        self._nav_dims = nav_dims

    @property
    def raw_data(self) -> np.ndarray:
        if self.kind != "nav":
            return self.data
        flat = self.data.reshape((-1, *self.data.shape[self._nav_dims :]))
        return flat if self._roi_flat is None else flat[self._roi_flat]

    @property
    def masked_data(self) -> np.ma.MaskedArray:
        return np.ma.masked_array(self.data, mask=~self.valid_mask)

    @property
    def shape(self):
        return self.data.shape

    @property
    def dtype(self):
        return self.data.dtype

    def __array__(self, dtype=None, copy=None):
        return self.data if dtype is None else self.data.astype(dtype)

    def __repr__(self) -> str:
        return f"<ResultBuffer kind={self.kind} shape={self.data.shape} dtype={self.data.dtype}>"


def _buffers(result, udf: UDF, dataset, roi) -> dict[str, ResultBuffer]:
    roi_flat = None if roi is None else np.asarray(roi, dtype=bool).reshape(-1)
    nav_dims = len(dataset.nav_shape)
    nav_names = set(dataset.dims[:nav_dims])
    out = {}
    for name, var in result.data_vars.items():
        dims = set(var.dims)
        if nav_names and nav_names <= dims:
            kind = "nav"
        elif set(dataset.dims[nav_dims:]) <= dims:
            kind = "sig"
        else:
            kind = "single"
        out[name] = ResultBuffer(
            var.values, result[f"{name}_valid"].values, kind, roi_flat, nav_dims
        )
    return out


class UDFResults:
    """One step of :meth:`Context.run_udf_iter`: ``buffers`` (a tuple with one dict per
    UDF) and ``damage`` (flat boolean mask of the nav positions done)."""

    def __init__(self, buffers, damage):
        self.buffers = buffers
        self.damage = damage


class Context:
    """LiberTEM's ``Context`` on top of ltdask; work runs on the active dask scheduler.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> from ltdask.udf import SumSigUDF
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.ones((2, 2, 3, 3), dtype=np.float32), sig_dims=2)
    >>> ctx.run_udf(dataset=ds, udf=SumSigUDF())["intensity"].data.tolist()
    [[9.0, 9.0], [9.0, 9.0]]
    """

    def __init__(self, executor=None, plot_class=None):
        self.executor = executor

    @classmethod
    def make_with(cls, *args, **kwargs) -> Context:
        return cls()

    def load(self, filetype: str, *args, **kwargs):
        """Open a dataset: ``"raw"``, ``"npy"``, ``"hdf5"``, ``"zarr"``, ``"raw_csr"``,
        ``"mib"``, ``"memory"``, ``"dask"`` or ``"auto"`` (by file contents)."""
        for key in _IGNORED_LOAD_KEYS:
            kwargs.pop(key, None)
        kind = filetype.lower()
        openers = {
            "raw": ltdask.open_raw,
            "npy": ltdask.open_npy,
            "hdf5": ltdask.open_hdf5,
            "h5": ltdask.open_hdf5,
            "zarr": ltdask.open_zarr,
            "raw_csr": ltdask.open_raw_csr,
            "mib": ltdask.open_mib,
            "auto": ltdask.open,
        }
        if kind in openers:
            return openers[kind](*args, **kwargs)
        if kind in ("memory", "dask"):
            data = kwargs.pop("data", args[0] if args else None)
            if data is None:
                shape = kwargs.pop("datashape")
                data = np.zeros(shape, dtype=kwargs.pop("dtype", np.float32))
            sig_dims = kwargs.pop("sig_dims", 2)
            return ltdask.from_array(data, sig_dims=sig_dims, **kwargs)
        raise DataSetError(f"Context.load: unknown or unsupported file type {filetype!r}")

    def run_udf(self, dataset, udf, roi=None, progress: bool = False, **kwargs):
        """Run one UDF (→ dict of results) or a list of UDFs (→ tuple of dicts)."""
        udfs = list(udf) if isinstance(udf, (list, tuple)) else [udf]
        results = compute(dataset, udfs, roi=roi, progress=progress)
        out = tuple(_buffers(r, u, dataset, roi) for r, u in zip(results, udfs, strict=True))
        return out if isinstance(udf, (list, tuple)) else out[0]

    def run_udf_iter(self, dataset, udf, roi=None, **kwargs):
        """Yield `UDFResults` as partitions finish."""
        udfs = list(udf) if isinstance(udf, (list, tuple)) else [udf]
        for results, damage in iter_with_damage(dataset, udfs, roi=roi):
            buffers = tuple(
                _buffers(r, u, dataset, roi) for r, u in zip(results, udfs, strict=True)
            )
            yield UDFResults(buffers, damage)

    def map(self, dataset, f, roi=None):
        """``f(frame)`` for every frame: the ``result`` buffer of an `AutoUDF`."""
        return self.run_udf(dataset=dataset, udf=AutoUDF(f=f), roi=roi)["result"]

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
