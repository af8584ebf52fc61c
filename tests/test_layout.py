"""The package's house rules, checked on its source: imports point down, no cycles, small modules.

Data flows one way (data -> bags -> model -> training -> estimator -> evaluation ->
plots -> book -> cli). A module may import from its own layer or any layer
below it, never above; a new module must be given a layer here. ``book`` is the book's
code (experiment drivers, frozen tables, verdicts): nothing in the library imports it.
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "minitorch_proto"

# Lowest first. A module's layer is that of the longest matching prefix.
LAYERS: list[tuple[str, ...]] = [
    ("about", "utils", "validation", "outputs"),
    ("data",),
    ("bags", "distances", "preprocessing"),
    ("model",),
    ("training",),
    ("paper", "serialization", "convex_head"),
    ("estimator", "estimator_files", "estimator_training"),
    ("baselines",),
    ("meta_estimators", "methods", "evaluation"),
    ("plots",),
    ("book",),
    ("cli", "cli_args", "cli_inputs", "cli_models", "__main__", "__init__"),
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


# --------------------------------------------------------------------------------------
# Names: one file name per module, nothing imported from the package root below it, and
# notebooks that import only from the package root and its subpackage roots
# --------------------------------------------------------------------------------------
NOTEBOOKS = sorted((PACKAGE.parent / "notebooks").glob("*.ipynb"))
SUBPACKAGES = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}


def test_no_two_modules_share_a_file_name():
    # Two "batched.py" or "mnist.py" make tracebacks, imports and search results ambiguous.
    owners: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name not in ("__init__.py", "__main__.py"):
            owners.setdefault(path.name, []).append(str(path.relative_to(PACKAGE)))
    shared = {name: paths for name, paths in owners.items() if len(paths) > 1}
    assert not shared, f"module file names used more than once (name each by its idea): {shared}"


def _root_names_imported(module: str, source: str, is_pkg: bool) -> list[str]:
    """Names ``module`` takes from the package root (``__init__``), not from the module defining them."""
    here = module.split(".") if module != "__init__" else []
    package = here if is_pkg else here[:-1]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                if node.module != "minitorch_proto":
                    continue
            elif node.module or len(package) - (node.level - 1) > 0:
                continue  # resolves below the root
            # "from .. import x" / "from minitorch_proto import x" is fine when x is a submodule
            found += [a.name for a in node.names if a.name not in MODULES]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name == "minitorch_proto"]
    return found


@pytest.mark.parametrize("module", [m for m in MODULES if m != "__init__"])
def test_no_module_imports_from_the_package_root(module):
    # The root re-exports from below; a module below it importing those names back hides a
    # cycle that test_imports_point_down cannot see (the target is a name, not a module).
    path = MODULES[module]
    names = _root_names_imported(module, path.read_text(), path.name == "__init__.py")
    assert not names, f"{module} imports {names} from the package root: import them from the module that defines them"


def test_root_import_check_flags_names_not_submodules():
    assert _root_names_imported("evaluation.frozen", "from .. import __version__", False) == ["__version__"]
    assert _root_names_imported("cli", "from . import __version__", False) == ["__version__"]
    assert _root_names_imported("cli", "import minitorch_proto", False) == ["minitorch_proto"]
    assert _root_names_imported("data.readers", "from minitorch_proto import BagDataset", False) == ["BagDataset"]
    assert _root_names_imported("evaluation.cv", "from .. import utils\nfrom ..utils import progress_bar", False) == []
    assert _root_names_imported("evaluation", "from . import cv\nfrom .cv import summarize", True) == []


def _notebook_code(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    # IPython magics (%pip, !cmd) are not Python: keep their indentation, drop the command.
    return "\n".join(re.sub(r"(?m)^(\s*)[%!].*$", r"\1pass", "".join(c["source"]))
                     for c in cells if c["cell_type"] == "code")


def _bad_notebook_imports(source: str) -> tuple[list[str], int]:
    """(imports naming a module below a subpackage root, number of package imports seen)."""
    allowed = {"minitorch_proto"} | {f"minitorch_proto.{p}" for p in SUBPACKAGES}
    bad, seen = [], 0
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "minitorch_proto":
            seen += 1
            sub = node.module.split(".")[1:]
            modules = [a.name for a in node.names if ".".join(sub + [a.name]) in MODULES
                       and ".".join(sub + [a.name]) not in SUBPACKAGES]
            if node.module not in allowed or modules:
                bad.append(ast.unparse(node))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "minitorch_proto":
                    seen += 1
                    if alias.name not in allowed:
                        bad.append(ast.unparse(node))
    return bad, seen


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_import_only_from_the_package_and_subpackage_roots(notebook):
    # A reader learns a handful of import paths (minitorch_proto, .data, .evaluation, .book,
    # .plots, ...); the modules behind them can move without breaking a notebook.
    bad, seen = _bad_notebook_imports(_notebook_code(notebook))
    assert seen, f"{notebook.name}: no minitorch_proto import found (is the parser reading its cells?)"
    assert not bad, f"{notebook.name} imports below a subpackage root (re-export the names there): {bad}"


def test_notebook_import_check_flags_deep_paths():
    bad, seen = _bad_notebook_imports(
        "try:\n    import minitorch_proto\nexcept ImportError:\n    pass\n"
        "from minitorch_proto import book, plots, PrototypeMIL\n"
        "from minitorch_proto.evaluation import stratified_folds\n"
        "from minitorch_proto.evaluation.cv import summarize\n"
        "from minitorch_proto.evaluation import explain\n"
        "from minitorch_proto import model\n"
        "import minitorch_proto.data.synthetic\n")
    assert seen == 7
    assert bad == ["from minitorch_proto.evaluation.cv import summarize", "from minitorch_proto.evaluation import explain",
                   "from minitorch_proto import model", "import minitorch_proto.data.synthetic"]
