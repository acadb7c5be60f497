"""Result buffer declarations (`BufferSpec`) and the arrays behind them.

A buffer has a ``kind``: ``"nav"`` (one value, or an ``extra_shape`` array, per scan
position), ``"sig"`` (per detector pixel) or ``"single"`` (one array for the whole run).
In a partition task nav buffers are ROI-compressed and partition sized (see
:mod:`ltdask.udf.roi`); they are merged in the graph (:mod:`ltdask.udf.merge`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ltdask.exceptions import UDFError, UseDiscouragedWarning, warn

KINDS = ("nav", "sig", "single")
USES = (None, "private", "result_only")


@dataclass(frozen=True)
class BufferSpec:
    """What ``UDF.buffer(...)`` declares."""

    kind: str
    extra_shape: tuple[int, ...] = ()
    dtype: np.dtype = np.dtype("float32")
    where: str | None = None
    use: str | None = None

    @classmethod
    def make(cls, kind, extra_shape=(), dtype="float32", where=None, use=None) -> BufferSpec:
        if kind not in KINDS:
            raise UDFError(f"buffer kind={kind!r} is unknown; expected one of {KINDS}")
        if use not in USES:
            raise UDFError(f"buffer use={use!r} is unknown; expected one of {USES}")
        if where not in (None, "device"):
            raise UDFError(f"buffer where={where!r} is unknown; expected None or 'device'")
        if isinstance(extra_shape, (int, np.integer)):
            extra_shape = (extra_shape,)
        try:
            extra = tuple(int(e) for e in extra_shape)
        except TypeError:
            raise UDFError(f"buffer extra_shape={extra_shape!r} is not a shape") from None
        if any(e < 0 for e in extra):
            raise UDFError(f"buffer extra_shape={extra} has negative dims")
        return cls(kind, extra, np.dtype(dtype), where, use)

    def shape(self, nav_len: int, sig_shape: tuple[int, ...]) -> tuple[int, ...]:
        """Array shape for `nav_len` nav positions (flat) and the given signal shape."""
        if self.kind == "nav":
            return (nav_len, *self.extra_shape)
        if self.kind == "sig":
            return (*sig_shape, *self.extra_shape)
        return self.extra_shape or (1,)

    def allocate(self, nav_len: int, sig_shape: tuple[int, ...], name: str = "") -> np.ndarray:
        shape = self.shape(nav_len, sig_shape)
        try:
            return np.zeros(shape, dtype=self.dtype)
        except (MemoryError, ValueError) as e:  # ValueError: more bytes than can be addressed
            raise self._too_large(name, shape, str(e)) from None

    def check_fits(self, nav_len: int, sig_shape: tuple[int, ...], name: str, memory: int):
        """A `MemoryError` naming the buffer if it is larger than `memory` bytes."""
        shape = self.shape(nav_len, sig_shape)
        if math.prod(shape) * self.dtype.itemsize > memory:
            raise self._too_large(name, shape, f"this machine has {memory / 2**30:.3g} GiB")

    def _too_large(self, name: str, shape, why: str) -> MemoryError:
        size = math.prod(shape) * self.dtype.itemsize
        return MemoryError(
            f"result buffer {name!r} (kind={self.kind!r}) of shape {shape} and dtype "
            f"{self.dtype} needs {size / 2**30:.3g} GiB, which cannot be allocated ({why}); "
            "use a ROI or a smaller extra_shape"
        )


def declared_buffers(udf: Any) -> dict[str, BufferSpec]:
    """`udf`'s ``get_result_buffers()``, checked: a dict of `BufferSpec` by valid name."""
    buffers = udf.get_result_buffers()
    if not isinstance(buffers, dict):
        raise UDFError(
            f"{type(udf).__name__}.get_result_buffers must return a dict of buffers, "
            f"got {type(buffers).__name__}"
        )
    for name, spec in buffers.items():
        if not (isinstance(name, str) and name.isidentifier()):
            raise UDFError(
                f"{type(udf).__name__}.get_result_buffers: {name!r} is not a valid buffer name; "
                "use a Python identifier (letters, digits and underscores, not starting with a "
                "digit)"
            )
        if not isinstance(spec, BufferSpec):
            raise UDFError(
                f"{type(udf).__name__}.get_result_buffers: {name!r} is not declared with "
                f"self.buffer(...) (got {type(spec).__name__})"
            )
    return buffers


def valid_names(names) -> dict[str, str]:
    """The name of each result's valid-mask coordinate, by result name, for the results
    `names` of one UDF in their order.

    The mask of result NAME is ``NAME_valid``. Where that is itself the name of a result
    (a buffer ``x_valid`` beside a buffer ``x``) or of an earlier result's mask, one more
    underscore goes before ``valid`` until the name is free: ``x__valid``, ``x___valid``,
    ... Results and masks thus never share a name, and the same results always get the
    same mask names.

    Examples
    --------
    >>> valid_names(["intensity"])
    {'intensity': 'intensity_valid'}
    >>> valid_names(["x", "x_valid"])
    {'x': 'x__valid', 'x_valid': 'x_valid_valid'}
    """
    names = list(names)
    taken = set(names)
    out = {}
    for name in names:
        underscores = "_"
        while f"{name}{underscores}valid" in taken:
            underscores += "_"
        out[name] = f"{name}{underscores}valid"
        taken.add(out[name])
    return out


