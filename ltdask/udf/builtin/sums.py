"""`SumUDF` (sum of frames) and `SumSigUDF` (sum of each frame)."""

from __future__ import annotations

import numpy as np

from ltdask.kernels.repaired import weighted_rows
from ltdask.kernels.sparse import csr_col_sums, csr_row_sums
from ltdask.kernels.statistics import add_rows, sum_frames, sum_pixels
from ltdask.runtime import scratch
from ltdask.udf.base import FlatTileUDF
from ltdask.udf.interface import UDFBase
from ltdask.udf.paths import TilePaths
from ltdask.udf.shared import IntegerMoments, moved_moments, tile_pixel_weights

#: what the sums process: numpy first (the numba kernels), sparse tiles as they are read
#: (a raw CSR scan is never densified), CuPy arrays on a GPU
SUM_BACKENDS = (
    UDFBase.BACKEND_NUMPY,
    UDFBase.BACKEND_SCIPY_CSR,
    UDFBase.BACKEND_SCIPY_CSC,
    UDFBase.BACKEND_SCIPY_COO,
    UDFBase.BACKEND_SPARSE_COO,
    UDFBase.BACKEND_SPARSE_GCXS,
    UDFBase.BACKEND_CUPY,
)


def dense_backend(udf: UDFBase) -> bool:
    """Whether `udf` gets numpy tiles in this partition (the flat-tile kernels)."""
    return udf.meta.array_backend in (UDFBase.BACKEND_NUMPY, UDFBase.BACKEND_CUDA)


def csr_parts(tile, summed: bool = False):
    """``(indptr, indices, data)`` of a scipy sparse tile (CSR; CSC and COO converted) for
    the numba kernels; None for other array types. `summed`: with the values of duplicate
    column indices in a row added up (scipy's meaning of them), for kernels that need one
    value per pixel and frame; sums and products add them up anyway. Tiles that say they
    are canonical (raw_csr's do when their rows are) cost no check."""
    if not type(tile).__module__.startswith("scipy.sparse"):
        return None
    if tile.format != "csr":
        tile = tile.tocsr()
    if summed and not tile.has_canonical_format:
        tile = tile.copy()  # (the caller's tile stays as it is)
        tile.sum_duplicates()
    return tile.indptr, tile.indices, tile.data


def add_sums(udf: UDFBase, tile, axis: int, out: np.ndarray) -> None:
    """``out += `` the sums of a sparse or CuPy tile, as ``(frames, pixels)``, over `axis`
    (0: per pixel, 1: per frame), accumulated in `out`'s dtype."""
    parts = csr_parts(tile)
    if parts is None:
        rows = tile.reshape((tile.shape[0], -1)) if tile.ndim != 2 else tile
        sums = udf.forbuf(rows.sum(axis=axis, dtype=out.dtype), np.empty(0))
        out += np.asarray(sums).reshape(-1)
    elif axis == 0:
        csr_col_sums(parts[0], parts[1], parts[2], out)
    else:
        csr_row_sums(parts[0], parts[2], out)


def _accumulator_dtype(dtype) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return np.dtype(np.complex128)
    if dtype.kind == "f":
        return np.dtype(np.float64)
    if dtype.kind == "u":
        return np.dtype(np.uint64)
    return np.dtype(np.int64) if dtype.kind in "ib" else dtype


def _sum_buffer_dtype(input_dtype) -> np.dtype:
    """Integer sums are kept in 64 bits and narrowed to the input dtype at the end."""
    input_dtype = np.dtype(input_dtype)
    return _accumulator_dtype(input_dtype) if input_dtype.kind in "iub" else input_dtype


def narrow_sum(total: np.ndarray, dtype) -> np.ndarray:
    """`total` as `dtype`, or an `OverflowError` naming a dtype that holds it."""
    dtype = np.dtype(dtype)
    if total.dtype == dtype:
        return total
    out = total.astype(dtype)
    if total.size and not np.array_equal(out, total):
        low, high = total.min(), total.max()
        kinds = "u" if dtype.kind == "u" and low >= 0 else "i"
        fits = next(
            (
                np.dtype(f"{kinds}{n}")
                for n in (2, 4, 8)
                if np.iinfo(f"{kinds}{n}").min <= low and high <= np.iinfo(f"{kinds}{n}").max
            ),
            np.dtype("float64"),
        )
        raise OverflowError(
            f"SumUDF: the sums (from {low} to {high}) do not fit the result dtype {dtype.name}; "
            f"use SumUDF(dtype={fits.name!r})"
        )
    return out


