"""The `UDF` base class: LiberTEM 0.16's UDF interface, run as dask graphs."""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

from ltdask.exceptions import UDFError
from ltdask.io.dataset import flat_of
from ltdask.io.tiling import TILE_DEPTH_DEFAULT, TILE_MAX, TILE_SIZE_BEST_FIT
from ltdask.udf.buffers import BufferSpec, Namespace


class UDFMethod(enum.Enum):
    TILE = "tile"
    FRAME = "frame"
    PARTITION = "partition"


class AuxData:
    """Per-position (``kind="nav"``) or per-pixel (``kind="sig"``) data passed as a UDF
    parameter; the UDF sees the part that matches what it processes. Make it with
    :meth:`UDF.aux_data`."""

    def __init__(self, data, kind: str, extra_shape=(), dtype="float32"):
        self.spec = BufferSpec.make(kind, extra_shape, dtype)
        self.data = np.asarray(data, dtype=self.spec.dtype)

    def raw_data(self) -> np.ndarray:
        """The data as LiberTEM keeps it: flat, ``(n,)`` for no or a ``(1,)`` extra shape
        (frame views are then scalars), ``(n, *extra)`` otherwise: ``self.params.NAME``
        where no partition, frame or tile is being processed."""
        extra = self.spec.extra_shape
        return self.data.reshape((-1,) if extra in ((), (1,)) else (-1, *extra))

    def flat(self, dataset_shape) -> np.ndarray:
        """The data as a flat-nav (see :meth:`raw_data`) or ``(*sig, *extra)`` array."""
        extra = self.spec.extra_shape
        if self.spec.kind == "nav":
            return self.raw_data()
        if self.spec.kind == "sig":
            return self.data.reshape((*dataset_shape.sig, *extra))
        return self.data.reshape(extra or (1,))

    def __dask_tokenize__(self):
        from dask.base import tokenize

        return ("ltdask.AuxData", self.spec, tokenize(self.data))


def raw_params(kwargs: dict) -> Namespace:
    """``self.params`` outside partitions: aux data as arrays (see `AuxData.raw_data`); the
    wrappers stay in ``_kwargs``."""
    return Namespace({k: v.raw_data() if isinstance(v, AuxData) else v for k, v in kwargs.items()})


class MaskedResult:
    """A result array with its own valid mask (see :meth:`UDF.with_mask`)."""

    def __init__(self, data, mask):
        self.data = data
        self.mask = mask


