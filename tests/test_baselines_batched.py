"""The batched trainer of the neural baselines gives the same models as fitting them one by one."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from minitorch_proto.baselines import BASELINES, BagStatistics
from minitorch_proto.baselines import batched as B

NEURAL = ["attention", "gated_attention", "mi_net_max", "mi_net_mean", "MI_net_max", "MI_net_mean"]


def _sets(sizes_choice, n_bags=(12, 13, 11), seed=0):
    """Training sets of different lengths (as folds are), one per model."""
    rng = np.random.RandomState(seed)
    out = []
    for n in n_bags:
        bags = [rng.randn(int(rng.choice(sizes_choice)), 5) for _ in range(n)]
        y = np.arange(n) % 2
        for b, label in zip(bags, y):
            if label:
                b[0] += 2.0
        out.append((bags, y))
    return out


def _small(name):
    est = BASELINES[name](0).set_params(n_epochs=2, dtype="float64", hidden_sizes=(16, 8))
    if "attention" in name:
        est.set_params(attention_dim=4)
    return est


def _assert_same(single, batched):
    for (n1, p1), (n2, p2) in zip(single.network_.named_parameters(), batched.network_.named_parameters()):
        assert n1 == n2
        np.testing.assert_allclose(p1.detach().numpy(), p2.detach().numpy(), rtol=0, atol=1e-10, err_msg=n1)
    np.testing.assert_allclose(single.loss_curve_, batched.loss_curve_, rtol=0, atol=1e-10)


@pytest.mark.parametrize("name", NEURAL)
def test_batched_equals_single_model_fits(name, one_torch_thread):
    sets = _sets(sizes_choice=np.arange(1, 9))
    est = _small(name)
    seeds = [5, 6, 7]
    many = B.fit_many(est, sets, seeds)
    for (bags, y), seed, got in zip(sets, seeds, many):
        ref = type(est)(**{**est.get_params(), "random_state": seed}).fit(bags, y)
        _assert_same(ref, got)
        np.testing.assert_allclose(ref.decision_function(bags), got.decision_function(bags), atol=1e-10)


@pytest.mark.parametrize("name", ["attention", "mi_net_mean", "MI_net_max"])
def test_size_groups_give_the_same_models(name, one_torch_thread, monkeypatch):
    # Very unequal bag sizes and a cheap group make every step split into several groups.
    sets = _sets(sizes_choice=[1, 2, 30, 60], n_bags=(8, 9, 7, 8))
    calls = []
    real = B.plan_groups

    def spy(*args, **kwargs):
        groups = real(*args, **kwargs)
        calls.append(len(groups))
        return groups

    monkeypatch.setattr(B, "plan_groups", spy)
    est = _small(name).set_params(n_epochs=1)
    seeds = [1, 2, 3, 4]
    many = B.fit_many(est, sets, seeds, group_cost=1.0, model_cost=0.0)
    assert max(calls) > 1
    for (bags, y), seed, got in zip(sets, seeds, many):
        _assert_same(type(est)(**{**est.get_params(), "random_state": seed}).fit(bags, y), got)


def test_plan_groups_covers_every_model_once():
    rng = np.random.RandomState(0)
    for _ in range(20):
        sizes = rng.choice([1, 3, 40, 1000], size=30)
        groups = B.plan_groups(sizes, group_cost=64.0, model_cost=8.0)
        assert sorted(np.concatenate(groups).tolist()) == list(range(30))
        padded = sum(len(g) * sizes[g].max() for g in groups)
        assert padded <= 30 * sizes.max()
    assert [g.tolist() for g in B.plan_groups(np.array([4, 4, 5]), 64.0, 8.0)] == [[0, 1, 2]]


def test_per_model_settings_and_fallback(one_torch_thread):
    sets = _sets(sizes_choice=np.arange(1, 6), n_bags=(10, 10))
    est = _small("MI_net_mean")
    many = B.fit_many(est, sets, [0, 0], params=[{"lr": 1e-3}, {"lr": 1e-2}])
    assert [m.lr for m in many] == [1e-3, 1e-2]
    _assert_same(type(est)(**{**est.get_params(), "lr": 1e-2, "random_state": 0}).fit(*sets[1]), many[1])
    # Estimators that cannot be batched are fitted one after another, with the same result.
    stats = B.fit_many(BagStatistics(), sets, [0, 1])
    ref = BagStatistics(random_state=1).fit(*sets[1])
    np.testing.assert_allclose(stats[1].decision_function(sets[1][0]), ref.decision_function(sets[1][0]))
    # ... also in parallel processes
    parallel = B.fit_many(BagStatistics(), sets, [0, 1], n_jobs=2)
    np.testing.assert_allclose(parallel[1].decision_function(sets[1][0]), ref.decision_function(sets[1][0]))


def test_bad_input():
    sets = _sets(sizes_choice=[2, 3], n_bags=(6, 6))
    with pytest.raises(ValueError, match="differ in length"):
        B.fit_many(_small("attention"), sets, [1])
    with pytest.raises(ValueError, match="models_per_batch"):
        B.fit_many(_small("attention"), sets, [1, 2], models_per_batch=0)
    with pytest.raises(ValueError, match="dtype"):
        B.fit_many(_small("attention").set_params(dtype="float16"), sets, [1, 2])


def test_global_torch_rng_untouched(one_torch_thread):
    sets = _sets(sizes_choice=[2, 3], n_bags=(6, 6))
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    B.fit_many(_small("attention").set_params(n_epochs=1), sets, [1, 2])
    assert torch.equal(torch.rand(3), expected)
