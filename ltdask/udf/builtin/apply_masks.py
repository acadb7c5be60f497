"""`ApplyMasksUDF`: virtual detectors, the dot product of each frame with a mask stack."""

from __future__ import annotations

import collections
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from ltdask.common import Slice
from ltdask.exceptions import UDFError
from ltdask.kernels.sparse import csr_dot_dense, csr_dot_single, csr_dot_sparse
from ltdask.udf.base import FlatTileUDF
from ltdask.udf.builtin._kernels import dot_mask, dot_masks, dot_runs
from ltdask.udf.builtin.sums import SUM_BACKENDS, csr_parts, dense_backend
from ltdask.udf.interface import UDFBase
from ltdask.udf.paths import TilePaths

if TYPE_CHECKING:
    import scipy.sparse

# scipy.sparse is imported where masks are made, not with this module: ``import ltdask``
# imports the shipped UDFs and should not import scipy (see `ltdask.common._lazy`)


def _is_sparse(m) -> bool:
    import scipy.sparse

    return scipy.sparse.issparse(m) or type(m).__module__.startswith("sparse")


def _dense(m) -> np.ndarray:
    import scipy.sparse

    if scipy.sparse.issparse(m):
        return m.toarray()
    if hasattr(m, "todense"):
        return np.asarray(m.todense())
    return np.asarray(m)