class SumUDF(FlatTileUDF):
    """Sum of all frames (inside the ROI): result ``intensity``, signal-shaped.

    Parameters
    ----------
    dtype
        Preferred input dtype (combined with the data's by ``numpy.result_type``); the
        result has the input dtype. Integer sums are accumulated in 64 bits; an
        ``OverflowError`` names a dtype that holds them if the result does not fit.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> data = np.ones((2, 3, 4, 5), dtype=np.uint16)
    >>> ltdask.udf.SumUDF().compute(ltdask.from_array(data))["intensity"].shape
    (4, 5)
    """

    TILE_PATHS = TilePaths(
        merge_all_on_numpy=True,
        # with StdDevUDF in the same run, the sums come from the shared moments pass
        shared_stats=frozenset({"pixel_sums"}),
        # 8/16-bit data is summed from its own integers (exactly), not from float copies
        integer_tiles=True,
        # the corrections are applied to the sums, not to every tile: the sum of corrected
        # frames is A (sum - n * dark), excluded pixels repaired in the sums
        folds_corrections=frozenset({"dark", "gain", "excluded"}),
        # frames stored with their pixels moved are summed as stored, the sums moved once
        folds_layout=True,
        # run alone on packed pixels, it takes each tile's sums from the decoder, which
        # adds the pixels up as it unpacks them (`process_tile_sums`): no tile is made
        sums_from_decoder=True,
    )

    def __init__(self, dtype="float32"):
        super().__init__(dtype=dtype)

    def get_preferred_input_dtype(self):
        return self.params.dtype

    def get_backends(self):
        return SUM_BACKENDS

    def get_result_buffers(self):
        return {
            "intensity": self.buffer(kind="sig", dtype=_sum_buffer_dtype(self.meta.input_dtype))
        }

    def get_task_data(self):
        # one accumulator per signal slice of the tiling scheme; float sums of a partition's
        # frames stay in the input dtype (as numpy sums them), integer sums in 64 bits
        return {"acc": {}, "moments": {}, "frames": {}}

    def _acc(self, px: int, dtype) -> np.ndarray:
        accs = self.task_data.acc
        acc = accs.get(self.meta.tiling_scheme_idx)
        if acc is None:
            small_uint = np.dtype(dtype).kind == "u" and np.dtype(dtype).itemsize <= 2
            # (8/16-bit unsigned tiles: int64 sums, no mixed signed/unsigned arithmetic)
            acc_dtype = np.dtype(np.int64) if small_uint else _sum_buffer_dtype(dtype)
            if np.dtype(dtype).kind == "f" and self.tile_form.folded_corrections is not None:
                # (uncorrected float sums less n * dark: in float32 the difference would
                # keep float32's error of the larger uncorrected sum)
                acc_dtype = np.dtype(np.float64)
            # (task scratch: postprocess adds it to the results)
            acc = accs[self.meta.tiling_scheme_idx] = scratch.zeros(px, acc_dtype)
        return acc

    def _count(self, n: int) -> None:
        counts = self.task_data.frames
        idx = self.meta.tiling_scheme_idx
        counts[idx] = counts.get(idx, 0) + n

    def process_flat_tile(self, frames, p0, p1):
        sum_frames(frames, p0, p1, self._acc(p1 - p0, frames.dtype))
        self._count(frames.shape[0])

    def process_tile(self, tile):
        if dense_backend(self):
            return super().process_tile(tile)
        add_sums(self, tile, 0, self._acc(int(np.prod(tile.shape[1:])), tile.dtype))

    def process_tile_sums(self, sums: np.ndarray, n: int, dtype) -> None:
        """The per-pixel `sums` of the current tile's `n` frames of integers of `dtype`
        (``sums_from_decoder``), in place of the tile."""
        acc = self._acc(sums.size, dtype)
        acc += sums
        self._count(n)

    def process_shared_stats(self, stats):
        self.task_data.moments[self.meta.tiling_scheme_idx] = stats.moments

    def postprocess(self):
        scheme = self.meta.tiling_scheme
        out = self.results.intensity
        folded = self.tile_form.folded_corrections
        sums = dict(self.task_data.acc)
        frames = dict(self.task_data.frames)
        moments = {}
        for idx, state in self.task_data.moments.items():
            if isinstance(state, IntegerMoments):  # (exact int64 sums of a shared pass)
                frames[idx] = state.finished()[0]
                sums[idx] = state.pixel_sums
            else:
                moments[idx] = state
        layout = self.tile_form.pixel_layout
        if layout is not None:  # (sums of the raw frames: moved to the image's pixels)
            sums = {idx: layout.gather(acc) for idx, acc in sums.items()}
            moments = {idx: moved_moments(layout, state) for idx, state in moments.items()}
        if folded is not None:
            # (in float64, from the exact integer sums: rounded once; the repair of the
            # excluded pixels is linear, so it repairs the sums)
            for idx, acc in sums.items():
                index = scheme[idx].get()
                total = scratch.zeros(acc.size)
                folded.add_folded_sums(total, acc, frames[idx], index)
                folded.linear(index).repair(total)
                view = out[index]
                np.add(view, total.reshape(view.shape), out=view, casting="unsafe")
            sums = {}
        for idx, (count, mean, _, _) in moments.items():
            # (the state is shared: StdDevUDF reads it too; the product in task scratch)
            total = scratch.empty(mean.size, mean.dtype)
            if folded is None:
                sums[idx] = np.multiply(mean, count, out=total)
                continue
            folded.fold_moments(mean, None, count, total, None, scheme[idx].get())
            folded.linear(scheme[idx].get()).repair(total)  # (linear: repairs the sums)
            sums[idx] = total
        for idx, acc in sums.items():
            view = out[scheme[idx].get()]
            if view.ndim == 2 and acc.flags.c_contiguous:
                add_rows(view, acc.reshape(-1))
            else:
                np.add(view, acc.reshape(view.shape), out=view, casting="unsafe")

    def merge(self, dest, src):
        dest.intensity[:] += src.intensity

    def merge_all(self, ordered_results):
        parts = [b.intensity for b in ordered_results.values()]
        if all(isinstance(p, np.ndarray) for p in parts):
            # numpy partials (merged in one task): add in place, no stacked copy
            total = parts[0].copy()
            for p in parts[1:]:
                total += p
            return {"intensity": total}
        return {"intensity": np.stack(parts).sum(axis=0)}

    def get_results(self):
        total, dtype = self.results.intensity, np.dtype(self.meta.input_dtype)
        if total.dtype == dtype:
            return {"intensity": total}
        if isinstance(total, np.ndarray):
            return {"intensity": narrow_sum(total, dtype)}
        return {"intensity": total.map_blocks(narrow_sum, dtype, dtype=dtype)}


