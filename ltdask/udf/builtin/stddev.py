"""`StdDevUDF`: per-pixel sum, mean, variance and standard deviation in one pass."""

from __future__ import annotations

import numba
import numpy as np

from ltdask.corrections import RepairedMoments
from ltdask.exceptions import UDFError
from ltdask.kernels.repaired import no_repaired, no_weighted
from ltdask.kernels.sparse import csr_moments
from ltdask.kernels.statistics import chan_merge, moments_with
from ltdask.runtime import scratch
from ltdask.udf.backends import to_host
from ltdask.udf.base import FlatTileUDF
from ltdask.udf.builtin.sums import csr_parts, dense_backend
from ltdask.udf.interface import UDFBase
from ltdask.udf.paths import TilePaths
from ltdask.udf.shared import (
    IntegerMoments,
    finished_moments,
    integer_tiles,
    moments_state,
    moments_work,
    moved_moments,
    repaired_moments,
)

_NO_SUMS = np.zeros(0)


def _array_moments(rows, count, mean, m2):
    """The `moments` kernel in array operations, for a numpy (complex data) or CuPy tile as
    ``(frames, pixels)``: the tile's own mean and centred sum of squares in `mean`'s dtype,
    on the tile's device, added to the running (host) moments."""
    n = rows.shape[0]
    if n == 0:
        return count
    wide = rows.astype(mean.dtype, copy=False)
    tmean = wide.mean(axis=0)
    tm2 = (abs(wide - tmean) ** 2).sum(axis=0)
    return _add_moments(count, mean, m2, n, to_host(tmean), to_host(tm2))


def _sparse_moments(rows, count, mean, m2):
    """The moments of a sparse ``(frames, pixels)`` tile (any sparse backend) added to the
    running ones: deviations from the tile's mean summed over the stored values, plus the
    pixels' zeros, each ``mean**2`` away (no sum of squares that cancels)."""
    from sparseconverter import for_backend

    n, px = rows.shape
    if n == 0:
        return count
    if rows.dtype.kind == "c":  # (rare: bincount takes real weights only)
        return _array_moments(for_backend(rows, UDFBase.BACKEND_NUMPY), count, mean, m2)
    parts = csr_parts(rows, summed=True)
    if parts is not None:
        tmean, tm2 = np.empty(px), np.empty(px)
        csr_moments(*parts, n, tmean, tm2)
        return _add_moments(count, mean, m2, n, tmean, tm2)
    coo = for_backend(rows, UDFBase.BACKEND_SCIPY_COO)
    values = np.asarray(coo.data, dtype=mean.dtype)
    stored = np.bincount(coo.col, minlength=px)
    tmean = np.bincount(coo.col, weights=values, minlength=px) / n
    dev = values - tmean[coo.col]
    tm2 = np.bincount(coo.col, weights=dev * dev, minlength=px) + (n - stored) * tmean**2
    return _add_moments(count, mean, m2, n, tmean, tm2)


def _add_moments(count, mean, m2, n, tmean, tm2):
    """Chan's update of running (`count`, `mean`, `m2`) by a tile's (`n`, `tmean`, `tm2`);
    `mean` and `m2` in place, the new count returned."""
    m2 += tm2
    total = count + n
    delta = tmean - mean
    m2 += np.abs(delta) ** 2 * (count * n / total)
    mean += delta * n / total
    return total