class MaskContainer:
    """`ApplyMasksUDF`'s mask stack (made once per process and run), cut per signal slice
    into the layout the products want: ``(masks, pixels)`` dense, or runs of non-zero
    pixels for sparse masks; cached per slice.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask import Shape, Slice
    >>> from ltdask.udf import MaskContainer
    >>> masks = MaskContainer([lambda: np.ones((4, 4)), lambda: np.eye(4)], sig_shape=(4, 4))
    >>> masks.count, masks.dtype, masks.use_sparse
    (2, dtype('float64'), False)
    >>> kind, stack = masks.get(Slice((0, 0), Shape((2, 4), sig_dims=2)))  # the top two rows
    >>> kind, stack.shape
    ('dense', (2, 8))
    """

    def __init__(self, factories, sig_shape, dtype=None, use_sparse=None, count=None) -> None:
        self.sig_shape = tuple(sig_shape)
        masks, sparse_in = self._evaluate(factories)
        if count is not None and masks.shape[0] != count:
            raise UDFError(
                f"ApplyMasksUDF: mask_count={count} but the factories give {masks.shape[0]} masks"
            )
        if use_sparse is None:
            use_sparse = sparse_in
        self.use_sparse = bool(use_sparse)
        self.dtype = np.dtype(dtype) if dtype is not None else masks.dtype
        #: the masks' dtype as given (or forced): what results are typed by, as LiberTEM
        #: (boolean masks keep integer results integer); `dtype` is how they are stored
        self.given_dtype = self.dtype
        if self.dtype.kind == "b":
            self.dtype = np.dtype(np.float32)
        self.count = masks.shape[0]
        flat = masks.reshape(self.count, -1)
        if self.use_sparse:
            import scipy.sparse

            self._stack = scipy.sparse.csr_matrix(flat, dtype=self.dtype)
        else:
            self._stack = np.asarray(flat, dtype=self.dtype)
        self._cache: dict = {}

    def _evaluate(self, factories):
        if callable(factories):
            stack = factories()
            sparse_in = _is_sparse(stack)
            stack = _dense(stack)
            if stack.shape == self.sig_shape:
                stack = stack[np.newaxis]
        else:
            masks = [f() for f in factories]
            if not masks:
                raise UDFError("ApplyMasksUDF: mask_factories is empty")
            sparse_in = all(_is_sparse(m) for m in masks)
            stack = np.stack([_dense(m) for m in masks])
        if stack.shape[1:] != self.sig_shape:
            raise UDFError(
                f"ApplyMasksUDF: masks have shape {stack.shape[1:]}, the frames {self.sig_shape}"
            )
        return stack, sparse_in

    def get(self, sig_slice: Slice):
        """The masks for `sig_slice`: ``("dense", (masks, pixels) array)`` or, for sparse
        masks, ``("runs", arrays for dot_runs)``; cached per slice."""
        cached = self._cache.get(sig_slice)
        if cached is None:
            inner = int(np.prod(self.sig_shape[1:]))
            if tuple(sig_slice.shape)[1:] == self.sig_shape[1:]:
                # whole rows: a range of the flattened frame
                p0 = sig_slice.origin[0] * inner
                part = self._stack[:, p0 : p0 + int(np.prod(tuple(sig_slice.shape)))]
            else:
                index = np.arange(int(np.prod(self.sig_shape))).reshape(self.sig_shape)
                part = self._stack[:, index[sig_slice.get()].reshape(-1)]
            if self.use_sparse:
                import scipy.sparse

                cached = ("runs", _runs(scipy.sparse.csr_matrix(part)))
            else:
                cached = ("dense", np.ascontiguousarray(part))
            self._cache[sig_slice] = cached
        return cached

    def matrix(self, sig_slice: Slice, backend: str):
        """The ``(masks, pixels)`` matrix of `sig_slice` for tiles of `backend` (not numpy):
        scipy CSR for sparse masks, dense otherwise, on the GPU for CuPy backends."""
        key = (sig_slice, backend)
        cached = self._cache.get(key)
        if cached is None:
            kind, part = self.get(sig_slice)
            if kind == "runs":
                part = _runs_matrix(part, int(np.prod(tuple(sig_slice.shape))))
            if backend in UDFBase.CUPY_BACKENDS:
                from sparseconverter import for_backend

                gpu = "cupyx.scipy.sparse.csr_matrix" if kind == "runs" else UDFBase.BACKEND_CUPY
                part = for_backend(part, gpu)
            cached = self._cache[key] = part
        return cached

    def apply_csr(self, sig_slice: Slice, parts, out):
        """``out += tile @ masks.T`` for a CSR tile given as ``(indptr, indices, data)``."""
        key = (sig_slice, "csr")
        weights: tuple | None = self._cache.get(key)
        if weights is None:
            kind, part = self.get(sig_slice)
            if kind == "runs":
                by_pixel = _runs_matrix(part, int(np.prod(tuple(sig_slice.shape)))).T.tocsr()
                by_pixel.sort_indices()
                weights = ("sparse", by_pixel.indptr, by_pixel.indices, by_pixel.data)
                per_pixel = np.diff(by_pixel.indptr)
                if per_pixel.max(initial=0) <= 1:  # each pixel in one mask at most
                    mask = np.full(per_pixel.size, -1, np.int64)
                    weight = np.zeros(per_pixel.size, by_pixel.dtype)
                    has = per_pixel == 1
                    mask[has] = by_pixel.indices
                    weight[has] = by_pixel.data
                    weights = ("single", mask, weight)
            else:
                weights = ("dense", np.ascontiguousarray(part.T))
            self._cache[key] = weights
        indptr, indices, data = parts
        if weights[0] == "single":
            csr_dot_single(indptr, indices, data, weights[1], weights[2], out)
        elif weights[0] == "sparse":
            csr_dot_sparse(indptr, indices, data, weights[1], weights[2], weights[3], out)
        else:
            csr_dot_dense(indptr, indices, data, weights[1], out)

    def apply(self, sig_slice: Slice, frames: np.ndarray, p0: int, p1: int, out):
        """``out += frames[:, p0:p1] @ masks.T`` for the flat tile of `sig_slice`."""
        kind, masks = self.get(sig_slice)
        real = frames.dtype.kind != "c" and self.dtype.kind != "c"
        if kind == "dense" and real and out.flags.c_contiguous:
            if masks.shape[0] == 1:
                dot_mask(frames, p0, p1, masks[0], out[:, 0])
            else:
                dot_masks(frames, p0, p1, masks, out)
        elif kind == "runs" and real and out.flags.c_contiguous:
            run_start, run_len, run_weight, run_mask, weights = masks[:5]
            dot_runs(frames, p0, p1, run_start, run_len, run_weight, run_mask, weights, out)
        elif kind == "dense":
            out += frames[:, p0:p1] @ masks.T
        else:
            out += np.asarray((_runs_matrix(masks, p1 - p0) @ frames[:, p0:p1].T).T)


class _ContainerCache:
    """Mask containers of this process, per run, mask factories and parameters: the
    partition tasks of a run share the factories object (one graph node), so the masks
    are made and cut per signal slice once per process and run, not once per partition
    (for 16 masks that took longer than the product itself). A new run calls the
    factories again, as LiberTEM does."""

    def __init__(self, size: int = 8):
        self._size = size
        self._entries: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, run: str | None, factories, args) -> MaskContainer:
        """The container for `factories` and `args` in the run of id `run` (see
        `UDFMeta.run_id`; None outside a run's partition tasks: a new one)."""
        sig_shape, dtype, use_sparse, count = args
        if run is None:
            return MaskContainer(factories, sig_shape, dtype, use_sparse, count)
        # keyed by identity within one run; the entry holds the factories, so the id is
        # not reused while it is cached
        key = (run, id(factories), args)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                return entry[1]
        container = MaskContainer(factories, sig_shape, dtype, use_sparse, count)
        with self._lock:
            entry = self._entries.setdefault(key, (factories, container))
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
            return entry[1]


