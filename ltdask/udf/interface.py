"""The UDF interface: LiberTEM 0.16's `UDFBase`, what a UDF declares and the engine calls.

`UDFBase` holds everything the engine needs from a UDF (declarations, the methods it
calls, the constants of LiberTEM's interface); the engine's modules import only this.
`ltdask.UDF` (:mod:`ltdask.udf.base`) adds the methods that run a UDF on a dataset.
"""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

from ltdask.exceptions import UDFError
from ltdask.io.tiling import TILE_DEPTH_DEFAULT, TILE_MAX, TILE_SIZE_BEST_FIT
from ltdask.udf.buffers import BufferSpec, Namespace
from ltdask.udf.paths.declared import DECODED, TileForm, TilePaths


class UDFMethod(enum.Enum):
    """How a UDF consumes data (:meth:`UDFBase.get_method`): the first of
    ``process_tile``, ``process_frame`` and ``process_partition`` it defines.

    Examples
    --------
    >>> import ltdask
    >>> ltdask.udf.SumUDF().get_method()
    <UDFMethod.TILE: 'tile'>
    >>> ltdask.udf.AutoUDF(f=sum).get_method().value
    'frame'
    """

    TILE = "tile"
    FRAME = "frame"
    PARTITION = "partition"


class AuxData:
    """Per-position (``kind="nav"``) or per-pixel (``kind="sig"``) data passed as a UDF
    parameter; the UDF sees the part that matches what it processes. Make it with
    :meth:`UDF.aux_data`.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> class WeightedSumUDF(ltdask.UDF):
    ...     def get_result_buffers(self):
    ...         return {"total": self.buffer(kind="nav", dtype="float32")}
    ...     def process_frame(self, frame):  # this frame's weight, a scalar
    ...         self.results.total[:] = frame.sum() * self.params.weight
    >>> ds = ltdask.from_array(np.ones((2, 3, 4, 4), dtype=np.float32))
    >>> weight = WeightedSumUDF.aux_data(np.arange(6).reshape(2, 3), kind="nav")
    >>> WeightedSumUDF(weight=weight).compute(ds)["total"].values.tolist()
    [[0.0, 16.0, 32.0], [48.0, 64.0, 80.0]]
    """

    def __init__(self, data, kind: str, extra_shape=(), dtype="float32"):
        self.spec = BufferSpec.make(kind, extra_shape, dtype)
        self.data = np.asarray(data, dtype=self.spec.dtype)

    @property
    def raw_data(self) -> np.ndarray:
        """The data as LiberTEM keeps it (a property, as LiberTEM's): flat, ``(n,)`` for
        no or a ``(1,)`` extra shape (frame views are then scalars), ``(n, *extra)``
        otherwise: ``self.params.NAME`` where no partition, frame or tile is being
        processed."""
        extra = self.spec.extra_shape
        return self.data.reshape((-1,) if extra in ((), (1,)) else (-1, *extra))

    def flat(self, dataset_shape) -> np.ndarray:
        """The data as a flat-nav (see `raw_data`) or ``(*sig, *extra)`` array."""
        extra = self.spec.extra_shape
        if self.spec.kind == "nav":
            return self.raw_data
        if self.spec.kind == "sig":
            return self.data.reshape((*dataset_shape.sig, *extra))
        return self.data.reshape(extra or (1,))

    def __dask_tokenize__(self):
        from dask.base import tokenize

        return ("ltdask.AuxData", self.spec, tokenize(self.data))


def raw_params(kwargs: dict) -> Namespace:
    """``self.params`` outside partitions: aux data as arrays (see `AuxData.raw_data`); the
    wrappers stay in ``_kwargs``."""
    return Namespace({k: v.raw_data if isinstance(v, AuxData) else v for k, v in kwargs.items()})


class MaskedResult:
    """A result array with its own valid mask (see :meth:`UDF.with_mask`)."""

    def __init__(self, data, mask):
        self.data = data
        self.mask = mask


