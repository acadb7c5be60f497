"""Fixtures of the io tests."""

from __future__ import annotations

import pytest
from helpers import badinput

from ltdask.io import registry


@pytest.fixture(scope="module", autouse=True)
def bad_input_table(request):
    """At the end of a module of bad-input cases (``test_errors.py``), print each case and
    what it raised."""
    yield from badinput.report(request)


@pytest.fixture
def fresh_registry():
    """The format registry loaded afresh, and again after the test: for tests that patch a
    record, hide a module or put a plug-in on ``sys.path``."""
    registry.refresh()
    yield registry
    registry.refresh()
