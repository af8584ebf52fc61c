"""Benchmark scripts that re-measure a frozen table must still describe the recipe that table holds.

A script that builds its model from a moving default (``RECOMMENDED``) re-measures another model
under the frozen table's labels when rerun; these tests pin the recipes to the tables' provenance.
"""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from minitorch_proto.book import provenance

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    yield lambda name: importlib.import_module(name)
    for name in ("recommended_ablation", "recommended_lodo", "evidence_auc", "script_args"):
        sys.modules.pop(name, None)


def test_the_ablation_reruns_the_recipe_its_frozen_table_holds(bench):
    ablation, lodo = bench("recommended_ablation"), bench("recommended_lodo")
    assert lodo.jsonable(ablation.ABLATED) == provenance("recommended_ablation")["recommended"]
    assert set(ablation.FIVE) == {"musk1", "musk2", "fox", "tiger", "elephant"}



def test_the_mnist_bar_medians_come_from_the_frozen_table_with_a_repeatable_interval(bench):
    import numpy as np

    from minitorch_proto.book import load_frozen

    evidence = bench("evidence_auc")
    x = [0.1, 0.5, 0.7, 0.9, 0.3]
    low, high = evidence.median_interval(x)
    assert (low, high) == evidence.median_interval(x) and low <= np.median(x) <= high
    assert min(x) <= low < high <= max(x) and evidence.median_interval([0.4] * 6) == (0.4, 0.4)
    table = evidence.frozen_medians()
    frozen = load_frozen("mnist_evidence")
    row = table[(table["model"] == "recommended") & (table["target"] == 9)].iloc[0]
    part = frozen[(frozen["model"] == "recommended") & (frozen["target"] == 9)]
    assert row["median_bag_auc"] == part["bag_auc"].median() and row["seeds"] == len(part)
    assert row["interval_low"] <= row["median_bag_auc"] <= row["interval_high"]


def test_a_frozen_tables_recorded_seeds_are_the_seeds_its_rows_hold(bench):
    args = bench("script_args")
    assert args.seed_text([3, 0, 1, 2, 2]) == "0-3" and args.seed_text([0, 3, 7]) == "0,3,7"
    assert args.seed_text([4]) == "4"
    for seeds in ([0, 1, 2, 3], [0, 3, 7], [4]):
        assert args.seed_list(args.seed_text(seeds)) == seeds  # the recorded option reads back
