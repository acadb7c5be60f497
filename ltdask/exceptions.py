"""Exceptions and warnings raised by ltdask."""

from __future__ import annotations


class LtdaskError(Exception):
    """Base class of ltdask's own errors."""


class DataSetError(LtdaskError, ValueError):
    """A dataset cannot be opened or read as described (bad path, size, shape, dtype...)."""


class UDFError(LtdaskError, ValueError):
    """A UDF is used in a way its contract does not allow."""


class PerformanceWarning(UserWarning):
    """Work will complete, but much slower than it could."""


class MergeNotImplementedError(UDFError, NotImplementedError):
    """A UDF with sig or single buffers has neither ``merge`` nor ``merge_all``."""
