"""Fixtures of the per-format tests."""

from __future__ import annotations

import pytest
from helpers import badinput


@pytest.fixture(scope="module", autouse=True)
def bad_input_table(request):
    """At the end of a module of bad-input cases (``test_<format>_errors.py``), print each
    case and what it raised."""
    yield from badinput.report(request)