def stored_buffers(specs: dict[str, BufferSpec]) -> dict[str, BufferSpec]:
    """The buffers that partition tasks fill and merges combine: all but ``result_only``."""
    return {k: s for k, s in specs.items() if s.use != "result_only"}


def fill_value(dtype: np.dtype):
    """What nav results hold outside the ROI (and where frames are missing)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return complex(np.nan, np.nan)  # as LiberTEM: both parts NaN
    if dtype.kind == "f":
        return np.nan
    if dtype.kind == "b":
        return False
    if dtype.kind in "SU":
        return ""
    if dtype.kind == "O":
        return None
    if dtype.kind in "mM":
        return np.datetime64("NaT") if dtype.kind == "M" else np.timedelta64("NaT")
    return 0


def filled(shape, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    out = np.empty(shape, dtype=dtype) if dtype.kind == "O" else np.zeros(shape, dtype=dtype)
    fv = fill_value(dtype)
    if dtype.kind == "O" or fv not in (0, False, ""):
        out[...] = fv
    return out


def expand_nav(compressed: np.ndarray, mask: np.ndarray, dtype) -> np.ndarray:
    """Scatter ROI-compressed nav values into a flat array with fill values elsewhere."""
    out = filled((mask.size, *compressed.shape[1:]), dtype)
    out[mask] = compressed
    return out


class BufferArray(np.ndarray):
    """A buffer's array as ``self.results["name"]`` gives it (LiberTEM gives its buffer
    object there): the array itself, a view of the same memory, with LiberTEM's
    ``raw_data``.

    Examples
    --------
    >>> import warnings
    >>> ns = Namespace({"x": np.zeros(3)}, buffers=True)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     ns["x"].raw_data[:] = 7
    >>> ns.x.tolist()
    [7.0, 7.0, 7.0]
    """

    @property
    def raw_data(self) -> np.ndarray:
        return self.view(np.ndarray)


class Namespace:
    """Attribute access to named arrays: ``ns.name``, ``ns["name"]``; assignment to an
    existing name writes into the array (``dest.x = y`` is ``dest.x[...] = y``)."""

    def __init__(
        self, arrays: dict | None = None, assign_in_place: bool = False, buffers: bool = False
    ):
        object.__setattr__(self, "_arrays", dict(arrays or {}))
        object.__setattr__(self, "_in_place", assign_in_place)
        #: result buffers: ``ns["name"]`` works, with LiberTEM's `UseDiscouragedWarning`
        object.__setattr__(self, "_buffers", buffers)

    @classmethod
    def over(cls, arrays: dict, assign_in_place: bool = False, buffers: bool = False):
        """A namespace that shows `arrays` itself, not a copy: the caller swaps the views
        in it (the runner does, per tile) without going through attribute assignment."""
        ns = cls(None, assign_in_place, buffers)
        object.__setattr__(ns, "_arrays", arrays)
        return ns

    def __getattr__(self, name):
        # through __dict__: while unpickling, _arrays is not set yet and pickle asks for
        # __setstate__; self._arrays would recurse into __getattr__ forever
        arrays = self.__dict__.get("_arrays")
        if arrays is None or name not in arrays:
            raise AttributeError(f"no buffer or parameter named {name!r}")
        return arrays[name]

    def __setattr__(self, name, value):
        current = self._arrays.get(name)
        if self._in_place and isinstance(current, np.ndarray) and value is not current:
            current[...] = value
        else:
            self._arrays[name] = value

    def __getitem__(self, name):
        if not self._buffers:
            return self._arrays[name]
        warn(
            f"dict-like access to buffers (['{name}']) is discouraged, as it can be "
            f"confusing vs. attribute access; use .{name}",
            UseDiscouragedWarning,
        )
        value = self._arrays[name]
        # as LiberTEM's BufferWrapper: with ``raw_data`` (the same memory)
        return value.view(BufferArray) if type(value) is np.ndarray else value

    def __setitem__(self, name, value):
        self.__setattr__(name, value)

    def __contains__(self, name) -> bool:
        return name in self._arrays

    def __iter__(self):
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)

    def keys(self):
        return self._arrays.keys()

    def items(self):
        return self._arrays.items()

    def values(self):
        return self._arrays.values()

    def get(self, name, default=None):
        return self._arrays.get(name, default)

    def as_dict(self) -> dict:
        return dict(self._arrays)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({sorted(self._arrays)})"


def nbytes(spec: BufferSpec, nav_len: int, sig_shape) -> int:
    return math.prod(spec.shape(nav_len, tuple(sig_shape))) * spec.dtype.itemsize


class BufferView:
    """A merged result as LiberTEM's ``BufferWrapper`` shows it in ``get_results``:
    ``raw_data`` (flat, ROI-compressed for nav buffers), ``data`` (nav-shaped, fill values
    outside the ROI) and ``valid_mask``."""

    def __init__(self, raw_data, data, valid_mask):
        self.raw_data = raw_data
        self.data = data
        self.valid_mask = valid_mask


class ResultsNamespace(Namespace):
    """``self.results`` in ``get_results``: raw arrays by name, and `get_buffer`."""

    def __init__(self, arrays: dict, views: dict):
        super().__init__(arrays, buffers=True)
        object.__setattr__(self, "_views", views)

    def get_buffer(self, name) -> BufferView:
        return self._views[name]