_CONTAINERS = _ContainerCache()


def _runs(csr: scipy.sparse.csr_matrix):
    """Runs of consecutive non-zero pixels per mask, for `dot_runs`."""
    csr = csr.copy()
    csr.sort_indices()
    starts: list[np.ndarray] = []
    lens: list[np.ndarray] = []
    woffs: list[np.ndarray] = []
    masks: list[np.ndarray] = []
    for m in range(csr.shape[0]):
        a, b = csr.indptr[m], csr.indptr[m + 1]
        idx = csr.indices[a:b]
        if idx.size == 0:
            continue
        breaks = np.flatnonzero(np.diff(idx) != 1) + 1
        first = np.concatenate([[0], breaks])
        last = np.concatenate([breaks, [idx.size]])
        starts.append(idx[first])
        lens.append(last - first)
        woffs.append(a + first)
        masks.append(np.full(first.size, m))
    cat = (
        (lambda xs: np.concatenate(xs).astype(np.int64))
        if starts
        else (lambda xs: np.zeros(0, np.int64))
    )
    run_start, run_len, run_weight, run_mask = cat(starts), cat(lens), cat(woffs), cat(masks)
    # in pixel order, not mask by mask: one sweep over each frame, every cache line read
    # once (2-3x faster for rings), and consecutive runs add to different sums
    order = np.argsort(run_start, kind="stable")
    return (
        run_start[order],
        run_len[order],
        run_weight[order],
        run_mask[order],
        np.ascontiguousarray(csr.data),
        csr.shape,
    )


def _runs_matrix(runs, px):
    import scipy.sparse

    starts, lens, woffs, masks, weights, shape = runs
    rows, cols, vals = [], [], []
    for s, n, w, m in zip(starts, lens, woffs, masks, strict=True):
        rows.append(np.full(n, m))
        cols.append(np.arange(s, s + n))
        vals.append(weights[w : w + n])
    if not rows:
        return scipy.sparse.csr_matrix(shape)
    return scipy.sparse.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=shape
    )


