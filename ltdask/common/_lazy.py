"""Names a package exports but imports when they are first used (PEP 562's module
``__getattr__``), so that ``import ltdask`` does not import what only some uses need.

A package lists its lazy names as ``{name: "module:attribute"}`` (``"module"`` alone for a
submodule) and ends with ``__getattr__, __dir__ = lazy_exports(__name__, globals(), ...)``;
it imports the same names under ``typing.TYPE_CHECKING`` for type checkers and readers. The
first access imports the module and keeps the value in the package's namespace, so later
accesses are plain lookups. ``from package import name``, ``dir(package)`` and
``from package import *`` (with ``__all__``) see the lazy names as they see the others.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str,
    namespace: dict[str, Any],
    names: Mapping[str, str],
    fallback: Callable[[str], Any] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of `package` (whose globals are `namespace`) that
    import each of `names` (``{name: "module:attribute"}``, or ``{name: "module"}`` for a
    module) when it is first asked for.

    `fallback` is asked for a name that is none of `names` (the openers of format plug-ins,
    which are known only once the registry is loaded); it returns the value or raises
    `AttributeError`.

    Examples
    --------
    >>> from ltdask.common._lazy import lazy_exports
    >>> namespace = {}
    >>> getattr_, dir_ = lazy_exports("demo", namespace, {"join": "os.path:join", "json": "json"})
    >>> getattr_("join")("a", "b"), getattr_("json").__name__, dir_()
    ('a/b', 'json', ['join', 'json'])
    >>> sorted(namespace)  # kept: the next access does not come here
    ['join', 'json']
    >>> getattr_("split")
    Traceback (most recent call last):
    ...
    AttributeError: module 'demo' has no attribute 'split'
    """
    names = dict(names)

    def __getattr__(name: str) -> Any:
        try:
            where = names[name]
        except KeyError:
            if fallback is not None:
                try:  # not kept in the namespace: the registry can change (refresh())
                    return fallback(name)
                except AttributeError:
                    pass
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        module_name, _, attribute = where.partition(":")
        module = importlib.import_module(module_name)
        value = getattr(module, attribute) if attribute else module
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
