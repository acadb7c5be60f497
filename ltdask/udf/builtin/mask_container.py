"""`MaskContainer`: `ApplyMasksUDF`'s mask stack, cut per signal slice into the layout its
products want, with the run's folded corrections in the masks; cached per process and run."""

from __future__ import annotations

import collections
import threading
from typing import TYPE_CHECKING

import numpy as np

from ltdask.common import Slice
from ltdask.exceptions import UDFError
from ltdask.kernels.sparse import csr_dot_dense, csr_dot_single, csr_dot_sparse
from ltdask.udf.builtin._kernels import dot_mask, dot_masks, dot_runs, row_intervals
from ltdask.udf.interface import UDFBase

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

    def __init__(
        self, factories, sig_shape, dtype=None, use_sparse=None, count=None, folded=None
    ) -> None:
        self.sig_shape = tuple(sig_shape)
        #: the run's corrections folded into the masks (`PreparedCorrections`), or None
        self.folded = folded
        #: per signal slice, what the dark frame takes from each mask's product
        self._offsets: dict = {}
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
            if self.folded is not None:
                # products with uncorrected frames through corrected masks (float64 as
                # worked out; dense ones stored in the masks' dtype, at least float32)
                linear = self.folded.linear(sig_slice.get())
                part = linear.adjoint(part)
                self._offsets[sig_slice] = linear.offsets(part)
                if not self.use_sparse:
                    part = part.astype(np.result_type(self.dtype, np.float32))
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
        if self.folded is not None:
            # (the dark frame's part of each product, taken off before the tile's: the
            # rows of `out` may hold other slices' products already)
            out -= self._offsets[sig_slice].astype(out.dtype, copy=False)
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

    def get(self, run: str | None, factories, args, folded=None) -> MaskContainer:
        """The container for `factories` and `args` in the run of id `run` (see
        `UDFMeta.run_id`; None outside a run's partition tasks: a new one), with the
        run's folded corrections `folded` (one run has one set)."""
        sig_shape, dtype, use_sparse, count = args
        if run is None:
            return MaskContainer(factories, sig_shape, dtype, use_sparse, count, folded)
        # keyed by identity within one run; the entry holds the factories, so the id is
        # not reused while it is cached
        key = (run, id(factories), args)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                return entry[1]
        container = MaskContainer(factories, sig_shape, dtype, use_sparse, count, folded)
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


def folded_moment_masks(mask: np.ndarray, sig_index, linear, dtype=None) -> tuple:
    """The masks ``m``, ``m * y`` and ``m * x`` of the signal slice `sig_index` (``mask``:
    ``m`` there) with the corrections `linear` folded in: ``(intervals, runs, offsets)``.
    With `dtype` (tiles of whole rows), ``intervals`` is ``(row0, starts, stops, weights,
    cols, at, rest)`` for `weighted_moments`: the column intervals of each of the slice's
    rows that hold the mask and the pixels the excluded ones are repaired from (gaps of a
    few pixels closed: read, with zero weights, in the same sweep), the folded ``m`` in
    `dtype` (the folded ``m * y`` and ``m * x`` are that times ``y`` and ``x`` but at the
    sources of repaired pixels: their differences there as ``at``, ``rest``), and the
    columns; ``runs`` None. Else ``intervals`` None and all three as ``runs``
    (`shared_runs`). ``offsets``: what the dark frame takes from each product."""
    y, x = (c.reshape(-1) for c in np.mgrid[sig_index])
    m = mask.reshape(-1)
    folded = linear.adjoint(np.stack([m, m * y, m * x]).astype(np.float64))
    offsets = linear.offsets(folded)
    if dtype is None:
        return None, shared_runs(folded), offsets
    support = (m | (folded != 0).any(axis=0)).reshape(mask.shape)
    starts, stops = row_intervals(_closed_rows(support, CLOSED_GAP))
    weights = np.ascontiguousarray(folded[0], dtype=dtype)
    rest = folded[1:] - folded[0] * np.stack([y, x])
    # (where no repair moved weight the difference is rounding: a gain times y, twice)
    moved = (np.abs(rest) > 1e-9 * np.abs(folded[1:]).max(initial=1.0)).any(axis=0)
    at = np.flatnonzero(moved)
    cols = np.arange(mask.shape[1], dtype=dtype)
    row0 = int(y[0]) if y.size else 0
    return (
        (row0, starts, stops, weights, cols, at, np.ascontiguousarray(rest[:, at].T)),
        None,
        offsets,
    )


#: gaps between a row's pixels of a folded mask up to this wide are read with it: one
#: interval rather than two
CLOSED_GAP = 8


def _closed_rows(support: np.ndarray, gap: int) -> np.ndarray:
    """`support` with the gaps of at most `gap` pixels between pixels of a row filled."""
    rows, cols = np.nonzero(support)
    step = np.diff(cols)
    near = (rows[1:] == rows[:-1]) & (step > 1) & (step <= gap + 1)
    out = support.copy()
    for r, a, b in zip(rows[:-1][near], cols[:-1][near], cols[1:][near], strict=True):
        out[r, a:b] = True  # (a few per row at most: the loop runs over gaps only)
    return out


def shared_runs(masks: np.ndarray) -> tuple:
    """Dense masks ``(k, pixels)`` as runs for `dot_shared_runs` over the pixels where any
    of them is not zero (a folded mask: its pixels and those its excluded pixels are
    repaired from)."""
    support = np.flatnonzero((masks != 0).any(axis=0))
    breaks = np.flatnonzero(np.diff(support) != 1) + 1
    first = np.concatenate([[0] if support.size else [], breaks]).astype(np.int64)
    last = np.concatenate([breaks, [support.size] if support.size else []]).astype(np.int64)
    runs = (support[first].astype(np.int64), last - first, first)
    return (*runs, np.ascontiguousarray(masks[:, support]))


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
