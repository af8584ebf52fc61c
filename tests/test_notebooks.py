"""Every notebook of the book runs top to bottom with small parameters (papermill, kernel python3).

The small parameters are the ones ``tools/build_book.py --quick`` uses (``QUICK_PARAMETERS``),
so this test and the quick book build exercise the same runs. A cell that raises fails the test
with papermill's report of the failing cell.
"""
from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.book


def _load_build_book():
    spec = importlib.util.spec_from_file_location("build_book", REPO / "tools" / "build_book.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build_book = _load_build_book()
NOTEBOOKS = build_book.notebook_paths(REPO)


def _parameters_cell(nb: dict) -> dict:
    cells = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, "exactly one cell must be tagged 'parameters'"
    return cells[0]


def _assigned_names(source: str) -> set[str]:
    tree = ast.parse(source)
    return {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}


def test_the_book_has_its_seven_notebooks():
    assert [p.stem[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05", "06", "07"]
    assert set(build_book.QUICK_PARAMETERS) == {p.stem for p in NOTEBOOKS}


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_clean_with_a_parameters_cell(notebook):
    nb = json.loads(notebook.read_text())
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell.get("outputs", []) == [], f"{notebook.name}: commit notebooks without outputs"
            assert cell.get("execution_count") is None, f"{notebook.name}: commit notebooks without execution counts"
    names = _assigned_names("".join(_parameters_cell(nb)["source"]))
    assert "out_dir" in names
    unknown = set(build_book.QUICK_PARAMETERS[notebook.stem]) - names
    assert not unknown, f"{notebook.name}: quick parameters {sorted(unknown)} are not in its parameters cell"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_with_small_parameters(notebook, tmp_path):
    pytest.importorskip("papermill")
    params = build_book.quick_parameters(notebook.stem, tmp_path / "data")
    out = tmp_path / notebook.name
    seconds = build_book.run_notebook(notebook, out, params, cwd=notebook.parent)
    print(f"{notebook.name}: {seconds:.1f} s")
    executed = json.loads(out.read_text())
    errors = [o for c in executed["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors


def test_a_notebook_runs_from_the_repository_root(tmp_path):
    """The notebooks do not depend on being started from notebooks/."""
    pytest.importorskip("papermill")
    notebook = REPO / "notebooks" / "07_your_own_data.ipynb"
    params = build_book.quick_parameters(notebook.stem, tmp_path / "data")
    build_book.run_notebook(notebook, tmp_path / notebook.name, params, cwd=REPO)
    assert (tmp_path / "data" / notebook.stem / "my_model.pt").is_file()
