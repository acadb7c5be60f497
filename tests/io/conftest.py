"""Fixtures of the io tests."""

from __future__ import annotations

import pytest

from ltdask.io import registry


@pytest.fixture
def fresh_registry():
    """The format registry loaded afresh, and again after the test: for tests that patch a
    record, hide a module or put a plug-in on ``sys.path``."""
    registry.refresh()
    yield registry
    registry.refresh()