class ApplyMasksUDF(FlatTileUDF):
    """Dot product of every frame with each mask of a stack: result ``intensity``,
    nav-shaped with a last dim over the masks.

    Parameters
    ----------
    mask_factories : callable, list of callables or dict
        A function returning a stack ``(n, *sig)`` or a list of functions each returning
        one mask (numpy, scipy.sparse or ``sparse`` arrays); a dict of them by name names
        the masks (the ``mask`` coordinate of ``intensity``; by default 0, 1, ...).
    use_sparse : None, bool or str
        Apply the masks as a sparse matrix (default: when the factories return sparse
        masks).
    mask_count : int, optional
        Number of masks, to avoid calling the factories on the main node.
    mask_dtype : dtype, optional
        dtype of the masks (default: theirs).
    preferred_dtype : dtype, optional
        Preferred input dtype (default float32).
    shifts : array-like (2,) or aux data, optional
        Shift ``(y, x)`` of the masks relative to the frame, constant or per frame
        (``UDF.aux_data(..., kind="nav", extra_shape=(2,), dtype=int)``).
    mask_names : list of str, optional
        Names of the masks (the ``mask`` coordinate of ``intensity``), as the keys of a
        dict of factories give them.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> data = np.ones((2, 3, 4, 4), dtype=np.float32)
    >>> udf = ltdask.udf.ApplyMasksUDF([lambda: np.eye(4), lambda: np.ones((4, 4))])
    >>> udf.compute(ltdask.from_array(data))["intensity"].values[0, 0].tolist()
    [4.0, 16.0]
    """

    #: 8/16-bit tiles as the file's integers: the kernels convert them to the product's dtype
    TILE_PATHS = TilePaths(integer_tiles=True)

    def __init__(
        self,
        mask_factories,
        use_torch=True,
        use_sparse=None,
        mask_count=None,
        mask_dtype=None,
        preferred_dtype=None,
        backends=None,
        shifts=None,
        mask_names=None,
    ):
        # checked when made, as LiberTEM does
        if (
            shifts is not None
            and isinstance(use_sparse, str)
            and use_sparse.startswith("scipy.sparse")
        ):
            raise ValueError(
                f"Sparse backend {use_sparse} not supported for shifts, use sparse.pydata instead."
            )
        if backends is not None:
            given = [backends] if isinstance(backends, str) else list(backends)
            if not any(b in self.BACKEND_ALL for b in given):
                raise ValueError(f"No compatible backend found in {backends!r}")
        names = None if mask_names is None else [str(n) for n in mask_names]
        if isinstance(mask_factories, Mapping):
            names = [str(k) for k in mask_factories]
            mask_factories = list(mask_factories.values())
        if names is not None and isinstance(mask_factories, (list, tuple)):
            if len(names) != len(mask_factories):
                raise ValueError(
                    f"ApplyMasksUDF: {len(names)} mask_names for {len(mask_factories)} masks"
                )
        super().__init__(
            mask_names=names,
            mask_factories=mask_factories,
            use_torch=use_torch,
            use_sparse=use_sparse,
            mask_count=mask_count,
            mask_dtype=mask_dtype,
            preferred_dtype=preferred_dtype,
            backends=backends,
            shifts=shifts,
        )
        self._mask_container = None

    @property
    def masks(self):
        """LiberTEM's ``udf.masks``: `ltdask.masks.container.udf_masks`, on first access."""
        if self._mask_container is None:
            from ltdask.masks.container import udf_masks

            self._mask_container = udf_masks(self.params, self.meta)
        return self._mask_container

    def get_method(self):
        return self.UDF_METHOD.FRAME if self.params.shifts is not None else self.UDF_METHOD.TILE

    def get_extra_dims(self):
        return {"intensity": ("mask",)}

    def get_extra_coords(self):
        names = self.params.mask_names
        return {} if names is None else {"mask": names}

    def get_backends(self):
        if self.params.shifts is not None:
            return (self.BACKEND_NUMPY,)  # shifted masks: frame by frame, dense
        given = self.params.backends
        if given is None:
            return SUM_BACKENDS
        given = (given,) if isinstance(given, str) else tuple(given)
        return tuple(b for b in given if b in SUM_BACKENDS) or SUM_BACKENDS

    def get_preferred_input_dtype(self):
        if self.params.preferred_dtype is None:
            return super().get_preferred_input_dtype()
        return self.params.preferred_dtype

    def _container(self) -> MaskContainer:
        p = self.params
        args = (tuple(self.meta.dataset_shape.sig), p.mask_dtype, p.use_sparse, p.mask_count)
        return _CONTAINERS.get(self.meta.run_id, p.mask_factories, args)

    def get_result_buffers(self):
        if self.params.mask_count is not None and self.params.mask_dtype is not None:
            count, mdt = self.params.mask_count, np.dtype(self.params.mask_dtype)
        else:
            c = self._container()
            count, mdt = c.count, c.given_dtype
        dtype = np.result_type(self.meta.input_dtype, mdt)
        return {"intensity": self.buffer(kind="nav", extra_shape=(count,), dtype=dtype)}

    def get_task_data(self):
        return {"masks": self._container()}

    def process_flat_tile(self, frames, p0, p1):
        self.task_data.masks.apply(self.meta.sig_slice, frames, p0, p1, self.results.intensity)

    def process_tile(self, tile):
        if dense_backend(self):
            return super().process_tile(tile)
        parts = csr_parts(tile)
        if parts is not None:
            masks = self.task_data.masks
            return masks.apply_csr(self.meta.sig_slice, parts, self.results.intensity)
        masks = self.task_data.masks.matrix(self.meta.sig_slice, self.meta.array_backend)
        rows = tile.reshape((tile.shape[0], -1)) if tile.ndim != 2 else tile
        out = self.results.intensity
        out += self.forbuf(rows @ masks.T, out).astype(out.dtype, copy=False)

    def process_frame(self, frame):
        shifts = np.asarray(self.params.shifts, dtype=np.int64).reshape(-1)
        stack = self.task_data.masks._stack
        sig = frame.shape
        dy, dx = int(shifts[0]), int(shifts[1])
        if abs(dy) >= sig[0] or abs(dx) >= sig[1]:
            self.results.intensity[:] = 0  # no overlap left (LiberTEM gives zeros)
            return
        # mask pixel (y, x) sits over frame pixel (y + dy, x + dx)
        fy = slice(max(0, dy), min(sig[0], sig[0] + dy))
        fx = slice(max(0, dx), min(sig[1], sig[1] + dx))
        my = slice(max(0, -dy), min(sig[0], sig[0] - dy))
        mx = slice(max(0, -dx), min(sig[1], sig[1] - dx))
        masks = _dense(stack).reshape(-1, *sig)[:, my, mx]
        part = frame[fy, fx]
        self.results.intensity[:] = (masks * part[np.newaxis]).reshape(masks.shape[0], -1).sum(-1)
