"""`ApplyMasksUDF`: virtual detectors, the dot product of each frame with a mask stack."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ltdask.udf.base import FlatTileUDF
from ltdask.udf.builtin.mask_container import _CONTAINERS, MaskContainer, _dense
from ltdask.udf.builtin.mask_container import _runs as _runs  # (tests import it from here)
from ltdask.udf.builtin.sums import SUM_BACKENDS, csr_parts, dense_backend
from ltdask.udf.paths import TilePaths

__all__ = ["ApplyMasksUDF", "MaskContainer"]


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

    TILE_PATHS = TilePaths(
        # 8/16-bit tiles as the file's integers: the kernels convert them to the product's
        # dtype
        integer_tiles=True,
        # the corrections are folded into the masks: m . corrected(x) = (A^T m) . x - offset
        # (`ltdask.corrections.LinearCorrection`), uncorrected tiles
        folds_corrections=frozenset({"dark", "gain", "excluded"}),
    )

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
        folded = self.tile_form.folded_corrections
        return _CONTAINERS.get(self.meta.run_id, p.mask_factories, args, folded)

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
        folded = self.tile_form.folded_corrections
        if folded is not None:  # (shifted masks: the frame corrected, not the masks)
            frame = folded.apply(frame[np.newaxis], self.meta.input_dtype)[0]
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
