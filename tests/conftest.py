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