class StdDevUDF(FlatTileUDF):
    """Per-pixel statistics over all frames (inside the ROI).

    Results: ``sum``, ``mean``, ``var`` (population variance), ``std`` (signal-shaped),
    ``varsum`` (sum of squared deviations from the mean) and ``num_frames``. Each tile is
    reduced in one pass around a shift close to the mean (the running mean) and merged
    with Chan's formula, so data with a large mean loses no precision.

    Parameters
    ----------
    dtype
        dtype of ``varsum`` (and the base of ``sum``'s); float64 by default.
    use_numba
        Accepted for LiberTEM compatibility; real data always uses the numba kernel.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> data = np.random.default_rng(0).random((3, 4, 5, 6)).astype(np.float32)
    >>> res = ltdask.udf.StdDevUDF().compute(ltdask.from_array(data))
    >>> bool(np.allclose(res["var"], data.var(axis=(0, 1), dtype=np.float64)))
    True
    """

    TILE_PATHS = TilePaths(
        merge_all_on_numpy=True,
        # SumUDF and SumSigUDF in the same run share this pass (see ``ltdask.udf.shared``)
        shared_stats=frozenset({"moments"}),
        # 8/16-bit tiles come as the file's integers: their sums of x and x * x are exact
        # in int64 (`IntegerMoments`), turned into float64 moments a partition at a time
        integer_tiles=True,
        # a dark frame and gain map are applied to the moments, not to every tile; the
        # repaired pixels' moments are kept from their values frame by frame
        folds_corrections=frozenset({"dark", "gain", "excluded"}),
        # frames stored with their pixels moved are reduced as stored, the moments moved
        # once
        folds_layout=True,
    )

    def __init__(self, dtype=None, use_numba=True):
        super().__init__(dtype=dtype, use_numba=use_numba)

    def _base(self):
        return np.dtype(self.params.dtype or np.float64)

    def get_backends(self):
        return (
            self.BACKEND_NUMPY,
            self.BACKEND_SCIPY_CSR,
            self.BACKEND_SCIPY_CSC,
            self.BACKEND_SCIPY_COO,
            self.BACKEND_SPARSE_COO,
            self.BACKEND_SPARSE_GCXS,
            self.BACKEND_CUPY,
        )

    def get_result_buffers(self):
        base = self._base()
        sum_dtype = np.result_type(self.meta.input_dtype, base)
        stat_dtype = np.result_type(np.float32, base) if base.kind != "c" else base
        return {
            "varsum": self.buffer(kind="sig", dtype=base if base.kind == "f" else np.float64),
            "num_frames": self.buffer(kind="single", dtype=np.int64),
            "sum": self.buffer(kind="sig", dtype=sum_dtype),
            "var": self.buffer(kind="sig", dtype=stat_dtype.type(0).real.dtype, use="result_only"),
            "std": self.buffer(kind="sig", dtype=stat_dtype.type(0).real.dtype, use="result_only"),
            "mean": self.buffer(kind="sig", dtype=sum_dtype, use="result_only"),
        }

    def get_task_data(self):
        return {"stats": {}, "work": None, "repaired": {}}

    def _stats(self, px: int, complex_: bool) -> list:
        idx = self.meta.tiling_scheme_idx
        stats = self.task_data.stats.get(idx)
        if stats is None:
            # count, mean, centred sum of squares, shift (see the `moments` kernel)
            stats = moments_state(px, np.complex128 if complex_ else np.float64)
            self.task_data.stats[idx] = stats
        return stats

    def process_tile(self, tile):
        if dense_backend(self):
            return super().process_tile(tile)
        rows = tile.reshape((tile.shape[0], -1)) if tile.ndim != 2 else tile
        stats = self._stats(rows.shape[1], tile.dtype.kind == "c")
        add = _array_moments if self.meta.array_backend == self.BACKEND_CUPY else _sparse_moments
        stats[0] = add(rows, stats[0], stats[1], stats[2])

    def process_flat_tile(self, frames, p0, p1):
        # (the repaired pixels' values from the rows the moments pass has just read)
        repaired = self._repaired()
        if integer_tiles(frames.dtype):
            state = IntegerMoments.kept(self.task_data.stats, self.meta.tiling_scheme_idx, p1 - p0)
            state.add(frames, p0, p1, repaired=repaired)
            return
        complex_ = frames.dtype.kind == "c"
        stats = self._stats(p1 - p0, complex_)
        if complex_:
            if repaired is not None:
                repaired.add(frames, p0, p1)
            stats[0] = _array_moments(frames[:, p0:p1], stats[0], stats[1], stats[2])
            return
        work = self.task_data.work
        if work is None:
            work = self.task_data.work = moments_work()

        def run(rows):
            stats[0] = moments_with(
                frames, p0, p1, *stats, _NO_SUMS, False, work, no_weighted(), rows
            )

        if repaired is None:
            run(no_repaired())
        else:
            repaired.during(frames, p0, p1, run)

    def _repaired(self) -> RepairedMoments | None:
        repaired, idx = self.task_data.repaired, self.meta.tiling_scheme_idx
        if idx not in repaired:
            repaired[idx] = repaired_moments(self)
        return repaired[idx]

    def process_shared_stats(self, stats):
        idx = self.meta.tiling_scheme_idx
        self.task_data.stats[idx] = stats.moments
        if stats.repaired is not None:
            self.task_data.repaired[idx] = stats.repaired

    def postprocess(self):
        scheme = self.meta.tiling_scheme
        states = {idx: finished_moments(s) for idx, s in self.task_data.stats.items()}
        layout = self.tile_form.pixel_layout
        if layout is not None:  # (moments of the raw frames' pixels: moved to the image's)
            states = {idx: moved_moments(layout, s) for idx, s in states.items()}
        counts = {s[0] for s in states.values()}
        if len(counts) > 1:
            raise UDFError(f"StdDevUDF: signal slices saw different frame counts {counts}")
        folded = self.tile_form.folded_corrections
        for idx, (count, mean, m2, _) in states.items():
            index = scheme[idx].get()
            view = self.results.sum[index]
            vs = self.results.varsum[index]
            if folded is None:
                np.multiply(mean.reshape(view.shape), count, out=view)
                vs[...] = m2.reshape(vs.shape)
                continue
            # (in task scratch, the state untouched: SumUDF may share it)
            sums, m2s = scratch.empty(view.size), scratch.empty(vs.size)
            folded.fold_moments(mean, m2, count, sums, m2s, index)
            if self.task_data.repaired.get(idx) is not None:
                self.task_data.repaired[idx].finish(sums, m2s)
            view[...] = sums.reshape(view.shape)
            vs[...] = m2s.reshape(vs.shape)
        self.results.num_frames[:] = counts.pop() if counts else 0

    def merge(self, dest, src):
        n_a = int(dest.num_frames[0])
        n_b = int(src.num_frames[0])
        n = n_a + n_b
        if n_b == 0:
            return
        if n_a:
            delta = src.sum / n_b - dest.sum / n_a
            dest.varsum[:] += src.varsum + np.abs(delta) ** 2 * (n_a * n_b / n)
        else:
            dest.varsum[:] = src.varsum
        dest.sum[:] += src.sum
        dest.num_frames[:] = n

    def merge_all(self, ordered_results):
        parts = list(ordered_results.values())
        if all(isinstance(p.sum, np.ndarray) for p in parts):
            return _merge_numpy(parts)
        counts = np.stack([p.num_frames for p in parts]).astype(np.float64)  # (k, 1)
        sums = np.stack([p.sum for p in parts])
        varsums = np.stack([p.varsum for p in parts])
        total = counts.sum(axis=0)
        total_sum = sums.sum(axis=0)
        expand = (slice(None),) + (None,) * (sums.ndim - 1)
        n_i = counts[:, 0][expand]
        mean = total_sum / np.maximum(total, 1)
        means = sums / np.maximum(n_i, 1)
        spread = (np.abs(means - mean) ** 2 * n_i).sum(axis=0)
        return {
            "num_frames": total.astype(np.int64),
            "sum": total_sum,
            "varsum": varsums.sum(axis=0) + spread,
        }

    def get_results(self):
        n = self.results.num_frames[0]
        # no frames: NaN statistics, without a warning (``map_blocks``: dask's array-expr
        # engine has no ``where`` in dask 2026.8)
        n = n.map_blocks(_nan_where_zero, dtype=np.float64)
        mean = self.results.sum / n
        var = self.results.varsum / n
        return {"mean": mean, "var": var, "std": np.sqrt(var)}


