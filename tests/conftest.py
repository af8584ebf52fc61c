"""Shared fixtures: small bag problems made here, and the shared benchmark folder when present."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
SHARED_MIL = Path(os.environ.get("MINITORCH_PROTO_DATA", REPO.parent / "shared" / "data" / "mil"))


def make_concept_bags(n_bags=40, n_features=4, seed=0, shift=3.0, min_size=2, max_size=8):
    """Positive bags hold one instance shifted towards a concept point; negatives don't."""
    rng = np.random.default_rng(seed)
    bags, y = [], []
    for i in range(n_bags):
        k = int(rng.integers(min_size, max_size + 1))
        bag = rng.normal(size=(k, n_features))
        label = i % 2
        if label:
            bag[rng.integers(k)] += shift
        bags.append(bag)
        y.append(label)
    return bags, np.array(y)


@pytest.fixture
def concept_bags():
    return make_concept_bags()


@pytest.fixture
def shared_mil():
    if not (SHARED_MIL / "Musk1.csv").exists():
        pytest.skip("../shared/data/mil is not present")
    return SHARED_MIL


@pytest.fixture(autouse=True)
def _seed_torch():
    torch.manual_seed(0)


@pytest.fixture
def one_torch_thread():
    """One torch thread for the test (restored after): tiny models run faster and repeatably so."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def assert_predictions_match(predictions, results):
    """predictions.csv holds each fold's test bags once, and its scores give results.csv's figures back."""
    import pandas as pd

    from minitorch_proto.evaluation.metrics import scores_from_proba

    keys = ["dataset", "method", "evaluation", "repeat", "fold"]
    proba_columns = [c for c in predictions.columns if c.startswith("proba_")]
    assert len(proba_columns) >= 2
    assert np.allclose(predictions[proba_columns].sum(axis=1), 1.0)
    groups = dict(list(predictions.groupby(keys)))
    assert len(groups) == len(results)
    for _, row in results.iterrows():
        rows = groups[tuple(row[k] for k in keys)]
        assert len(rows) == row.n_test and not rows.bag.duplicated().any()
        classes = [c[len("proba_"):] for c in proba_columns]
        y = pd.Categorical(rows.label.astype(str), categories=classes).codes
        acc, auc = scores_from_proba(y, rows[proba_columns].to_numpy())
        assert np.isclose(acc, row.accuracy) and (np.isclose(auc, row.auc) or np.isnan(row.auc))
        assert np.isclose(acc, (rows.label.astype(str) == rows.predicted.astype(str)).mean())
    # each repetition tests every bag exactly once
    per_repeat = predictions.groupby(["dataset", "method", "evaluation", "repeat"]).bag.agg(
        lambda b: b.duplicated().any())
    assert not per_repeat.any()


def notebook_output_text(cell: dict) -> str:
    """The text a notebook cell shows: its streams and its plain, HTML and Markdown values."""
    parts = []
    for output in cell.get("outputs", []):
        parts.append("".join(output.get("text", "")))
        for mime in ("text/plain", "text/html", "text/markdown"):
            parts.append("".join(output.get("data", {}).get(mime, "")))
    return "\n".join(parts)
