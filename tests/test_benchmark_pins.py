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
    for name in ("recommended_ablation", "recommended_lodo"):
        sys.modules.pop(name, None)


def test_the_ablation_reruns_the_recipe_its_frozen_table_holds(bench):
    ablation, lodo = bench("recommended_ablation"), bench("recommended_lodo")
    assert lodo.jsonable(ablation.ABLATED) == provenance("recommended_ablation")["recommended"]
    assert set(ablation.DATASETS) == {"musk1", "musk2", "fox", "tiger", "elephant"}

