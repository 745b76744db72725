"""The library's modules import each other without a cycle: every import counts, at the
top of a module, inside a function or under ``if TYPE_CHECKING:`` (a cycle kept alive
by deferred or type-only imports is still a cycle). The command line (``cli``), whose
layout is its own, and ``contrib`` (integrations above the library) are left out."""

from __future__ import annotations

import ast
from pathlib import Path

import joblocks

PACKAGE = Path(joblocks.__file__).parent
LEFT_OUT = ("cli", "contrib")


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[0] in LEFT_OUT:
            continue
        name = ".".join(("joblocks", *parts))
        found[name.removesuffix(".__init__")] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            for alias in node.names:
                # ``from . import _ops`` imports the module ``_ops``; ``from ._ops
                # import peek`` the module ``_ops`` (its package is imported anyway).
                full = f"{module}.{alias.name}"
                targets.add(full if full in modules else module)
    return {target for target in targets if target in modules and target != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_among_the_library_modules() -> None:
    modules = _modules()
    assert "joblocks._core.lifecycle" in modules
    assert "joblocks.aio" in modules
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert "joblocks._sync.driver" in graph["joblocks._sync.model"]  # the imports are read
    assert _cycles(graph) == []
