"""`MaskContainer` with LiberTEM's interface (``libertem.common.container``, re-exported as
``ltdask.compat.MaskContainer``): a stack of masks made by factory functions, cut per
signal slice of a tile and converted to the dense or sparse format a product needs. It
lives with the masks, below the UDFs, as LiberTEM's ``ApplyMasksUDF.masks`` is one.

ltdask's own `ApplyMasksUDF` uses :class:`ltdask.udf.MaskContainer`, which cuts masks into
the layouts of its kernels; this one is for UDFs written for LiberTEM (LiberTEM-blobfinder's
``SparseCorrelationUDF`` builds one in ``get_task_data`` and multiplies tiles with
``get(key=self.meta.slice, transpose=False)``). The masks are made with
`ltdask.masks`' conversions (`~ltdask.masks.is_sparse`, `~ltdask.masks.to_sparse`,
`~ltdask.masks.to_dense`) and cut with `ltdask.Slice`.
"""

from __future__ import annotations

import numpy as np

from ltdask.common import Slice
from ltdask.exceptions import UDFError

__all__ = ["SPARSE_FORMATS", "MaskContainer", "udf_masks"]

#: the sparse formats `MaskContainer` gives (LiberTEM's names)
SPARSE_FORMATS = (
    "scipy.sparse",
    "scipy.sparse.csr",
    "scipy.sparse.csc",
    "sparse.pydata",
    "sparse.pydata.GCXS",
)

_CUPY_BACKENDS = ("cupy", "cupy.ndarray")


