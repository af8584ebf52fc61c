"""The package's house rules, checked on its source: imports point down, no cycles, small modules.

Data flows one way (data -> bags -> model -> training -> estimator -> evaluation ->
plots -> book -> cli). A module may import from its own layer or any layer
below it, never above; a new module must be given a layer here. ``book`` is the book's
code (experiment drivers, frozen tables, verdicts): nothing in the library imports it.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "minitorch_proto"

# Lowest first. A module's layer is that of the longest matching prefix.
LAYERS: list[tuple[str, ...]] = [
    ("about", "utils", "validation"),
    ("data",),
    ("bags", "distances", "preprocessing"),
    ("model",),
    ("training",),
    ("paper", "serialization"),
    ("estimator",),
    ("baselines",),
    ("evaluation",),
    ("plots",),
    ("book",),
    ("cli", "__main__", "__init__"),
]
MAX_LINES = 620


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _layer(module: str) -> int:
    best, best_len = None, -1
    for i, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best_len:
                best, best_len = i, len(name)
    if best is None:
        raise AssertionError(f"module {module!r} has no layer in tests/test_layout.py: add it to LAYERS")
    return best


def _imports(module: str, path: Path, top_level_only: bool) -> set[str]:
    """Package modules imported by ``module`` (relative imports resolved)."""
    tree = ast.parse(path.read_text())
    is_pkg = path.name == "__init__.py"
    here = module.split(".") if module != "__init__" else []
    package = here if is_pkg else here[:-1]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                if not (node.module or "").startswith("minitorch_proto"):
                    continue
                base = node.module.split(".")[1:]
            else:
                base = package[: len(package) - (node.level - 1)] + (node.module.split(".") if node.module else [])
            if node.module is None or node.level and not node.module:
                # "from . import x": x may be a submodule
                for alias in node.names:
                    found.add(".".join(base + [alias.name]))
            else:
                found.add(".".join(base) if base else "__init__")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("minitorch_proto."):
                    found.add(alias.name.split(".", 1)[1])
    modules = _modules()
    resolved = set()
    for name in found:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name and name != module:
            resolved.add(name)
    return resolved


MODULES = _modules()


@pytest.mark.parametrize("module", [m for m in MODULES if m not in ("__init__", "__main__", "cli")])
def test_imports_point_down(module):
    # Lazy imports inside functions count too: they are still a dependency.
    mine = _layer(module)
    upward = {t: _layer(t) for t in _imports(module, MODULES[module], top_level_only=False) if _layer(t) > mine}
    assert not upward, f"{module} (layer {mine}) imports from higher layers: {upward}"


def test_no_import_cycles():
    graph = {m: _imports(m, p, top_level_only=True) for m, p in MODULES.items()}
    # A package's __init__ importing its own submodules is how re-exports work; skip those edges.
    for m in graph:
        graph[m] = {t for t in graph[m] if not t.startswith(m + ".")}
    state: dict[str, int] = {}

    def visit(node, stack):
        state[node] = 1
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack + [node, nxt]))
            if state.get(nxt) is None:
                visit(nxt, stack + [node])
        state[node] = 2

    for m in graph:
        if m not in state:
            visit(m, [])


@pytest.mark.parametrize("module", list(MODULES))
def test_modules_stay_small(module):
    n = len(MODULES[module].read_text().splitlines())
    assert n <= MAX_LINES, f"{module} has {n} lines (> {MAX_LINES}): split it by idea"