def _merge_numpy(parts) -> dict:
    """`StdDevUDF.merge_all` on numpy partials: Chan's pairwise update in place, one
    partition after the other (no stacked copies of every partition's buffers)."""
    total = 0
    total_sum = np.zeros_like(parts[0].sum)
    varsum = np.zeros_like(parts[0].varsum)
    mean = np.zeros(total_sum.shape, dtype=np.result_type(total_sum, np.float64))
    real = total_sum.dtype.kind == "f" and varsum.dtype.kind == "f"
    flat = (total_sum.reshape(-1), varsum.reshape(-1), mean.reshape(-1))
    for p in parts:
        n_b = int(p.num_frames[0])
        if n_b == 0:
            continue
        if real:  # (one numba pass per part: no temporaries)
            total = chan_merge(total, n_b, p.sum.reshape(-1), p.varsum.reshape(-1), *flat)
            continue
        n = total + n_b
        delta = p.sum / n_b - mean
        varsum += p.varsum
        if total:
            varsum += np.abs(delta) ** 2 * (total * n_b / n)
        mean += delta * (n_b / n)
        total_sum += p.sum
        total = n
    return {"num_frames": np.array([total], dtype=np.int64), "sum": total_sum, "varsum": varsum}


@numba.njit(nogil=True, cache=True)
def merge(dest_n, dest_sum, dest_varsum, src_n, src_sum, src_varsum, src_mean):
    """LiberTEM's ``libertem.udf.stddev.merge``: add the statistics of `src_n` frames
    (per-pixel sums, sums of squared deviations from their mean, and that mean; 1-D) to
    those of `dest_n` frames in `dest_sum` and `dest_varsum`, in place, with Chan's
    formula. Returns the new frame count.

    Examples
    --------
    >>> a, b = np.array([[1.0, 2.0], [3.0, 6.0]]), np.array([[5.0, 4.0]])
    >>> s, v = a.sum(axis=0), a.var(axis=0) * 2
    >>> merge(2, s, v, 1, b.sum(axis=0), np.zeros(2), b.mean(axis=0))
    3
    >>> bool(np.allclose(v / 3, np.vstack([a, b]).var(axis=0)))
    True
    """
    if src_n == 0:
        return dest_n
    if dest_n == 0:
        dest_sum[:] = src_sum
        dest_varsum[:] = src_varsum
        return src_n
    n = dest_n + src_n
    weight = dest_n * src_n / n
    for p in range(dest_sum.shape[0]):
        delta = src_mean[p] - dest_sum[p] / dest_n
        dest_varsum[p] += src_varsum[p] + abs(delta) ** 2 * weight
        dest_sum[p] += src_sum[p]
    return n


