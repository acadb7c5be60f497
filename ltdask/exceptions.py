"""Exceptions and warnings raised by ltdask."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import FrameType


class LtdaskError(Exception):
    """Base class of ltdask's own errors."""


class DataSetError(LtdaskError, ValueError):
    """A dataset cannot be opened or read as described (bad path, size, shape, dtype...)."""


class UDFError(LtdaskError, ValueError):
    """A UDF is used in a way its contract does not allow."""


class ConfigError(LtdaskError, ValueError):
    """An ``ltdask.*`` setting in dask's config holds a value that cannot be used."""


class UseDiscouragedWarning(FutureWarning):
    """A feature kept for LiberTEM compatibility that invites mistakes (as LiberTEM's)."""


class UndeclaredResultError(UDFError, KeyError):
    """``get_results`` returned a name that ``get_result_buffers`` did not declare (a
    `KeyError`, as in LiberTEM)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class PerformanceWarning(UserWarning):
    """Work will complete, but much slower than it could."""


class MissingFramesWarning(UserWarning):
    """The nav shape asks for more frames than the files hold; those positions are invalid."""


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
