"""The notebooks as committed: numbered, clean, with a papermill parameters cell and the page convention.

The page convention of the book (an opening "What this page shows" section, a closing "Verdict"
computed by a code cell) is checked on the source. That every notebook runs top to bottom with
small parameters (papermill, kernel python3) from a fresh empty folder, as on Colab after
``pip install``, is checked on the runs of the quick book build (``tests/test_book.py``), which
makes exactly those runs; running them here a second time cost five minutes of CI. One more run
here: page 07 from the repository root on a stranger's CSV.
"""
from __future__ import annotations

import ast
import importlib.util
import json
import re
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


def test_the_notebooks_are_numbered_and_have_quick_parameters():
    assert [int(p.stem[:2]) for p in NOTEBOOKS] == list(range(1, len(NOTEBOOKS) + 1))
    assert len(NOTEBOOKS) >= 7
    assert set(build_book.QUICK_PARAMETERS) == {p.stem for p in NOTEBOOKS}


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_follows_the_page_convention(notebook):
    """Opens with a title and "What this page shows"; ends with "## Verdict" and the code that computes it."""
    cells = json.loads(notebook.read_text())["cells"]
    assert all(c.get("id") for c in cells), f"{notebook.name}: every cell needs an id"
    first = "".join(cells[0]["source"]) if cells[0]["cell_type"] == "markdown" else ""
    assert first.startswith("# "), f"{notebook.name}: the first cell is not a markdown title"
    assert re.search(r"^## What this page shows\s*$", first, re.M), f"{notebook.name}: no 'What this page shows'"
    headings = [line for c in cells if c["cell_type"] == "markdown" for line in "".join(c["source"]).splitlines()
                if line.startswith("## ")]
    assert headings[-1].strip() == "## Verdict", f"{notebook.name}: the last section is {headings[-1]!r}"
    verdict_at = max(i for i, c in enumerate(cells)
                     if c["cell_type"] == "markdown" and "## Verdict" in "".join(c["source"]))
    code_after = [c for c in cells[verdict_at + 1:] if c["cell_type"] == "code"]
    assert code_after, f"{notebook.name}: no code cell computes the verdict"
    assert not any(re.search(r"/(work|tmp|root|home)/", "".join(c["source"])) for c in cells), \
        f"{notebook.name}: an absolute path in the notebook's source"


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
def test_papermill_reads_every_parameter(notebook):
    """``papermill --help-notebook`` lists them all: a line it cannot parse (an ``=`` in its comment) drops that
    parameter from the listing, and papermill then calls the parameter unknown when it is passed."""
    papermill = pytest.importorskip("papermill")
    names = _assigned_names("".join(_parameters_cell(json.loads(notebook.read_text()))["source"]))
    assert set(papermill.inspect_notebook(str(notebook))) == names


#: Whole-number parameters checked otherwise than by count_param or seed_param.
OTHER_WHOLE_NUMBER_CHECKS = {"slide_count": {"check_slide_count"}}


def _setup_source(code_cells: list[dict]) -> str:
    """The setup cell (the code cell after the parameters) as Python: IPython's %-lines left out."""
    lines = [line for line in "".join(code_cells[1]["source"]).splitlines() if not line.lstrip().startswith("%")]
    return "\n".join(lines).replace("except ImportError:\n", "except ImportError:\n    pass\n")


