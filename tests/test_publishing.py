"""The book lives in its ecosystem: one repository address, a publish workflow that runs the
README's commands, and frozen tables shipped as package data with their provenance."""
from __future__ import annotations

import fnmatch
import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from minitorch_proto.about import PIP_INSTALL, REPOSITORY
from minitorch_proto.book import frozen
from minitorch_proto.evaluation.ablations import ABLATIONS, DELTA_COLUMNS
from minitorch_proto.evaluation.cv import RESULT_COLUMNS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / ".github" / "workflows" / "book.yml"


# --------------------------------------------------------------------------------------
# One repository address
# --------------------------------------------------------------------------------------
def _install_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if re.search(r"\bpip install\b.*git\+", line)]


def test_config_names_the_repository_of_the_package():
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    assert config["repository"]["url"] == REPOSITORY
    assert config["launch_buttons"]["colab_url"] and config["launch_buttons"]["binderhub_url"]


@pytest.mark.parametrize("notebook", sorted((REPO / "notebooks").glob("*.ipynb")), ids=lambda p: p.stem)
def test_notebook_install_cell_uses_the_repository(notebook):
    nb = json.loads(notebook.read_text())
    source = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    lines = _install_lines(source)
    assert lines, f"{notebook.name}: no install cell (pip install git+...) for Colab"
    for line in lines:
        assert f'"{PIP_INSTALL}"' in line, f"{notebook.name}: install line does not use {PIP_INSTALL}: {line.strip()}"


@pytest.mark.parametrize("page", ["README.md", "book/intro.md"])
def test_prose_install_instructions_use_the_repository(page):
    lines = _install_lines((REPO / page).read_text())
    assert lines, f"{page} does not say how to install from the repository"
    for line in lines:
        assert PIP_INSTALL in line, f"{page}: {line.strip()}"


def test_no_other_project_address_is_written_anywhere():
    owner_repo = "/".join(REPOSITORY.rstrip("/").split("/")[-2:])
    pattern = re.compile(r"github\.com/(minitorch[-_]proto/[A-Za-z0-9_.-]+)")
    files = [REPO / "README.md", REPO / "_config.yml", *REPO.glob("book/*.md"), *REPO.glob("notebooks/*.ipynb")]
    for path in files:
        for found in pattern.findall(path.read_text()):
            assert found.removesuffix(".git") == owner_repo, f"{path.name} names {found}, not {owner_repo}"


