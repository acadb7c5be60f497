"""Exceptions and warnings raised by ltdask."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import FrameType


class LtdaskError(Exception):
    """Base class of ltdask's own errors.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> ds = ltdask.from_array(np.zeros((2, 2, 4, 4), dtype=np.float32))
    >>> try:
    ...     ltdask.compute(ds, [])
    ... except ltdask.LtdaskError as e:  # any of ltdask's own errors
    ...     print(type(e).__name__, e)
    UDFError empty list of UDFs - nothing to do!
    """


class DataSetError(LtdaskError, ValueError):
    """A dataset cannot be opened or read as described (a path that is not a file, size,
    shape, dtype...). A file that does not exist raises `FileNotFoundError`.

    Examples
    --------
    >>> import numpy as np, ltdask, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.raw")
    >>> np.zeros((4, 8, 8), dtype=np.float32).tofile(path)
    >>> try:
    ...     ltdask.open_raw(path, nav_shape=(2, -2), sig_shape=(8, 8), dtype="float32")
    ... except ltdask.DataSetError as e:
    ...     print(str(e).removeprefix(path + ": "))
    nav_shape=(2, -2) has zero or negative dims; all must be >= 1
    """


class UDFError(LtdaskError, ValueError):
    """A UDF is used in a way its contract does not allow.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> ds = ltdask.from_array(np.zeros((2, 2, 4, 4), dtype=np.float32))
    >>> try:
    ...     ltdask.udf.SumUDF().compute(ds, roi=np.ones((3, 3), dtype=bool))
    ... except ltdask.UDFError as e:
    ...     print(e)
    roi of shape (3, 3) does not fit the dataset's nav shape (2, 2) (or its flat size 4)
    """


class InvalidMaskError(UDFError):
    """A UDF's valid mask for a result (``self.with_mask(data, mask)`` in ``get_results``)
    is not boolean (nor 0/1 integers), or does not broadcast to the result's shape
    (LiberTEM's ``libertem.common.buffers.InvalidMaskError``)."""


class ConversionError(LtdaskError, ValueError):
    """Values that the dtype asked for cannot hold: a conversion that would change them
    (wrap integers around, turn NaN or infinities into numbers, overflow to infinity).

    Examples
    --------
    >>> import numpy as np, ltdask, tempfile, os
    >>> ds = ltdask.from_array(np.full((2, 2, 4, 4), 4000, dtype=np.uint16))
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.zarr")
    >>> try:
    ...     ds.to_zarr(path, dtype="uint8")
    ... except ltdask.ConversionError as e:
    ...     print(type(e).__name__, os.path.exists(path))
    ConversionError False
    """

    def __init__(self, problem: str, fix: str = ""):
        super().__init__(f"{problem}; {fix}" if fix else problem)
        #: what is wrong, without the fix (which the command line words in its own terms)
        self.problem = problem


class ExecutorSpecException(LtdaskError, ValueError):
    """``Context.make_with`` got an executor spec, or a worker count for it, that it cannot
    honour (LiberTEM's ``libertem.common.exceptions.ExecutorSpecException``).

    Examples
    --------
    >>> from ltdask.compat import Context
    >>> try:
    ...     Context.make_with("inline", cpus=4)
    ... except ExecutorSpecException as e:
    ...     print(str(e)[:73])
    Executor type inline does not support specifying CPU workers at this time
    """


class ConfigError(LtdaskError, ValueError):
    """An ``ltdask.*`` setting in dask's config holds a value that cannot be used."""


class UseDiscouragedWarning(FutureWarning):
    """A feature kept for LiberTEM compatibility that invites mistakes (as LiberTEM's).

    Examples
    --------
    >>> import numpy as np, ltdask, warnings
    >>> class MaxUDF(ltdask.UDF):
    ...     def get_result_buffers(self):
    ...         return {"maximum": self.buffer(kind="nav")}
    ...     def process_frame(self, frame):  # self.results.maximum is the way
    ...         self.results["maximum"][:] = frame.max()
    >>> ds = ltdask.from_array(np.ones((2, 2, 4, 4), dtype=np.float32))
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = MaxUDF().compute(ds)
    >>> caught[0].category.__name__, str(caught[0].message)[:41]
    ('UseDiscouragedWarning', "dict-like access to buffers (['maximum'])")
    """


class UndeclaredResultError(UDFError, KeyError):
    """``get_results`` returned a name that ``get_result_buffers`` did not declare (a
    `KeyError`, as in LiberTEM)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class PerformanceWarning(UserWarning):
    """Work will complete, but much slower than it could; silence it with
    ``warnings.simplefilter("ignore", ltdask.PerformanceWarning)``.

    Examples
    --------
    Chunks of different sizes are copied onto a regular grid before they are written to
    Zarr (``ltdask.partition-bytes`` is lowered here: smaller copies are silent):

    >>> import numpy as np, ltdask, tempfile, os, warnings, dask
    >>> ds = ltdask.from_array(np.zeros((4, 4, 8, 8), dtype=np.float32))
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.zarr")
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     with dask.config.set({"ltdask.partition-bytes": 1024}):
    ...         _ = ds.to_zarr(path, chunks=((1, 3), 4, 8, 8))
    >>> caught[0].category.__name__
    'PerformanceWarning'
    """


class EmptyMaskWarning(UserWarning):
    """A mask has no pixel in the frame (a disk or ring whose centre lies far outside it, a
    rectangle beside it): applied, it gives zeros everywhere.

    Examples
    --------
    >>> import warnings
    >>> from ltdask import masks
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     mask = masks.circular(500, 500, 64, 64, radius=5)
    >>> caught[0].category.__name__, bool(mask.any())
    ('EmptyMaskWarning', False)
    """


class ROIDtypeWarning(UserWarning):
    """A ROI that is not boolean is cast to bool (nonzero: selected), as LiberTEM does, with
    LiberTEM's message.

    Examples
    --------
    >>> import numpy as np, ltdask, warnings
    >>> ds = ltdask.from_array(np.ones((2, 2, 4, 4), dtype=np.float32))
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     res = ltdask.udf.SumUDF().compute(ds, roi=np.array([[1, 0], [0, 0]]))
    >>> caught[0].category.__name__, str(caught[0].message)
    ('ROIDtypeWarning', 'ROI dtype is int64, expected bool. Attempting cast to bool.')
    """


class MissingFramesWarning(UserWarning):
    """The nav shape asks for more frames than the files hold; those positions are invalid.

    Examples
    --------
    >>> import numpy as np, ltdask, tempfile, os, warnings
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.raw")
    >>> np.ones((3, 8, 8), dtype=np.float32).tofile(path)  # an interrupted 2 x 2 scan
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     ds = ltdask.open_raw(path, nav_shape=(2, 2), sig_shape=(8, 8), dtype="float32")
    >>> caught[0].category.__name__
    'MissingFramesWarning'
    >>> ltdask.udf.SumSigUDF().compute(ds)["intensity_valid"].values.tolist()
    [[True, True], [True, False]]
    """


class MetadataWarning(UserWarning):
    """What a file's metadata says cannot be used (a scan shape of -4, or one that needs more
    frames than the files hold): the data is read without it, and the message names the
    values and what was used instead.

    Examples
    --------
    Where metadata that cannot be used must stop the program:

    >>> import warnings, ltdask
    >>> warnings.simplefilter("error", ltdask.MetadataWarning)  # doctest: +SKIP
    >>> issubclass(ltdask.MetadataWarning, UserWarning)
    True
    """


def warn(message: str, category: type[Warning]) -> None:
    """Warn, attributed to the first caller outside ltdask (the user's line)."""
    import os
    import sys
    import warnings

    package = os.path.dirname(os.path.abspath(__file__))
    level = 2
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(package):
        level, frame = level + 1, frame.f_back
    warnings.warn(message, category, stacklevel=level)


class MergeNotImplementedError(UDFError, NotImplementedError):
    """A UDF with sig or single buffers has neither ``merge`` nor ``merge_all``."""
