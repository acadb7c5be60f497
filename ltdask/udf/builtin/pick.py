"""`PickUDF` (frames under a ROI) and `AutoUDF` / `map` (any per-frame function)."""

from __future__ import annotations

import numpy as np

from ltdask.udf.base import UDF
from ltdask.udf.paths import TilePaths


class PickUDF(UDF):
    """The frames inside the ROI, in flat nav order: result ``intensity`` of shape
    ``(n_selected, *sig)`` (kind ``"single"``), in the data's native dtype.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> data = np.arange(2 * 3 * 2 * 2).reshape(2, 3, 2, 2)
    >>> roi = np.zeros((2, 3), dtype=bool); roi[1, 2] = True
    >>> res = ltdask.udf.PickUDF().compute(ltdask.from_array(data), roi=roi)
    >>> res["intensity"].values.tolist()
    [[[20, 21], [22, 23]]]
    """

    TILE_PATHS = TilePaths(
        merge_all_on_numpy=True,
        # tiles of the data's integers are written to the float results exactly
        integer_tiles=True,
        # the corrections are applied to the picked frames as they are written: Pick does
        # not keep Sum, ApplyMasks, CoM ... of the same run from folding them
        folds_corrections=frozenset({"dark", "gain", "excluded"}),
    )

    def get_preferred_input_dtype(self):
        return self.USE_NATIVE_DTYPE

    def get_extra_dims(self):
        return {"intensity": ("pick", ...)}

    def get_result_buffers(self):
        roi = self.meta.roi
        count = int(np.prod(self.meta.dataset_shape.nav)) if roi is None else int(roi.sum())
        sig = tuple(self.meta.dataset_shape.sig)
        dtype = self.meta.input_dtype
        if self.meta.dataset_dtype == np.float16 and self.meta.corrections is None:
            dtype = self.meta.dataset_dtype  # read as float32 (numba has no float16): exact
        return {"intensity": self.buffer(kind="single", extra_shape=(count, *sig), dtype=dtype)}

    def process_tile(self, tile):
        at = self.meta.slice.origin[0]
        sig = self.meta.sig_slice.get()
        index = (slice(at, at + tile.shape[0]), *sig)
        folded = self.tile_form.folded_corrections
        dest = self.results.intensity[index]
        if folded is None:
            dest[...] = tile
        elif folded.apply(tile, dest.dtype, sig, out=dest) is not dest:
            # (the frames' pixels of the result are not contiguous: corrected in a copy)
            dest[...] = folded.apply(tile, dest.dtype, sig)

    def merge(self, dest, src):
        dest.intensity[:] += src.intensity

    def merge_all(self, ordered_results):
        pieces = [
            _frames_of(b.intensity, key.origin[0], key.shape[0])
            for key, b in ordered_results.items()
        ]
        return {"intensity": np.concatenate(pieces, axis=0)}


def _frames_of(buffer, start: int, count: int):
    """The frames ``start:start + count`` of a partition's `buffer` (numpy, or a dask array
    of one chunk) as a view: dask's slicing copies a slice much smaller than its chunk
    (the partition's own frames of a buffer of every picked frame), and the result is
    copied once more where the pieces are put together (a third of a corrected Pick's
    time went to the first copy)."""
    if isinstance(buffer, np.ndarray) or buffer.numblocks[0] != 1:
        return buffer[start : start + count]
    chunks = ((count,), *buffer.chunks[1:])
    return buffer.map_blocks(_view, start, count, chunks=chunks, dtype=buffer.dtype)


def _view(block: np.ndarray, start: int, count: int) -> np.ndarray:
    return block[start : start + count]


class AutoUDF(UDF):
    """Apply ``f(frame)`` to every frame: result ``result``, nav-shaped, with the shape and
    dtype of what `f` returns for a frame of ones (found once, on the main node).

    Parameters
    ----------
    f : callable
        ``f(frame) -> array-like``; small results work best.
    monitor : bool
        As LiberTEM 0.16: also give ``monitor`` (kind ``"single"``, the shape of one
        frame's result): the result of the last position processed in flat nav order, for
        live plots.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> ds = ltdask.from_array(np.ones((2, 3, 4, 4), dtype=np.float32))
    >>> res = ltdask.udf.AutoUDF(f=lambda frame: frame[0, :2]).compute(ds)
    >>> res["result"].dims, res["result"].shape
    (('scan_y', 'scan_x', 'result_0'), (2, 3, 2))
    """

    def __init__(self, f, monitor=False):
        super().__init__(f=f, monitor=monitor)

    def _probe(self):
        sig = tuple(self.meta.dataset_shape.sig)
        return np.asarray(self.params.f(np.ones(sig, dtype=self.meta.input_dtype)))

    def get_result_buffers(self):
        probe = self._probe()
        buffers = {"result": self.buffer(kind="nav", extra_shape=probe.shape, dtype=probe.dtype)}
        if self.params.monitor:
            buffers["monitor"] = self.buffer(
                kind="single", extra_shape=probe.shape, dtype=probe.dtype, use="result_only"
            )
        return buffers

    def process_frame(self, frame):
        self.results.result[:] = np.asarray(self.params.f(frame))

    def get_results(self):
        if not self.params.monitor:
            return {}
        result = self.results.result  # (flat, ROI-compressed)
        done = np.flatnonzero(self.meta.get_valid_nav_mask())
        if len(done) == 0:  # nothing processed yet: the start value
            return {"monitor": np.zeros(self._monitor_shape(result), dtype=result.dtype)}
        return {"monitor": result[int(done[-1])].reshape(self._monitor_shape(result))}

    @staticmethod
    def _monitor_shape(result) -> tuple[int, ...]:
        return tuple(result.shape[1:]) or (1,)


def map(dataset, f, roi=None):  # noqa: A001  (LiberTEM's name)
    """``f(frame)`` for every frame (inside `roi`), as an `xarray.DataArray` with a
    ``result_valid`` coordinate.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> ds = ltdask.from_array(np.ones((2, 3, 4, 4), dtype=np.float32))
    >>> ltdask.map(ds, lambda frame: frame.max()).values.tolist()
    [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    """
    return AutoUDF(f=f).compute(dataset, roi=roi)["result"]
