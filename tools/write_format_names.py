"""Write the modules that list the built-in formats' public names for ``ltdask.io`` and
``ltdask``, from the format registry: ``ltdask/io/formats/_openers.py`` (each format's
opener) and ``ltdask/io/formats/_classes.py`` (the rest of each format's ``__all__``).

The packages read the names from these modules at run time without importing any format,
and type checkers read their imports; ``tests/io/test_registry.py`` checks that they are
what this script writes. After adding a format (its folder and its line in
``ltdask.io.registry.BUILTIN``)::

    python tools/write_format_names.py          # write them
    python tools/write_format_names.py --check  # exit 1 if they are out of date
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

FORMATS = Path(__file__).resolve().parents[1] / "ltdask" / "io" / "formats"

HEADER = '''"""{what} of the built-in formats, which {who} re-export{s}.

Written by ``tools/write_format_names.py`` from the format registry (each format package's
``__all__``, in the order of ``ltdask.io.registry.BUILTIN``); do not edit. Type checkers read
the imports; at run time each name is imported when it is first used.
"""

from typing import TYPE_CHECKING

from ltdask.common._lazy import lazy_exports

if TYPE_CHECKING:
'''


def public_names() -> tuple[dict[str, str], dict[str, str]]:
    """``(openers, classes)``: each built-in format's public names -> ``"package:name"``."""
    from ltdask.io.registry import BUILTIN

    openers: dict[str, str] = {}
    classes: dict[str, str] = {}
    for where in BUILTIN.values():
        package_name = where.partition(":")[0]
        package = importlib.import_module(package_name)
        record = package.FORMAT
        exported = [n for n in getattr(package, "__all__", ()) if n != "FORMAT"]
        opener = record.opener_name()
        if opener not in exported:
            raise SystemExit(f"{package_name}: its __all__ lacks its opener {opener!r}")
        for export in exported:
            table = openers if export == opener else classes
            if export in openers or export in classes:
                raise SystemExit(f"{package_name}: {export!r} is exported by another format")
            table[export] = f"{package_name}:{export}"
    return openers, classes


def render(names: dict[str, str], what: str, who: str) -> str:
    by_package: dict[str, list[str]] = {}
    for name, where in names.items():
        by_package.setdefault(where.partition(":")[0], []).append(name)
    imports = "".join(  # in the order ruff's isort keeps
        f"    from {package} import {', '.join(sorted(by_package[package]))}\n"
        for package in sorted(by_package)
    )
    table = "".join(f'    "{name}": "{where}",\n' for name, where in names.items())
    listed = "".join(f'    "{name}",\n' for name in names)
    return (
        HEADER.format(what=what, who=who, s="" if " and " in who else "s")
        + imports
        + '\n#: name -> ``"package:name"``\nNAMES = {\n'
        + table
        + "}\n__getattr__, __dir__ = lazy_exports(__name__, globals(), NAMES)\n\n__all__ = [\n"
        + listed
        + "]\n"
    )


def expected() -> dict[Path, str]:
    openers, classes = public_names()
    return {
        FORMATS / "_openers.py": render(openers, "The openers", "``ltdask`` and ``ltdask.io``"),
        FORMATS / "_classes.py": render(classes, "The other public names", "``ltdask.io``"),
    }


def main(argv: list[str]) -> int:
    texts = expected()
    stale = [path for path, text in texts.items() if not path.is_file() or path.read_text() != text]
    if "--check" in argv:
        for path in stale:
            print(f"{path} is out of date: run python tools/write_format_names.py")
        return 1 if stale else 0
    for path, text in texts.items():
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