# --------------------------------------------------------------------------------------
# The publish workflow runs what the README tells a user to run
# --------------------------------------------------------------------------------------
def readme_commands() -> list[str]:
    """The commands of the README's Quickstart block (comments stripped)."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Quickstart", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "README: no bash block under Quickstart"
    commands = [line.split("#", 1)[0].strip() for line in block.group(1).splitlines()]
    return [c for c in commands if c]


def test_workflow_parses_and_calls_the_readme_commands():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as True
    assert "push" in triggers and "pull_request" in triggers
    steps = [step for job in workflow["jobs"].values() for step in job.get("steps", [])]
    runs = [step["run"].strip() for step in steps if "run" in step]
    commands = readme_commands()
    assert {"make test", "make book"} <= set(commands), commands
    for command in commands:
        assert command in runs, f"the workflow does not run the README's {command!r} (it runs {runs})"
    assert runs.index("make test") < runs.index("make book")
    uses = [step["uses"].split("@")[0] for step in steps if "uses" in step]
    for action in ("actions/checkout", "actions/configure-pages", "actions/upload-pages-artifact",
                   "actions/deploy-pages"):
        assert action in uses, f"the workflow does not use {action}"
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-pages-artifact"))
    assert upload["with"]["path"] == "_build/html"
    deploy = workflow["jobs"]["deploy"]
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["needs"] == "build"


def test_ci_entry_point_runs_the_readme_test_command():
    assert "make test" in (REPO / ".ci" / "run").read_text()
    assert "make test" in readme_commands()


# --------------------------------------------------------------------------------------
# Frozen tables: package data, provenance, and the columns and methods the code produces
# --------------------------------------------------------------------------------------
def test_frozen_tables_ship_as_package_data():
    names = frozen.frozen_names()
    assert {"measured_results", "ablation_deltas_5datasets"} <= set(names), names
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["minitorch_proto"]
    for name in names:
        for suffix in (".csv", ".json"):
            rel = f"book/frozen_tables/{name}{suffix}"
            assert any(fnmatch.fnmatch(rel, p) for p in patterns), f"{rel} is not package data ({patterns})"


@pytest.mark.parametrize("name", frozen.frozen_names())
def test_frozen_table_names_its_command_and_code_version(name):
    record = frozen.provenance(name)
    words = [w for w in record["command"].split() if not re.fullmatch(r"[A-Z_]+=\S*", w)]  # env settings
    assert not re.search(r"(?<![\w.:/-])/(work|tmp|root|home)/", record["command"]), \
        f"{name}: the command names a path of this machine (pages print it): {record['command']}"
    assert words[0] in {"minitorch-proto", "papermill", ".venv/bin/papermill", "python",
                                            ".venv/bin/python", ".venv/bin/minitorch-proto"}, record["command"]
    assert re.fullmatch(r"[0-9a-f]{7,40}(\+dirty)?", record["commit"]), record["commit"]
    table = frozen.load_frozen(name)  # checks its columns, rows and text against the record
    assert record["columns"] == list(table.columns) and record["n_rows"] == len(table) > 0
    assert re.fullmatch(r"[0-9a-f]{64}", record["sha256"])


def test_frozen_measured_results_have_the_columns_and_methods_of_the_code():
    from minitorch_proto.baselines import BASELINES
    from minitorch_proto.methods import PROTOTYPE, PROTOTYPE_COMPAT, PROTOTYPE_TUNED

    table = frozen.load_frozen("measured_results")
    assert list(table.columns) == list(RESULT_COLUMNS)
    produced = {PROTOTYPE, PROTOTYPE_COMPAT, PROTOTYPE_TUNED, *BASELINES}
    assert set(table["method"]) <= produced, set(table["method"]) - produced
    assert set(table["evaluation"]) <= {"final", "test_selected"}


def test_every_frozen_prototype_row_is_below_the_papers_table_2_as_page_02_says():
    # Page 02's prose ("stays below ... on every data set ..., and so does every other row") is
    # typed: it holds for the frozen table only while this does.
    from minitorch_proto.paper import PAPER_TABLE2

    table = frozen.load_frozen("measured_results")
    rows = table[table["method"].str.startswith("prototype")]
    means = rows.groupby(["method", "evaluation", "dataset"])["accuracy"].mean()
    assert len(means) >= 4 * len(PAPER_TABLE2)
    for (method, evaluation, dataset), value in means.items():
        assert value < PAPER_TABLE2[dataset][0], (method, evaluation, dataset, value)


def test_the_monotone_pages_typed_comparison_holds_for_the_frozen_tables():
    # book/monotone.md types "below the paper-faithful model on four of the five data sets (level
    # on Fox) ... on Tiger and Elephant it loses 16 and 9 points": true only while this holds.
    measured, monotone = frozen.load_frozen("measured_results"), frozen.load_frozen("monotone_results")
    paper = measured[(measured["method"] == "prototype") & (measured["evaluation"] == "final")]
    gap = (monotone.groupby("dataset")["accuracy"].mean() - paper.groupby("dataset")["accuracy"].mean()).round(2)
    assert abs(gap["fox"]) <= 0.01 and all(gap[d] < -0.01 for d in ("musk1", "musk2", "tiger", "elephant"))
    assert (gap["tiger"], gap["elephant"]) == (-0.16, -0.09)
    # "... AUC ... higher than the paper-faithful model's on Musk2 and Fox, lower on the other three".
    auc = (monotone.groupby("dataset")["auc"].mean() - paper.groupby("dataset")["auc"].mean())
    assert {d for d in auc.index if auc[d] > 0} == {"musk2", "fox"}


def test_frozen_ablation_deltas_have_the_columns_and_settings_of_the_code():
    table = frozen.load_frozen("ablation_deltas_5datasets")
    assert list(table.columns) == list(DELTA_COLUMNS)
    settings = {(a.group, a.setting) for a in ABLATIONS}
    found = set(zip(table["group"], table["setting"]))
    assert found <= settings, found - settings


def test_write_frozen_round_trip(tmp_path, monkeypatch):
    monkeypatch.setattr(frozen, "code_version", lambda: "abc1234")  # as in a checkout (a git archive has none)
    df = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    path = frozen.write_frozen(df, "demo", command="minitorch-proto demo", description="a demo", folder=tmp_path)
    monkeypatch.setattr(frozen, "frozen_dir", lambda: tmp_path)
    back = frozen.load_frozen("demo")
    pd.testing.assert_frame_equal(back, df)
    assert back.attrs["provenance"]["command"] == "minitorch-proto demo"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.csv", "demo.json"] == sorted(
        [path.name, "demo.json"])
    with pytest.raises(FileNotFoundError, match="no frozen table"):
        frozen.load_frozen("missing")
    with pytest.raises(ValueError, match="command"):
        frozen.write_frozen(df, "demo", command=" ", description="x", folder=tmp_path)
    # Into the package, only from committed code: "+dirty" names a version no reader can check out.
    monkeypatch.setattr(frozen, "code_version", lambda: "abc1234+dirty")
    with pytest.raises(ValueError, match=r"uncommitted changes \(abc1234\+dirty\).*commit, then freeze"):
        frozen.write_frozen(df, "demo2", command="c", description="d")
    assert not (tmp_path / "demo2.csv").exists()
    frozen.write_frozen(df, "demo3", command="c", description="d", commit="def5678")  # a run made elsewhere
    assert "at code version `def5678`." in frozen.provenance_note(frozen.load_frozen("demo3"))
    old = {**back.attrs["provenance"], "commit": "abc1234+dirty"}
    assert "`abc1234` with uncommitted changes" in frozen.provenance_note(old)


def test_a_frozen_table_is_read_only_as_it_was_frozen(tmp_path, monkeypatch):
    monkeypatch.setattr(frozen, "frozen_dir", lambda: tmp_path)
    df = pd.DataFrame({"dataset": ["musk1", "fox", "tiger"], "auc": [0.9, 0.6, 0.8]})
    frozen.write_frozen(df, "t", command="minitorch-proto demo", description="d", folder=tmp_path, commit="abc1234")
    csv = tmp_path / "t.csv"
    good = csv.read_text()
    csv.write_text(good.replace("\n", "\r\n"))  # a checkout's line endings are no change
    pd.testing.assert_frame_equal(frozen.load_frozen("t"), df)
    # Cut short (a half-written copy had loaded, and a ranking silently lost its rows), edited by hand, or
    # with its columns renamed: each refused, naming the table.
    for text in (good[: good.index("tiger")], good.replace("0.6", "0.7"), good.replace("auc", "accuracy")):
        csv.write_text(text)
        with pytest.raises(ValueError, match="frozen table 't' is not the table its provenance describes"):
            frozen.load_frozen("t")
    record = json.loads((tmp_path / "t.json").read_text())
    for key, message in (("sha256", "has 2 rows; its provenance records 3"), ("columns", "has columns")):
        csv.write_text(good[: good.index("tiger")] if key == "sha256" else good.replace("auc", "accuracy"))
        (tmp_path / "t.json").write_text(json.dumps({k: v for k, v in record.items() if k != "sha256"}))
        with pytest.raises(ValueError, match=message):
            frozen.load_frozen("t")
    # A commit that is no git hash (a tree that is no checkout) is refused, and nothing is written.
    for commit in ("minitorch_proto 0.1.0 (not a git checkout)", "unknown"):
        with pytest.raises(ValueError, match="is not a code version"):
            frozen.write_frozen(df, "u", command="c", description="d", folder=tmp_path, commit=commit)
    assert not (tmp_path / "u.csv").exists()
    # A provenance value JSON cannot hold: neither file is written (the CSV had been, under the old JSON).
    csv.write_text(good)
    (tmp_path / "t.json").write_text(json.dumps(record))
    with pytest.raises(TypeError):
        frozen.write_frozen(df.iloc[:1], "t", command="c", description="d", folder=tmp_path, commit="abc1234",
                            n=np.int64(3))
    pd.testing.assert_frame_equal(frozen.load_frozen("t"), df)


# --------------------------------------------------------------------------------------
# The API page
API_PAGE = REPO / "book" / "api.md"
_DIRECTIVE = re.compile(r"^\.\. auto(?:function|class):: (\S+)\n(?:   :members: (.+)\n)?", re.M)


def api_entries() -> list[tuple[str, list[str]]]:
    """(dotted target, its listed members) for every autodoc directive of book/api.md."""
    return [(m.group(1), [s.strip() for s in (m.group(2) or "").split(",") if s.strip()])
            for m in _DIRECTIVE.finditer(API_PAGE.read_text())]


def test_the_api_page_documents_real_objects_with_docstrings():
    # autodoc renders an entry without a docstring as a bare signature, and a member it cannot find as nothing.
    import importlib
    import inspect

    entries = api_entries()
    assert len(entries) >= 20 and '"book/api"' in json.dumps(yaml.safe_load((REPO / "_toc.yml").read_text()))
    for target, members in entries:
        module, _, name = target.rpartition(".")
        obj = getattr(importlib.import_module(module), name)
        assert inspect.getdoc(obj), f"{target} has no docstring"
        for member in members:
            assert (inspect.getdoc(getattr(obj, member)) or "").strip(), f"{target}.{member} has no docstring"


def test_every_public_method_of_the_estimator_is_on_the_api_page():
    from minitorch_proto.estimator import PrototypeMILClassifier

    listed = dict(api_entries())["minitorch_proto.PrototypeMILClassifier"]
    # set_*_request methods are scikit-learn's metadata routing, documented there.
    public = [n for n in vars(PrototypeMILClassifier) if not n.startswith("_") and not n.endswith("_request")
              and callable(getattr(PrototypeMILClassifier, n))]
    assert sorted(public) == sorted(listed)
