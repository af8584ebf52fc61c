"""The command-line interface, run as a user would (a real subprocess for the entry point)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from minitorch_proto.cli import main

from .conftest import make_concept_bags


@pytest.mark.parametrize("command", ["reproduce", "cv", "train", "predict", "datasets"])
def test_every_subcommand_has_help(command, capsys):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    assert "usage: minitorch-proto " + command in capsys.readouterr().out


def test_console_script_runs():
    exe = [sys.executable, "-m", "minitorch_proto.cli", "--version"]
    out = subprocess.run(exe, capture_output=True, text=True, check=True)
    assert "minitorch-proto" in out.stdout


def test_reproduce_writes_results_for_musk1(shared_mil, tmp_path, capsys):
    out = tmp_path / "res"
    code = main(["reproduce", "--datasets", "musk1", "--repeats", "1", "--folds", "3", "--epochs", "2",
                 "--data-dir", str(shared_mil), "--out", str(out), "--quiet", "--compat", "official"])
    assert code == 0
    res = pd.read_csv(out / "results.csv")
    assert {"dataset", "method", "repeat", "fold", "accuracy", "auc", "evaluation"} <= set(res.columns)
    assert set(res.method) == {"prototype", "prototype (published code)"}
    assert len(res[res.evaluation == "final"]) == 6
    assert len(res[res.evaluation == "test_selected"]) == 3
    assert res.accuracy.between(0, 1).all()
    printed = capsys.readouterr().out
    assert "Prototype learning (paper, reported)" in printed and "0.908" in printed
    assert "test-fold selection: optimistic" in printed
    assert (out / "table2.txt").exists() and (out / "summary.csv").exists()


def test_unknown_dataset_is_a_clear_error(tmp_path, capsys):
    code = main(["reproduce", "--datasets", "mnist", "--out", str(tmp_path / "x"), "--quiet"])
    assert code == 2
    err = capsys.readouterr().err
    assert "mnist" in err and "musk1" in err
    assert not (tmp_path / "x" / "results.csv").exists()  # nothing half-written


def test_missing_files_offline_is_a_clear_error(tmp_path, capsys):
    code = main(["cv", "--dataset", "musk1", "--data-dir", str(tmp_path), "--no-download"])
    assert code == 2
    assert "Musk1.csv" in capsys.readouterr().err


def test_train_then_predict_on_a_users_csv(tmp_path, capsys):
    bags, y = make_concept_bags(n_bags=30, seed=0)
    rows = [dict(bag=f"b{i}", label=int(y[i]), **{f"f{j}": v for j, v in enumerate(inst)})
            for i, bag in enumerate(bags) for inst in bag]
    csv = tmp_path / "mine.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    model = tmp_path / "model.pt"
    assert main(["train", "--csv", str(csv), "--out", str(model), "--epochs", "30", "--prototypes", "8",
                 "--lr-prototypes", "0.03", "--lr-classifier", "0.03", "--device", "cpu"]) == 0
    preds = tmp_path / "pred.csv"
    assert main(["predict", "--model", str(model), "--csv", str(csv), "--out", str(preds)]) == 0
    p = pd.read_csv(preds)
    assert list(p.bag) == [f"b{i}" for i in range(30)]
    assert {"proba_0", "proba_1", "predicted"} <= set(p.columns)
    np.testing.assert_allclose(p.proba_0 + p.proba_1, 1, rtol=1e-6)
    assert (p.predicted == y).mean() > 0.8


def test_cv_command_on_a_users_csv(tmp_path, capsys):
    bags, y = make_concept_bags(n_bags=20, seed=0)
    rows = [dict(bag=i, label=int(y[i]), a=inst[0], b=inst[1], c=inst[2], d=inst[3])
            for i, bag in enumerate(bags) for inst in bag]
    csv = tmp_path / "mine.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    out = tmp_path / "cv.csv"
    assert main(["cv", "--csv", str(csv), "--repeats", "1", "--folds", "2", "--epochs", "2", "--out", str(out),
                 "--device", "cpu"]) == 0
    assert len(pd.read_csv(out)) == 2