class UDF:
    """Base class of user-defined functions, source-compatible with LiberTEM 0.16 UDFs.

    Subclasses declare result buffers in :meth:`get_result_buffers` and implement at least
    one of ``process_tile(tile)``, ``process_frame(frame)`` or
    ``process_partition(partition)``. Keyword arguments given to the constructor are
    available as ``self.params``; the constructor runs again (with the same keyword
    arguments) for every partition, wherever that partition is processed.

    ltdask extension: a tile UDF may also define ``process_flat_tile(frames, p0, p1)``.
    The runner then calls it instead of ``process_tile`` with the tile as
    ``frames[:, p0:p1]``, where ``frames`` is a C-contiguous ``(n, pixels)`` array: for
    tiles of whole rows a view of the files' frames, otherwise a copy of the tile
    flattened (``p0 = 0``). Pixel ``p0 + k`` is pixel ``k`` of the tile's signal slice
    (``self.meta.sig_slice``) in C order: numba kernels looping from ``p0`` to ``p1`` over
    such rows never see strided arrays, and never copies of views of the files.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> class MaxUDF(ltdask.UDF):
    ...     def get_result_buffers(self):
    ...         return {"maximum": self.buffer(kind="nav", dtype="float32")}
    ...     def process_frame(self, frame):
    ...         self.results.maximum[:] = frame.max()
    >>> data = np.arange(2 * 3 * 4 * 4, dtype=np.float32).reshape(2, 3, 4, 4)
    >>> res = MaxUDF().compute(ltdask.from_array(data))
    >>> res["maximum"].values.tolist()
    [[15.0, 31.0, 47.0], [63.0, 79.0, 95.0]]
    """

    UDF_METHOD = UDFMethod
    #: ltdask extension: set to True when ``merge_all`` works on numpy arrays as well as
    #: dask arrays; ltdask then runs it in one task on small partial results.
    MERGE_ALL_ON_NUMPY = False
    USE_NATIVE_DTYPE = bool
    TILE_SIZE_BEST_FIT = TILE_SIZE_BEST_FIT
    TILE_SIZE_MAX = TILE_MAX
    TILE_DEPTH_DEFAULT = TILE_DEPTH_DEFAULT
    TILE_DEPTH_MAX = TILE_MAX

    BACKEND_NUMPY = "numpy"
    BACKEND_CUPY = "cupy"
    BACKEND_CUDA = "cuda"
    BACKEND_SPARSE_COO = "sparse.COO"
    BACKEND_SPARSE_GCXS = "sparse.GCXS"
    BACKEND_SPARSE_DOK = "sparse.DOK"
    BACKEND_SCIPY_COO = "scipy.sparse.coo_matrix"
    BACKEND_SCIPY_CSR = "scipy.sparse.csr_matrix"
    BACKEND_SCIPY_CSC = "scipy.sparse.csc_matrix"
    BACKEND_CUPY_SCIPY_COO = "cupyx.scipy.sparse.coo_matrix"
    BACKEND_CUPY_SCIPY_CSR = "cupyx.scipy.sparse.csr_matrix"
    BACKEND_CUPY_SCIPY_CSC = "cupyx.scipy.sparse.csc_matrix"
    BACKEND_ALL = (
        BACKEND_SCIPY_CSR,
        BACKEND_SCIPY_CSC,
        BACKEND_SCIPY_COO,
        BACKEND_CUPY,
        BACKEND_NUMPY,
        BACKEND_SPARSE_COO,
        BACKEND_SPARSE_GCXS,
    )
    CPU_BACKENDS = frozenset(
        {
            BACKEND_NUMPY,
            BACKEND_SPARSE_COO,
            BACKEND_SPARSE_GCXS,
            BACKEND_SPARSE_DOK,
            BACKEND_SCIPY_COO,
            BACKEND_SCIPY_CSR,
            BACKEND_SCIPY_CSC,
        }
    )
    CUDA_BACKENDS = frozenset(
        {
            BACKEND_CUPY,
            BACKEND_CUDA,
            BACKEND_CUPY_SCIPY_COO,
            BACKEND_CUPY_SCIPY_CSR,
            BACKEND_CUPY_SCIPY_CSC,
        }
    )
    CUPY_BACKENDS = frozenset(
        {BACKEND_CUPY, BACKEND_CUPY_SCIPY_COO, BACKEND_CUPY_SCIPY_CSR, BACKEND_CUPY_SCIPY_CSC}
    )
    DENSE_BACKENDS = frozenset({BACKEND_NUMPY, BACKEND_CUPY, BACKEND_CUDA})
    SPARSE_BACKENDS = frozenset(CPU_BACKENDS | CUDA_BACKENDS) - DENSE_BACKENDS
    D2_BACKENDS = frozenset(
        {
            BACKEND_SCIPY_COO,
            BACKEND_SCIPY_CSR,
            BACKEND_SCIPY_CSC,
            BACKEND_CUPY_SCIPY_COO,
            BACKEND_CUPY_SCIPY_CSR,
            BACKEND_CUPY_SCIPY_CSC,
        }
    )
    ND_BACKENDS = frozenset(CPU_BACKENDS | CUDA_BACKENDS) - D2_BACKENDS

    def __init__(self, **kwargs: Any):
        self._kwargs = kwargs
        self.params = raw_params(kwargs)
        self.meta = None
        self.results = None
        self.task_data = None

    def __getstate__(self):
        # what a run binds to an instance is rebuilt where it runs: tasks stay small
        state = self.__dict__.copy()
        state.update(meta=None, results=None, task_data=None)
        return state

    def copy(self) -> UDF:
        """A new instance made from the keywords given to ``UDF.__init__`` (ltdask, like
        LiberTEM, makes one per partition and per merge)."""
        try:
            return type(self)(**self._kwargs)
        except TypeError as e:
            name = type(self).__name__
            raise UDFError(
                f"{name} cannot be made again from its parameters: {name}(**{self._kwargs!r}) "
                f"raised {e}. ltdask makes a new instance per partition from the keywords "
                f"passed to UDF.__init__: pass every parameter as a keyword named as in "
                f"{name}.__init__, e.g. super().__init__(threshold=threshold)"
            ) from None

    # -- declarations ------------------------------------------------------------------
    def get_result_buffers(self) -> dict[str, BufferSpec]:
        """The result buffers: ``{name: self.buffer(...)}``."""
        raise NotImplementedError(f"{type(self).__name__} must implement get_result_buffers")

    def buffer(self, kind, extra_shape=(), dtype="float32", where=None, use=None) -> BufferSpec:
        """Declare a result buffer (use in :meth:`get_result_buffers`).

        Parameters
        ----------
        kind : {"nav", "sig", "single"}
        extra_shape : tuple of int
            Shape added after the nav or sig dims (or the whole shape for ``"single"``).
        dtype
            The buffer's dtype.
        where : None or "device"
        use : None, "private" or "result_only"
            ``"private"``: an intermediate, not part of the results; ``"result_only"``:
            computed only in :meth:`get_results`.
        """
        return BufferSpec.make(kind, extra_shape, dtype, where, use)

    @classmethod
    def aux_data(cls, data, kind, extra_shape=(), dtype="float32") -> AuxData:
        """Wrap per-position or per-pixel data passed as a parameter (see `AuxData`)."""
        return AuxData(data, kind, extra_shape, dtype)

    def get_method(self) -> UDFMethod:
        """How this UDF consumes data: tile before frame before partition."""
        for method in (UDFMethod.TILE, UDFMethod.FRAME, UDFMethod.PARTITION):
            if hasattr(self, f"process_{method.value}"):
                return method
        raise TypeError(
            f"{type(self).__name__} implements none of process_tile, process_frame, "
            "process_partition"
        )

    def get_task_data(self) -> dict:
        """Per-partition data, available as ``self.task_data`` (runs in the task)."""
        return {}

    def get_preferred_input_dtype(self):
        """The dtype tiles should have, combined with the data's by ``numpy.result_type``."""
        return np.float32

    def get_tiling_preferences(self) -> dict:
        """``{"depth": ..., "total_size": ...}`` for the tiling negotiation."""
        return {"depth": self.TILE_DEPTH_DEFAULT, "total_size": self.TILE_SIZE_MAX}

    def get_backends(self):
        return (self.BACKEND_NUMPY,)

    @property
    def xp(self):
        return np

    def forbuf(self, arr, target):
        """`arr` in a form that can be assigned to the buffer view `target`."""
        arr = np.asarray(arr.todense() if hasattr(arr, "todense") else arr)
        return arr.reshape(target.shape) if arr.size == np.size(target) else arr

    def with_mask(self, data, mask) -> MaskedResult:
        """Return `data` from :meth:`get_results` with a custom valid mask."""
        return MaskedResult(data, mask)

    # -- merging and results -------------------------------------------------------------
    def merge(self, dest, src):
        """Merge a partial result `src` into `dest` (default: copy nav buffers).

        As in LiberTEM: `dest` holds the dataset-sized buffers, zero-filled and then set up
        by ``preprocess`` (run once on them), its nav buffers cut to `src`'s partition;
        partitions are merged one after the other in flat nav order, each once; partitions
        without frames in the ROI are not merged. ``self.meta.get_valid_nav_mask()`` marks
        the positions merged before. Without ``merge_all``, UDFs with only nav buffers are
        not merged at all: each partition's nav buffers are its part of the result.
        """
        for name in src:
            dest_arr = getattr(dest, name)
            src_arr = getattr(src, name)
            if not np.can_cast(src_arr.dtype, dest_arr.dtype, casting="safe"):
                raise TypeError(
                    f"{type(self).__name__}: cannot merge buffer {name!r} of dtype "
                    f"{src_arr.dtype} into {dest_arr.dtype}"
                )
            dest_arr[...] = src_arr

    def get_results(self) -> dict:
        """Results computed from the merged buffers; names not returned pass through."""
        return {}

    def cleanup(self):
        pass

    # -- running ---------------------------------------------------------------------------
    def lazy(self, dataset, roi=None, corrections=None):
        """The results as a lazy `xarray.Dataset` (see :func:`ltdask.lazy`)."""
        from ltdask.udf.api import lazy

        return lazy(dataset, [self], roi=roi, corrections=corrections)[0]

    def compute(self, dataset, roi=None, progress: bool = False, corrections=None):
        """Run on `dataset` and return the results as an `xarray.Dataset`."""
        from ltdask.udf.api import compute

        return compute(dataset, [self], roi=roi, progress=progress, corrections=corrections)[0]

    def iter(self, dataset, roi=None, corrections=None):
        """Partial results as partitions finish (see :func:`ltdask.iter`)."""
        from ltdask.udf.api import iter_results

        for partials in iter_results(dataset, [self], roi=roi, corrections=corrections):
            yield partials[0]

    def __dask_tokenize__(self):
        from dask.base import normalize_token

        return (
            type(self).__module__,
            type(self).__qualname__,
            normalize_token(sorted(self._kwargs.items(), key=lambda kv: kv[0])),
        )

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._kwargs.items())
        return f"{type(self).__name__}({args})"


class FlatTileUDF(UDF):
    """A tile UDF written for flat tiles alone: ``process_tile`` (for LiberTEM-style
    callers) hands the tile to ``process_flat_tile``, copied where it is not contiguous."""

    def process_tile(self, tile):
        self.process_flat_tile(*flat_of(tile, copy=True))


def overrides(udf: UDF, name: str) -> bool:
    """Whether `udf`'s class defines `name` itself rather than inheriting UDF's."""
    return getattr(type(udf), name, None) is not getattr(UDF, name, None)