@numba.njit(nogil=True, cache=True)
def process_tile(tile, n_0, sum_inout, varsum_inout):
    """LiberTEM's ``libertem.udf.stddev.process_tile``: add a tile of frames ``(frames,
    pixels)`` to the per-pixel sums and sums of squared deviations of `n_0` frames before
    (`sum_inout`, `varsum_inout`, 1-D, in place; see `merge`). Returns the new count.

    Examples
    --------
    >>> frames = np.array([[1.0, 2.0], [3.0, 6.0], [5.0, 4.0]])
    >>> s, v = frames[:1].sum(axis=0), np.zeros(2)
    >>> process_tile(frames[1:], 1, s, v)
    3
    >>> bool(np.allclose(v / 3, frames.var(axis=0)) and np.allclose(s, frames.sum(axis=0)))
    True
    """
    frames, pixels = tile.shape
    if frames == 0:
        return n_0
    n = n_0 + frames
    for p in range(pixels):
        total = tile[0, p] * 0
        for i in range(frames):
            total += tile[i, p]
        mean = total / frames
        m2 = abs(tile[0, p] - mean) ** 2 * 0
        for i in range(frames):
            m2 += abs(tile[i, p] - mean) ** 2
        if n_0 == 0:
            sum_inout[p] = total
            varsum_inout[p] = m2
        else:
            delta = mean - sum_inout[p] / n_0
            varsum_inout[p] += m2 + abs(delta) ** 2 * (n_0 * frames / n)
            sum_inout[p] += total
    return n


def consolidate_result(udf_result) -> dict:
    """LiberTEM's plain form of `StdDevUDF`'s results: ``num_frames`` an int, the other
    results (``sum``, ``varsum``, ``var``, ``std``, ``mean``) numpy arrays.

    Parameters
    ----------
    udf_result : dict
        `StdDevUDF`'s results as ``ctx.run_udf`` gives them (each with ``.data``), or as
        plain arrays.

    Returns
    -------
    dict
        ``{"num_frames": int, "varsum": ..., "sum": ..., "var": ..., "std": ..., "mean":
        ...}``.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.arange(8, dtype=np.float32).reshape(2, 1, 2, 2))
    >>> res = consolidate_result(ctx.run_udf(dataset=ds, udf=StdDevUDF()))
    >>> res["num_frames"], res["var"].tolist()
    (2, [[4.0, 4.0], [4.0, 4.0]])
    """

    def array(name):
        value = udf_result[name]
        return np.asarray(getattr(value, "data", value))

    out = {"num_frames": int(array("num_frames").reshape(-1)[0])}
    out.update({name: array(name) for name in ("varsum", "sum", "var", "std", "mean")})
    return out


def run_stddev(ctx, dataset, roi=None, progress: bool = False, use_numba: bool = True) -> dict:
    """Per-pixel statistics of `dataset` through `ctx` (LiberTEM's ``run_stddev``): run
    `StdDevUDF` and return its results as `consolidate_result` does.

    Parameters
    ----------
    ctx : ltdask.compat.Context
    dataset
        A dataset from ``ctx.load`` or ``ltdask.open_*``.
    roi : numpy.ndarray, optional
        Boolean, nav-shaped: the frames to take.
    progress : bool
        Show a progress bar.
    use_numba : bool
        Passed to `StdDevUDF`.

    Returns
    -------
    dict
        ``num_frames`` (int) and the signal-shaped ``sum``, ``varsum``, ``var``
        (population variance), ``std`` and ``mean`` (numpy arrays).

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> ctx = Context()
    >>> data = np.arange(16, dtype=np.float32).reshape(2, 2, 2, 2)
    >>> res = run_stddev(ctx, ctx.load("memory", data=data), roi=np.array([[1, 0], [0, 1]], bool))
    >>> res["num_frames"], res["mean"].tolist()
    (2, [[6.0, 7.0], [8.0, 9.0]])
    """
    udf = StdDevUDF(use_numba=use_numba)
    return consolidate_result(ctx.run_udf(dataset=dataset, udf=udf, roi=roi, progress=progress))


def _nan_where_zero(n: np.ndarray) -> np.ndarray:
    return np.where(n > 0, n, np.nan)
