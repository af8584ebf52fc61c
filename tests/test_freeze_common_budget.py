"""``benchmarks/freeze_common_budget.py``: appends finished common-budget runs to the frozen table,
with each run's commit and wall time, and refuses what would replace or corrupt rows."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest

from minitorch_proto.book import frozen

REPO = Path(__file__).resolve().parents[1]
NAME = "baseline_common_budget"


COLUMNS = ["dataset", "method", "evaluation", "repeat", "fold", "seed", "n_train", "n_test", "epoch", "accuracy",
           "auc", "fit_seconds"]
LABEL = "attention (5-seed ensemble, tuned on inner CV)"


def _rows(label, dataset, n=50):
    return [dict.fromkeys(COLUMNS, 0) | {"dataset": dataset, "method": label, "evaluation": "final",
                                          "repeat": 1 + i // 10, "fold": 1 + i % 10, "accuracy": 0.5 + i / 1000}
            for i in range(n)]


@pytest.fixture()
def script(tmp_path, monkeypatch):
    """The script, reading and writing a small table in ``tmp_path/frozen`` (attention on Musk1 only)."""
    folder = tmp_path / "frozen"
    frozen.write_frozen(pd.DataFrame(_rows(LABEL, "musk1")), NAME, command="minitorch-proto reproduce",
                        description="attention on musk1", folder=folder, commit="1234567",
                        row_commits={f"{LABEL} musk1": "1234567"}, wall_seconds_one_core={})
    monkeypatch.setattr(frozen, "frozen_dir", lambda: folder)
    spec = importlib.util.spec_from_file_location("freeze_common_budget", REPO / "benchmarks" / "freeze_common_budget.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(tmp_path, method="attention", label=LABEL, dataset="tiger", n=50, name="run", commit=None):
    """A fake reproduce output folder: ``n`` final rows and one inner row, timings and (given ``commit``) run.json."""
    out = tmp_path / name
    out.mkdir()
    if commit is not None:
        (out / "run.json").write_text(json.dumps({"command": "reproduce", "commit": commit}))
    rows = _rows(label, dataset, n)
    rows.append(rows[0] | {"evaluation": "inner"})
    pd.DataFrame(rows).to_csv(out / "results.csv", index=False)
    pd.DataFrame([{"method": method, "datasets": dataset, "wall_seconds": 123.45}]).to_csv(out / "timings.csv",
                                                                                            index=False)
    return out


def test_appends_the_final_rows_with_their_commit_and_wall_time(script, tmp_path, capsys):
    before = frozen.load_frozen(NAME)
    label = LABEL
    assert script.main([str(_run(tmp_path)), "--commit", "abc1234", "--cpu-seconds", "99.94", "--freeze"]) == 0
    after = frozen.load_frozen(NAME)
    assert len(after) == len(before) + 50  # the inner row is not a result
    pd.testing.assert_frame_equal(after.iloc[: len(before)], before)  # earlier rows untouched, in order
    meta = frozen.provenance(NAME)
    assert meta["row_commits"][f"{label} tiger"] == "abc1234"
    assert meta["wall_seconds_one_core"]["attention tiger"] == 123.5
    assert meta["cpu_seconds_one_core"] == {"attention tiger": 99.9}
    assert meta["commit"] == "1234567"  # the table's first code; row_commits names each row's
    assert meta["row_commits"][f"{label} musk1"] == "1234567"
    covered, missing = meta["description"].split("Covered: ")[1].rstrip(".").split(". Not covered: ")
    assert f"{label}: musk1, tiger" in covered.split("; ")
    assert missing.split("; ") == [f"{label}: musk2, fox, elephant"]


def test_the_commit_comes_from_the_runs_own_record(script, tmp_path):
    runs = [_run(tmp_path, commit="fedcba9"), _run(tmp_path, dataset="fox", name="run2", commit="7654321")]
    assert script.main([*map(str, runs), "--freeze"]) == 0
    commits = frozen.provenance(NAME)["row_commits"]
    assert commits[f"{LABEL} tiger"] == "fedcba9" and commits[f"{LABEL} fox"] == "7654321"


def test_without_freeze_nothing_is_written(script, tmp_path):
    before = (tmp_path / "frozen" / f"{NAME}.csv").read_bytes()
    assert script.main([str(_run(tmp_path)), "--commit", "abc1234"]) == 0
    assert (tmp_path / "frozen" / f"{NAME}.csv").read_bytes() == before


@pytest.mark.parametrize("case, message", [
    ("duplicate", "refusing to replace"),
    ("short", "has 49 folds"),
    ("defaults", "no common-budget rows"),
    ("empty", "no results.csv"),
    ("commit", "plain git commit hash"),
    ("dirty", "plain git commit hash"),
    ("unrecorded", "no run.json"),
    ("cpu", "one value per run"),
])
def test_bad_input_exits_2_and_writes_nothing(script, tmp_path, capsys, case, message):
    files = {s: (tmp_path / "frozen" / f"{NAME}{s}").read_bytes() for s in (".csv", ".json")}
    commit = "abc1234"
    if case == "duplicate":  # already frozen
        run = _run(tmp_path, dataset="musk1")
    elif case == "short":
        run = _run(tmp_path, n=49)
    elif case == "defaults":
        run = _run(tmp_path, label="attention")
    elif case == "empty":
        run = tmp_path / "nothing"
        run.mkdir()
    elif case == "commit":
        run, commit = _run(tmp_path), "HEAD~1"
    elif case == "dirty":
        run, commit = _run(tmp_path, commit="abc1234+dirty"), None
    elif case == "unrecorded":
        run, commit = _run(tmp_path), None
    else:
        run = _run(tmp_path)
    extra = ["--cpu-seconds", "1", "2"] if case == "cpu" else []
    with pytest.raises(SystemExit) as err:
        script.main([str(run), *(["--commit", commit] if commit else []), *extra, "--freeze"])
    assert err.value.code == 2
    assert message in capsys.readouterr().err
    assert {s: (tmp_path / "frozen" / f"{NAME}{s}").read_bytes() for s in files} == files
