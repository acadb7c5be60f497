"""Every public name is documented with an example (issue 18): each class or callable in
the ``__all__`` of a public module has an ``Examples`` section with at least one ``>>>``
line. Whether the examples run is the doctest run's job
(``python -m pytest -q -W error --doctest-modules ltdask``)."""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

#: the modules whose ``__all__`` is the public API: the package root, the modules the API
#: reference documents, the read path with the format plug-in interface and the dataset
#: classes the openers return (``ltdask.io``) and the writers' package. Not checked:
#: ``ltdask.cli`` (the command's click functions).
PUBLIC_MODULES = [
    "ltdask",
    "ltdask.udf",
    "ltdask.masks",
    "ltdask.compat",
    "ltdask.views.plot",
    "ltdask.corrections",
    "ltdask.io.synthetic",
    "ltdask.beam",
    "ltdask.analysis",
    "ltdask.common",
    "ltdask.io.calibration",
    "ltdask.runtime.kernel_cache",
    "ltdask.udf.warmup",
    "ltdask.store",
    "ltdask.io",
    "ltdask.store.hyperspy",
]

#: a numpydoc ``Examples`` heading, then a ``>>>`` line in that section (before the next
#: heading)
_EXAMPLES = re.compile(r"^Examples\n-{8,}\n(?:(?!\S+\n-{3,}\n).*\n)*?\s*>>> ", re.MULTILINE)


def _public_names(module_name: str) -> list[tuple[str, object]]:
    module = importlib.import_module(module_name)
    return [(name, getattr(module, name)) for name in module.__all__]


def _has_example(obj: object) -> bool:
    """`obj`'s own docstring (not one inherited, as `inspect.getdoc` would give) has one."""
    doc = inspect.cleandoc(obj.__doc__ or "")
    return bool(_EXAMPLES.search(doc + "\n"))


def test_examples_are_found():
    """The check itself: an Examples section with a ``>>>`` line passes, one without (or a
    ``>>>`` in another section) does not."""

    def good():
        """Do.

        Examples
        --------
        >>> good()
        """

    def empty():
        """Do.

        Examples
        --------
        Call it.

        Notes
        -----
        >>> empty()
        """

    def missing():
        """Do."""

    assert _has_example(good)
    assert not _has_example(empty)
    assert not _has_example(missing)
    assert not _has_example(lambda: None)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_public_names_have_examples(module_name):
    names = _public_names(module_name)
    assert names, f"{module_name}.__all__ is empty"
    missing = [
        f"{module_name}.{name}"
        for name, obj in names
        if (inspect.isclass(obj) or callable(obj))
        and not inspect.ismodule(obj)
        and not _has_example(obj)
    ]
    assert not missing, (
        f"{len(missing)} public names have no Examples section with a '>>>' line: "
        + ", ".join(missing)
    )