class MaskContainer:
    """Masks made by `mask_factories`, cut per signal slice (LiberTEM's ``MaskContainer``).

    Parameters
    ----------
    mask_factories : callable or sequence of callables
        A function returning a stack ``(n, *sig)``, or functions each returning one mask
        ``sig`` (numpy, ``scipy.sparse`` or pydata ``sparse``); called once, when the masks
        are first needed.
    dtype : dtype, optional
        dtype of the masks :meth:`get` gives (default: the masks').
    use_sparse : None, bool or str
        One of `SPARSE_FORMATS` to give sparse masks in that format, False for dense,
        True for `default_sparse`, None for `default_sparse` when every factory returns a
        sparse mask (else dense).
    count : int, optional
        The number of masks, known without calling the factories.
    backend : str, optional
        ``"numpy"`` (default) or ``"cupy"``: where dense masks are given.
    default_sparse : str
        The sparse format of ``use_sparse=True`` / None.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask import Shape, Slice
    >>> from ltdask.masks.container import MaskContainer
    >>> masks = MaskContainer([lambda: np.ones((4, 4)), lambda: np.eye(4)], dtype=np.float32)
    >>> len(masks), masks.dtype, masks.use_sparse
    (2, dtype('float32'), False)
    >>> tile = Slice((0, 0, 0), Shape((3, 2, 4), sig_dims=2))  # 3 frames, top two rows
    >>> masks.get(tile).shape  # (pixels, masks): ``tile @ masks`` for flat tiles
    (8, 2)
    >>> masks.get(tile, transpose=False, sparse_backend="scipy.sparse.csc").format
    'csc'
    """

    def __init__(
        self,
        mask_factories,
        dtype=None,
        use_sparse=None,
        count=None,
        backend=None,
        default_sparse="scipy.sparse",
    ) -> None:
        if not callable(mask_factories):
            try:
                mask_factories = list(mask_factories)
            except TypeError:
                raise UDFError(
                    f"MaskContainer: mask_factories={mask_factories!r}; expected a function "
                    "returning a mask stack or a list of functions each returning one mask"
                ) from None
            if not mask_factories:
                raise UDFError("MaskContainer: mask_factories is empty; give at least one")
            bad = [i for i, f in enumerate(mask_factories) if not callable(f)]
            if bad:
                value = mask_factories[bad[0]]
                shape = f" of shape {value.shape}" if hasattr(value, "shape") else ""
                raise UDFError(
                    f"MaskContainer: mask_factories[{bad[0]}] is a {type(value).__name__}"
                    f"{shape}, not a function; wrap an array `m` as `lambda: m`"
                )
        _check_format("default_sparse", default_sparse)
        if isinstance(use_sparse, str):
            _check_format("use_sparse", use_sparse)
        elif use_sparse not in (None, True, False):
            raise UDFError(
                f"MaskContainer: use_sparse={use_sparse!r}; expected None, True, False or one "
                f"of {', '.join(SPARSE_FORMATS)}"
            )
        if backend not in (None, "numpy", *_CUPY_BACKENDS):
            raise UDFError(
                f"MaskContainer: backend={backend!r}; expected 'numpy' or 'cupy' (sparse "
                "formats are chosen with use_sparse= / sparse_backend=)"
            )
        self.mask_factories = mask_factories
        self.backend = backend or "numpy"
        self._length = count
        self._dtype = None if dtype is None else np.dtype(dtype)
        self._use_sparse = default_sparse if use_sparse is True else use_sparse
        self._default_sparse = default_sparse
        self._computed_masks = None
        self._cache: dict = {}

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_cache"] = {}  # cut masks are made again where they are used
        return state

    def __len__(self) -> int:
        if self._length is not None:
            return int(self._length)
        if not callable(self.mask_factories):
            return len(self.mask_factories)
        return int(self.computed_masks.shape[0])

    @property
    def dtype(self) -> np.dtype:
        """The dtype of the masks :meth:`get` gives by default."""
        if self._dtype is None:
            return np.dtype(self.computed_masks.dtype)
        return self._dtype

    @property
    def use_sparse(self):
        """False (dense masks) or the sparse format the masks are given in."""
        if self._use_sparse is None:
            self.computed_masks  # noqa: B018  (deciding needs the masks)
        return self._use_sparse

    @property
    def computed_masks(self):
        """The stack ``(n, *sig)``: a pydata ``sparse.COO`` array where the masks are used
        sparse, else numpy."""
        if self._computed_masks is None:
            self._computed_masks = self._compute()
        return self._computed_masks

    def _compute(self):
        from ltdask.masks import is_sparse, to_dense, to_sparse

        if callable(self.mask_factories):
            stack = self.mask_factories()
            if getattr(stack, "ndim", 0) < 2:
                raise UDFError(
                    f"MaskContainer: the mask factory returned {type(stack).__name__} of "
                    f"shape {getattr(stack, 'shape', None)}; a single factory must return a "
                    "stack (n, *sig_shape)"
                )
            if _is_scipy(stack):  # scipy matrices are 2-D: one mask
                stack = to_sparse(stack)[np.newaxis]
            parts = [stack]
            all_sparse = is_sparse(stack)
        else:
            parts = []
            for i, factory in enumerate(self.mask_factories):
                mask = factory()
                if _is_scipy(mask):
                    mask = to_sparse(mask)
                if not hasattr(mask, "shape"):
                    mask = np.asarray(mask)
                if parts and tuple(mask.shape) != tuple(parts[0].shape[1:]):
                    raise UDFError(
                        f"MaskContainer: mask_factories[{i}] returns a mask of shape "
                        f"{tuple(mask.shape)}, mask_factories[0] one of "
                        f"{tuple(parts[0].shape[1:])}; every factory must return a mask of "
                        "the frames' signal shape"
                    )
                parts.append(mask[np.newaxis])
            all_sparse = all(is_sparse(p) for p in parts)
        if self._use_sparse is None:
            self._use_sparse = self._default_sparse if all_sparse else False
        if self._length is not None and sum(p.shape[0] for p in parts) != self._length:
            raise UDFError(
                f"MaskContainer: count={self._length} but the factories give "
                f"{sum(p.shape[0] for p in parts)} masks"
            )
        if self._use_sparse:
            import sparse

            return sparse.concatenate([to_sparse(p) for p in parts])
        return np.concatenate([to_dense(p) for p in parts])

    def get(self, key, dtype=None, sparse_backend=None, transpose=True, backend=None):
        """The masks over the signal part of `key` (a tile's, a frame's or a partition's
        `Slice`, as ``self.meta.slice`` gives it; the nav part is ignored), flat: shape
        ``(pixels, n)`` (``transpose=True``) or ``(n, pixels)``; in `sparse_backend` (one of
        `SPARSE_FORMATS`; default: `use_sparse`), as `dtype` (default: `dtype`), dense
        ones on `backend` (default: the container's). Cached per slice and arguments."""
        if not isinstance(key, Slice):
            raise TypeError(
                f"MaskContainer.get: key={key!r}; expected a Slice (a tile's or partition's, "
                "as self.meta.slice gives it)"
            )
        return self.get_for_sig_slice(key.sig, dtype, sparse_backend, transpose, backend)

    def get_for_sig_slice(
        self, sig_slice: Slice, dtype=None, sparse_backend=None, transpose=True, backend=None
    ):
        """:meth:`get` for a `Slice` that is only a signal slice."""
        dtype = self.dtype if dtype is None else np.dtype(dtype)
        sparse_backend = self.use_sparse if sparse_backend is None else sparse_backend
        if sparse_backend:
            _check_format("sparse_backend", sparse_backend)
        backend = self.backend if backend is None else backend
        cache_key = (sig_slice, dtype, sparse_backend, bool(transpose), backend)
        cached = self._cache.get(cache_key)
        if cached is None:
            cached = self._cache[cache_key] = self._cut(
                sig_slice, dtype, sparse_backend, transpose, backend
            )
        return cached

    def _cut(self, sig_slice: Slice, dtype, sparse_backend, transpose, backend):
        from ltdask.masks import is_sparse, to_dense, to_sparse

        stack = self.computed_masks
        sig_shape = tuple(stack.shape[1:])
        if len(sig_slice.origin) != len(sig_shape) or any(
            stop > size for stop, size in zip(sig_slice.stop, sig_shape, strict=True)
        ):
            raise UDFError(
                f"MaskContainer.get: the signal slice {sig_slice!r} does not lie inside the "
                f"masks' shape {sig_shape}; the masks must have the dataset's signal shape"
            )
        part = stack[(slice(None), *sig_slice.get())].reshape((stack.shape[0], -1))
        if transpose:
            part = part.T
        if sparse_backend:
            part = to_sparse(part).astype(dtype)
            if sparse_backend == "sparse.pydata":
                return part
            if sparse_backend == "sparse.pydata.GCXS":
                import sparse

                return sparse.GCXS(part)
            matrix = part.to_scipy_sparse()
            matrix = matrix.tocsc() if sparse_backend == "scipy.sparse.csc" else matrix.tocsr()
            if backend in _CUPY_BACKENDS:
                import cupyx.scipy.sparse

                kind = "csc_matrix" if sparse_backend == "scipy.sparse.csc" else "csr_matrix"
                return getattr(cupyx.scipy.sparse, kind)(matrix)
            return matrix
        dense = np.ascontiguousarray(to_dense(part) if is_sparse(part) else part, dtype=dtype)
        if backend in _CUPY_BACKENDS:
            import cupy

            return cupy.asarray(dense)
        return dense