class SumSigUDF(FlatTileUDF):
    """Sum over the signal of each frame: result ``intensity``, nav-shaped.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> data = np.ones((2, 3, 4, 5), dtype=np.float32)
    >>> ltdask.udf.SumSigUDF().compute(ltdask.from_array(data))["intensity"].values[0, 0]
    np.float32(20.0)
    """

    TILE_PATHS = TilePaths(
        # with StdDevUDF in the same run, the frame sums come from the shared moments pass
        shared_stats=frozenset({"frame_sums"}),
        # 8/16-bit data is summed from its own integers (exactly), not from float copies
        integer_tiles=True,
        # the corrections are applied to each frame's sum, not to every pixel of the
        # tile: a dark frame alone takes its sum off; a gain map or excluded pixels make it
        # a weighted sum of the uncorrected pixels (``pixel_weights``)
        folds_corrections=frozenset({"dark", "gain", "excluded"}),
        # frames stored with their pixels moved are summed as stored (each raw pixel
        # counted as the image pixels it stands for)
        folds_layout=True,
    )

    def get_backends(self):
        return SUM_BACKENDS

    def get_result_buffers(self):
        dtype = np.result_type(self.meta.input_dtype, np.float32)
        return {"intensity": self.buffer(kind="nav", dtype=dtype)}

    def get_task_data(self):
        return {"weights": {}}

    def process_shared_stats(self, stats):
        out = self.results.intensity
        sums = stats.frame_sums if stats.corrected else self._folded(stats.frame_sums)
        out += sums.astype(out.dtype, copy=False)

    def _folded(self, sums: np.ndarray) -> np.ndarray:
        """`sums` of the current tile's uncorrected frames over its signal slice, less the
        dark frame's sum over the slice where the run folds it (float64)."""
        layout = self.tile_form.pixel_layout
        if layout is not None and layout.multiplicity != 1:
            sums = sums * layout.multiplicity
        folded = self.tile_form.folded_corrections
        if folded is None:
            return sums
        return sums - folded.dark_total(self.meta.sig_slice.get())

    def _weights(self, px: int) -> tuple[np.ndarray, float] | None:
        """``(weights, offset)`` of the current signal slice where the folded corrections
        weight the pixels (`tile_pixel_weights`), else None. The weights in the products'
        dtype: float32 for float32 runs, as the shared pass takes them (float64 products
        took a uint16 tile 1.3x as long as its plain sums; float32 ones as long)."""
        cache, idx = self.task_data.weights, self.meta.tiling_scheme_idx
        if idx not in cache:
            weighted = tile_pixel_weights(self, px)
            if weighted is not None:
                dtype = np.result_type(self.meta.input_dtype, np.float32)
                weighted = (weighted[0].astype(dtype), weighted[1])
            cache[idx] = weighted
        return cache[idx]

    def process_tile(self, tile):
        if dense_backend(self):
            return super().process_tile(tile)
        out = self.results.intensity
        sums = np.zeros(tile.shape[0], _accumulator_dtype(tile.dtype))
        add_sums(self, tile, 1, sums)
        out += sums.astype(out.dtype, copy=False)

    def process_flat_tile(self, frames, p0, p1):
        out = self.results.intensity
        weighted = self._weights(p1 - p0)
        if weighted is not None:
            weights, offset = weighted
            sums = np.zeros(frames.shape[0])
            weighted_rows(frames, 0, frames.shape[0], p0, p1, weights, sums)
            out += (sums - offset).astype(out.dtype, copy=False)
            return
        acc_dtype = _accumulator_dtype(frames.dtype)
        layout = self.tile_form.pixel_layout
        moved = layout is not None and layout.multiplicity != 1
        if out.dtype == acc_dtype and self.tile_form.folded_corrections is None and not moved:
            sum_pixels(frames, p0, p1, out)
            return
        sums = np.zeros(frames.shape[0], acc_dtype)
        sum_pixels(frames, p0, p1, sums)
        out += self._folded(sums).astype(out.dtype, copy=False)
