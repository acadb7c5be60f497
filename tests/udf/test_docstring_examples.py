"""The examples in the docstrings of `ltdask.udf`'s modules run as doctests."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import ltdask.udf

MODULES = sorted(m.name for m in pkgutil.walk_packages(ltdask.udf.__path__, prefix="ltdask.udf."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed"
