"""The ablation page's table: paired changes against the baseline and their standard errors."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from minitorch_proto.evaluation import BASELINE, paired_deltas, select_ablations


def _rows(deltas_by_repeat):
    rows = []
    for rep, deltas in deltas_by_repeat.items():
        for fold, d in enumerate(deltas, 1):
            rows.append(dict(group="baseline", setting=BASELINE, dataset="musk1", repeat=rep, fold=fold, accuracy=0.5))
            rows.append(dict(group="g", setting="s", dataset="musk1", repeat=rep, fold=fold, accuracy=0.5 + d))
    return pd.DataFrame(rows)


def test_the_se_is_over_repetition_means_when_there_are_several():
    # Repetition means 0.1 and 0.3: SE 0.1. Over the four folds as if independent it would be 0.0645.
    out = paired_deltas(_rows({1: [0.0, 0.2], 2: [0.2, 0.4]})).set_index("setting")
    assert out.loc["s", "delta"] == pytest.approx(0.2) and out.loc["s", "n_folds"] == 4
    assert out.loc["s", "delta_se"] == pytest.approx(0.1)
    # One repetition: over its folds (the optimistic form the docstring names).
    one = paired_deltas(_rows({1: [0.0, 0.2, 0.4]})).set_index("setting")
    assert one.loc["s", "delta_se"] == pytest.approx(np.std([0.0, 0.2, 0.4], ddof=1) / np.sqrt(3))


def test_the_baseline_alone_is_refused_before_any_training():
    with pytest.raises(ValueError, match="names only the baseline"):
        select_ablations([BASELINE])
    with pytest.raises(ValueError, match="settings is empty"):
        select_ablations([])
    assert [a.setting for a in select_ablations(["lambda_w=0"])] == [BASELINE, "lambda_w=0"]


def test_a_fold_count_one_data_set_cannot_take_fails_before_any_training(monkeypatch):
    from types import SimpleNamespace

    from minitorch_proto.evaluation import ablations

    trained = []
    monkeypatch.setattr(ablations, "evaluate_tasks", lambda tasks, device=None: trained.append(tasks))
    rng = np.random.default_rng(0)
    big = SimpleNamespace(bags=[rng.normal(size=(3, 2)) for _ in range(20)], y=np.array([0, 1] * 10))
    small = SimpleNamespace(bags=big.bags[:6], y=big.y[:6])  # 3 bags a class: 5 folds cannot be stratified
    with pytest.raises(ValueError, match="fewer than n_folds=5"):
        ablations.run_ablations({"musk1": big, "fox": small}, select_ablations(["D=4"]), repeats=1, folds=5, epochs=1)
    assert trained == []  # Musk1's settings had trained first