def _checked_names(setup: str) -> dict[str, set[str]]:
    """Parameter name -> the checks whose result is assigned back to it in ``setup``: ``x = book.check(x, ...)``,
    also inside tuples (``a, b = check(a, ...), check(b, ...)``); a bare call (``check_slide_count(n, ...)``), too."""
    found: dict[str, set[str]] = {}

    def call(node, target=None):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if target is None or target == node.args[0].id:
                found.setdefault(node.args[0].id, set()).add(name)

    for node in ast.walk(ast.parse(setup)):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            if isinstance(target, ast.Name):
                call(value, target.id)
            elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
                for t, v in zip(target.elts, value.elts):
                    if isinstance(t, ast.Name):
                        call(v, t.id)
        elif isinstance(node, ast.Expr):
            call(node.value)
    return found


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_switch_and_count_is_checked_before_any_work(notebook):
    """A parameter whose default is True/False is reassigned ``book.flag_param``'s value (``-p flag false``
    arrives as the string "false", which an ``if`` read as True), and one whose default is a whole number
    ``count_param``'s or ``seed_param``'s (20.7 bags had been 20, seed -1 numpy's error after the training), in
    the setup cell, the first after the parameters (read as code: a comment naming the check does not count)."""
    cells = [c for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code"]
    assert "parameters" in cells[0]["metadata"].get("tags", [])
    checked = _checked_names(_setup_source(cells))
    unchecked = []
    for node in ast.parse("".join(cells[0]["source"])).body:
        name = node.targets[0].id
        try:
            default = ast.literal_eval(node.value)
        except ValueError:
            continue
        if isinstance(default, bool):
            checks = {"flag_param"}
        elif isinstance(default, int):
            checks = {"count_param", "seed_param"} | OTHER_WHOLE_NUMBER_CHECKS.get(name, set())
        else:
            continue
        if not checked.get(name, set()) & checks:
            unchecked.append(name)
    assert not unchecked, f"{notebook.name}: parameters not checked in the setup cell: {unchecked}"


def _run_setup(notebook: Path, tmp_path, **parameters) -> dict:
    """The notebook's parameters cell, then ``parameters`` (as papermill injects them), then its setup cell."""
    cells = [c for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code"]
    space: dict = {}
    exec("".join(cells[0]["source"]), space)
    space.update(out_dir=str(tmp_path / "out"), **parameters)
    import torch

    threads = torch.get_num_threads()  # a setup cell sets one thread: not for the rest of this test process
    try:
        exec(_setup_source(cells), space)
    finally:
        torch.set_num_threads(threads)
    return space


def test_setup_cells_refuse_an_empty_test_list_and_name_the_valid_settings(tmp_path):
    unit_tests = REPO / "notebooks" / "06_mil_unit_tests.ipynb"
    space = _run_setup(unit_tests, tmp_path, quick="false")
    assert space["quick"] is False and space["background_check"] is True
    # The test list is read in the cell after the setup: run it too (it had turned [] into all three tests).
    cells = [c for c in json.loads(unit_tests.read_text())["cells"] if c["cell_type"] == "code"]
    choose = "".join(cells[2]["source"])
    assert "test_names = book.as_choices(list(MIL_UNIT_TESTS) if tests is None else tests" in choose
    from minitorch_proto import book

    with pytest.raises(ValueError, match="parameter tests is empty"):
        book.as_choices([], "tests", ["single_concept"])
    with pytest.raises(ValueError, match=r"parameter settings: unknown \['d=4'\]; valid values are \['paper-faithful'"):
        _run_setup(REPO / "notebooks" / "03_ablations.ipynb", tmp_path, settings="d=4")
    with pytest.raises(ValueError, match="parameter background_check is True or False; got 'no'"):
        _run_setup(unit_tests, tmp_path, background_check="no")


def test_a_notebook_runs_from_the_repository_root_on_a_strangers_csv(tmp_path):
    """The notebooks do not depend on being started from notebooks/; page 07 runs on a CSV of one's own.

    The CSV has its own column names and text labels, and no held-out file: the page sets a
    stratified quarter of its bags aside (it used to read the example's held-out file, or fail).
    """
    pytest.importorskip("papermill")
    import pandas as pd

    from .conftest import make_concept_bags, notebook_output_text

    bags, y = make_concept_bags(n_bags=40, n_features=4, seed=2)
    pd.DataFrame([{"slide": f"S{i}", "tumour": ["no", "yes"][int(y[i])],
                   **{f"feat_{c}": v for c, v in zip("abcd", row)}} for i, bag in enumerate(bags) for row in bag]
                 ).to_csv(tmp_path / "slides.csv", index=False)
    notebook = REPO / "notebooks" / "07_your_own_data.ipynb"
    params = build_book.quick_parameters(notebook.stem, tmp_path / "data")
    params.update(csv_path=str(tmp_path / "slides.csv"), bag_col="slide", label_col="tumour",
                  pathology_methods="prototype-recommended,miles")  # as papermill -p hands a list over
    build_book.run_notebook(notebook, tmp_path / notebook.name, params, cwd=REPO)
    assert (tmp_path / "data" / notebook.stem / "my_model.safetensors").is_file()
    assert not (tmp_path / "data" / notebook.stem / "new_patients.csv").exists()
    text = "".join(notebook_output_text(c) for c in json.loads((tmp_path / notebook.name).read_text())["cells"])
    assert "held-out patients: 10," in text  # a quarter of the 40 bags
    rows = pd.read_csv(tmp_path / "data" / notebook.stem / "pathology_results.csv")
    assert sorted(set(rows["key"])) == ["miles", "prototype-recommended"]  # a comma list had run its first only