class UDFBase:
    """What a UDF declares and the engine calls: LiberTEM's UDF interface without the
    methods that run it (subclass `ltdask.UDF`, which has them).

    The engine accepts instances of any subclass; see `ltdask.UDF` for the interface.
    """

    UDF_METHOD = UDFMethod
    #: ltdask extension: what the class can take besides decoded float tiles (integer
    #: tiles, folded corrections, ...; see `ltdask.udf.TilePaths`): nothing by default
    TILE_PATHS = TilePaths()
    #: what the run hands the UDF with its tiles (see `ltdask.udf.paths.TileForm`): set
    #: where it runs, from the route the run takes; tiles as decoded unless the class
    #: declares `TILE_PATHS`
    tile_form: TileForm = DECODED
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
        self.meta: Any = None
        self.results: Any = None
        self.task_data: Any = None

    def __getstate__(self):
        # what a run binds to an instance is rebuilt where it runs: tasks stay small
        state = self.__dict__.copy()
        state.update(meta=None, results=None, task_data=None)
        state.pop("tile_form", None)
        return state

    def copy(self, **changes: Any) -> UDFBase:
        """A new instance made from the keywords given to ``UDF.__init__`` (ltdask, like
        LiberTEM, makes one per partition and per merge), `changes` replacing some of them.

        The one place an instance is made again from its parameters: the engine binds the
        copies to a run with :func:`ltdask.udf.bind.bind`.
        """
        kwargs = {**self._kwargs, **changes}
        try:
            return type(self)(**kwargs)
        except TypeError as e:
            name = type(self).__name__
            raise UDFError(
                f"{name} cannot be made again from its parameters: {name}(**{kwargs!r}) "
                f"raised {e}. ltdask makes a new instance per partition from the keywords "
                f"passed to UDF.__init__: pass every parameter as a keyword named as in "
                f"{name}.__init__, e.g. super().__init__(threshold=threshold)"
            ) from None

    def set_meta(self, meta) -> None:
        """Give the UDF its ``self.meta`` (a `ltdask.udf.meta.UDFMeta`) outside a run, as
        LiberTEM's ``UDF.set_meta``; a run binds its own."""
        self.meta = meta

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
        """The array types this UDF processes, in order of preference (``BACKEND_*``
        names; default numpy only). The run gives each UDF one of them, see
        ``self.meta.array_backend``: 2-D backends (``D2_BACKENDS``) get tiles of shape
        ``(frames, pixels)`` and frames with a nav dim of 1."""
        return (self.BACKEND_NUMPY,)

    @property
    def xp(self):
        """The array module of this partition's backend: numpy, or cupy for CuPy
        backends."""
        meta = self.meta
        if meta is not None and getattr(meta, "array_backend", None) in self.CUPY_BACKENDS:
            import cupy

            return cupy
        return np

    def forbuf(self, arr, target):
        """`arr` (any backend's array) in a form that can be assigned to the buffer view
        `target`: the buffer's array type (numpy, or cupy for device buffers), reshaped
        from 2-D backends' ``(n, pixels)`` where the sizes match."""
        from sparseconverter import for_backend, get_backend

        backend = get_backend(target) or self.BACKEND_NUMPY
        if backend == "numpy.matrix":
            backend = self.BACKEND_NUMPY
        out = for_backend(arr, backend) if get_backend(arr) != backend else arr
        if backend == self.BACKEND_NUMPY:
            out = np.asarray(out)
        if tuple(out.shape) != tuple(np.shape(target)) and out.size == np.size(target):
            out = out.reshape(np.shape(target))
        return out

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

    def get_extra_dims(self) -> dict[str, tuple]:
        """Names of the dims a result buffer has besides its nav or signal dims (those of
        its ``extra_shape``), by buffer name, e.g. ``{"intensity": ("mask",)}``; ``...``
        stands for the dataset's signal dims. Unnamed ones are ``NAME_0``, ``NAME_1``, ...
        (an ltdask addition: LiberTEM's results have no dim names)."""
        return {}

    def get_extra_coords(self) -> dict[str, Any]:
        """Coordinates of the dims named by :meth:`get_extra_dims`, by dim name, e.g.
        ``{"yx": ["y", "x"]}``."""
        return {}

    def get_results(self) -> dict:
        """Results computed from the merged buffers; names not returned pass through.

        ``self.results`` holds the merged buffers as dask arrays (``get_buffer(name)`` as
        LiberTEM's buffers show them); what needs whole arrays at once in numpy goes
        through :func:`ltdask.udf.apply_whole`.
        """
        return {}

    def get_result_attrs(self) -> dict[str, dict]:
        """ltdask extension: attributes of result variables, by result name, such as
        ``{"units": "mrad"}`` (called after :meth:`get_results`, with ``self.meta`` set)."""
        return {}

    def cleanup(self):
        pass

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


def overrides(udf: UDFBase, name: str) -> bool:
    """Whether `udf`'s class defines `name` itself rather than inheriting UDF's."""
    return getattr(type(udf), name, None) is not getattr(UDFBase, name, None)
