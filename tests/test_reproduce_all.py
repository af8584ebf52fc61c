"""``benchmarks/reproduce_all.py``: the frozen table ``measured_results`` keeps exactly ``methods.MEASURED``,
even from a ``reproduce --methods all`` folder that holds more rows (the recommended and monotone rows have
tables of their own)."""
from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from minitorch_proto import methods
from minitorch_proto.book import frozen

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture()
def script(tmp_path, monkeypatch):
    folder = tmp_path / "frozen"
    folder.mkdir()
    for suffix in (".csv", ".json"):
        shutil.copy(frozen.frozen_dir() / f"measured_results{suffix}", folder)
    monkeypatch.setattr(frozen, "frozen_dir", lambda: folder)
    spec = importlib.util.spec_from_file_location("reproduce_all", REPO / "benchmarks" / "reproduce_all.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _folder(tmp_path, labels):
    out = tmp_path / "run"
    out.mkdir()
    real = frozen.load_frozen("measured_results")
    rows = [real[real["method"] == "prototype"].assign(method=label) for label in labels]
    pd.concat(rows).to_csv(out / "results.csv", index=False)
    pd.DataFrame([{"method": label, "datasets": "musk1", "wall_seconds": 10.0} for label in labels]).to_csv(
        out / "timings.csv", index=False)
    return out


def test_a_run_of_every_method_freezes_only_the_tables_rows(script, tmp_path, capsys):
    measured = [methods.get(key).label for key in methods.MEASURED]
    extra = [methods.get("prototype-recommended").label, methods.get("prototype-monotone").label]
    out = _folder(tmp_path, measured + extra)
    assert script.main(["--from", str(out), "--commit", "abc1234", "--freeze"]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [r["method"] for r in printed["rows"]] == measured
    table = frozen.load_frozen("measured_results")
    assert set(table["method"]) == set(measured)
    assert frozen.provenance("measured_results")["commit"] == "abc1234"


def test_a_folder_without_the_tables_methods_is_refused(script, tmp_path, capsys):
    out = _folder(tmp_path, [methods.get("prototype-recommended").label])
    before = frozen.provenance("measured_results")["commit"]
    with pytest.raises(SystemExit) as exc:
        script.main(["--from", str(out), "--freeze"])
    assert exc.value.code == 2
    assert "holds none of the table's methods" in capsys.readouterr().err
    assert frozen.provenance("measured_results")["commit"] == before  # untouched


def test_a_commit_may_be_given_short_and_a_run_outside_a_checkout_named_by_it(script, tmp_path, capsys):
    measured = [methods.get(key).label for key in methods.MEASURED]
    out = _folder(tmp_path, measured)
    # run.json holds 12 hex digits, a note 7: the same commit (the documented command had been refused).
    (out / "run.json").write_text(json.dumps({"commit": "abc1234def56"}))
    assert script.main(["--from", str(out), "--commit", "abc1234", "--freeze"]) == 0
    assert frozen.provenance("measured_results")["commit"] == "abc1234def56"
    with pytest.raises(SystemExit) as exit_:
        script.main(["--from", str(out), "--commit", "1234567", "--freeze"])
    assert exit_.value.code == 2 and "contradicts" in capsys.readouterr().err
    (out / "run.json").write_text(json.dumps({"commit": "minitorch_proto 0.1.0 (not a git checkout)"}))
    assert script.main(["--from", str(out), "--commit", "def5678", "--freeze"]) == 0
    assert frozen.provenance("measured_results")["commit"] == "def5678"