def udf_masks(params, meta=None) -> MaskContainer:
    """The masks of an `ltdask.udf.ApplyMasksUDF` with parameters `params` as LiberTEM's
    ``ApplyMasksUDF.masks`` gives them: a `MaskContainer` of its ``mask_factories``,
    ``mask_dtype``, ``mask_count`` and ``use_sparse``, dense masks on the GPU where `meta`
    (the UDF's ``self.meta``, if set) has a CuPy array backend. The factories are called
    when masks are first cut, not here.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask import Shape, Slice
    >>> from ltdask.udf import ApplyMasksUDF
    >>> udf = ApplyMasksUDF([lambda: np.eye(4), lambda: np.ones((4, 4))], use_sparse=True)
    >>> frame = Slice((0, 0, 0), Shape((1, 4, 4), sig_dims=2))
    >>> udf.masks.get(frame, transpose=True).shape  # (pixels, masks), scipy.sparse
    (16, 2)
    """
    backend = getattr(meta, "array_backend", None)
    return MaskContainer(
        params.mask_factories,
        dtype=params.mask_dtype,
        use_sparse=params.use_sparse,
        count=params.mask_count,
        backend="cupy" if backend in _CUPY_BACKENDS else "numpy",
    )


def _is_scipy(value) -> bool:
    return type(value).__module__.startswith("scipy.sparse")


def _check_format(name: str, value) -> None:
    if value not in SPARSE_FORMATS:
        raise UDFError(
            f"MaskContainer: {name}={value!r} is not a sparse format; expected one of "
            f"{', '.join(SPARSE_FORMATS)}"
        )
