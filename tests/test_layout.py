"""The package's layout keeps its promises (docs/concepts.md draws it): the layers' arrows run
one way, no import circles (not even through type-checking or in-function imports), no
arrow back to the package root, few modules loose at the top, modules small enough to read
(numba kernel collections excepted)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ltdask

PACKAGE = Path(ltdask.__file__).parent
#: modules that are collections of numba kernels, allowed to be long
KERNEL_MODULES = {"ltdask.kernels.statistics", "ltdask.udf.builtin._kernels"}
MAX_LINES = 450
#: modules directly in ``ltdask/``, ``__init__`` included
MAX_TOP_MODULES = 6


def _modules() -> dict[str, Path]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _imported(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The package modules that module `name` imports, anywhere in it: in functions and
    under ``if TYPE_CHECKING:`` too (an arrow a reader follows is an arrow)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                found.add(sub if sub in mods else module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    # importing ``ltdask.a.b`` runs ``ltdask/a/__init__.py`` too (the package root aside:
    # every module runs it, and `test_nothing_imports_the_package_root` keeps arrows off it)
    parents = {".".join(m.split(".")[:i]) for m in found for i in range(2, len(m.split(".")))}
    return {m for m in found | parents if m in mods and m != name and not name.startswith(m + ".")}


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {name: _imported(name, path, mods) for name, path in mods.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return found


def test_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle():
    assert _cycles(_graph()) == []


def test_import_finder_sees_every_kind_of_import(tmp_path):
    """Type-checking and in-function imports are arrows too; a submodule's import runs its
    package."""
    path = tmp_path / "m.py"
    path.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ltdask.a import b\n"
        "def f():\n    from ltdask.c.d import e\n"
    )
    mods = {m: path for m in ("ltdask.a", "ltdask.a.b", "ltdask.c", "ltdask.c.d", "ltdask.m")}
    assert _imported("ltdask.m", path, mods) == {"ltdask.a", "ltdask.a.b", "ltdask.c", "ltdask.c.d"}


def _in(layer: str, module: str) -> bool:
    return module == layer or module.startswith(layer + ".")


def _path_to(graph: dict[str, set[str]], start: str, wanted) -> list[str] | None:
    """The shortest chain of imports from `start` to a module for which `wanted` holds
    (through other modules too), or None."""
    before: dict[str, str] = {}
    todo = [start]
    while todo:
        later = []
        for module in todo:
            for dep in sorted(graph.get(module, ())):
                if dep in before or dep == start:
                    continue
                before[dep] = module
                if wanted(dep):
                    chain = [dep]
                    while chain[-1] != start:
                        chain.append(before[chain[-1]])
                    return chain[::-1]
                later.append(dep)
        todo = later
    return None


#: (layer, the layers it must never reach, the modules it may reach where given, why)
LAYER_RULES = [
    ("ltdask.io", ["ltdask.udf"], None, "reading knows no UDF"),
    ("ltdask.io.formats", ["ltdask.udf"], None, "a format knows no UDF"),
    ("ltdask.corrections", ["ltdask.udf"], None, "corrections apply to tiles, not UDFs"),
    ("ltdask.views", ["ltdask.compat"], None, "views take ltdask's results"),
    ("ltdask.runtime", ["ltdask.io", "ltdask.udf"], None, "runtime is below the datasets"),
    (
        "ltdask.kernels",
        [],
        ["ltdask.kernels", "ltdask.exceptions", "ltdask.runtime"],
        "kernels are the bottom",
    ),
]


@pytest.mark.parametrize(
    ("layer", "never", "only"),
    [
        pytest.param(layer, never, only, id=f"{layer}: {why}")
        for layer, never, only, why in LAYER_RULES
    ],
)
def test_layers_arrows_run_down(layer, never, only):
    graph = _graph()
    members = sorted(m for m in graph if _in(layer, m))
    assert members, f"no package {layer}"

    def forbidden(module: str) -> bool:
        if any(_in(n, module) for n in never):
            return True
        return only is not None and not any(_in(o, module) for o in only)

    chains = {m: chain for m in members if (chain := _path_to(graph, m, forbidden))}
    assert chains == {}


def test_layer_rule_follows_arrows_through_other_modules():
    graph = {"r.a": {"x"}, "x": {"io.y", "z"}, "io.y": set(), "z": set()}
    assert _path_to(graph, "r.a", lambda m: _in("io", m)) == ["r.a", "x", "io.y"]
    assert _path_to(graph, "z", lambda m: _in("io", m)) is None


def test_few_modules_at_the_top():
    top = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top


#: entry points above the package, which may use its public names
ABOVE_ROOT = {"ltdask.cli", "ltdask.__main__"}


def test_nothing_imports_the_package_root():
    graph = _graph()
    back = [n for n, deps in graph.items() if "ltdask" in deps]
    assert [n for n in back if not any(n == a or n.startswith(a + ".") for a in ABOVE_ROOT)] == []


def test_modules_are_small():
    long = {
        name: n
        for name, path in _modules().items()
        if (n := len(path.read_text().splitlines())) > MAX_LINES and name not in KERNEL_MODULES
    }
    assert long == {}
