"""The batched trainer of the neural baselines gives the same models as fitting them one by one."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from minitorch_proto.baselines import BASELINES, BagStatistics
from minitorch_proto.baselines import batched_fit as B

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


@pytest.mark.parametrize("backend", ["tensor", "compiled"])
@pytest.mark.parametrize("name", NEURAL)
def test_batched_equals_single_model_fits(name, backend, one_torch_thread):
    # Bags of 1 to 12 instances: the compiled backend's small-bag loops and its BLAS path both run.
    sets = _sets(sizes_choice=np.arange(1, 13))
    est = _small(name)
    seeds = [5, 6, 7]
    many = B.fit_many(est, sets, seeds, backend=backend)
    for (bags, y), seed, got in zip(sets, seeds, many):
        ref = type(est)(**{**est.get_params(), "random_state": seed}).fit(bags, y)
        _assert_same(ref, got)
        np.testing.assert_allclose(ref.decision_function(bags), got.decision_function(bags), atol=1e-10)


@pytest.mark.parametrize("name", ["attention", "mi_net_mean", "MI_net_max", "mi_net_max"])
def test_overflow_runs_give_the_same_models(name, one_torch_thread, monkeypatch):
    # Very unequal bag sizes and cheap runs make many steps send long bags to overflow runs.
    sets = _sets(sizes_choice=[1, 2, 30, 60], n_bags=(8, 9, 7, 8))
    calls = []
    real = B.plan_step

    def spy(*args, **kwargs):
        k, groups = real(*args, **kwargs)
        calls.append(len(groups))
        return k, groups

    monkeypatch.setattr(B, "plan_step", spy)
    est = _small(name).set_params(n_epochs=1)
    seeds = [1, 2, 3, 4]
    many = B.fit_many(est, sets, seeds, group_cost=1.0, model_cost=0.0, backend="tensor")
    assert max(calls) == 2
    for (bags, y), seed, got in zip(sets, seeds, many):
        _assert_same(type(est)(**{**est.get_params(), "random_state": seed}).fit(bags, y), got)


@pytest.mark.parametrize("name,settings", [
    ("mi_net_max", dict(pooling="lse")),
    ("MI_net_max", dict(pooling="lse", optimizer="adam")),
    ("mi_net_mean", dict(dropout=0.0, lr_decay=0.0)),
    ("MI_net_mean", dict(nesterov=False, momentum=0.5)),
    ("MI_net_max", dict(momentum=0.0, nesterov=False)),
    ("attention", dict(dropout=0.0, hidden_sizes=(9,))),
    ("gated_attention", dict(weight_decay=0.0, hidden_sizes=(7, 5, 3))),
])
def test_compiled_backend_covers_every_option(name, settings, one_torch_thread):
    # Every pooling, optimiser branch and depth the kernels write out, on long and short bags.
    sets = _sets(sizes_choice=[1, 2, 5, 30], n_bags=(8, 9))
    est = _small(name).set_params(**settings)
    seeds = [3, 4]
    many = B.fit_many(est, sets, seeds, backend="compiled", n_jobs=2)
    for (bags, y), seed, got in zip(sets, seeds, many):
        _assert_same(type(est)(**{**est.get_params(), "random_state": seed}).fit(bags, y), got)


def test_compiled_backend_float32_and_threads(one_torch_thread):
    sets = _sets(sizes_choice=np.arange(1, 13))
    est = _small("gated_attention").set_params(dtype="float32")
    one = B.fit_many(est, sets, [5, 6, 7], backend="compiled", n_jobs=1)
    two = B.fit_many(est, sets, [5, 6, 7], backend="compiled", n_jobs=2)
    # the last two models again, beside another model in another order
    other = B.fit_many(est, [sets[2], sets[0], sets[1]], [7, 1, 6], backend="compiled")
    for a, b in [*zip(one, two), (one[1], other[2]), (one[2], other[0])]:
        # models are independent: thread count and company change nothing, bit for bit
        for p1, p2 in zip(a.network_.parameters(), b.network_.parameters()):
            assert torch.equal(p1, p2)
    for a, (bags, y), seed in zip(one, sets, [5, 6, 7]):
        ref = type(est)(**{**est.get_params(), "random_state": seed}).fit(bags, y)
        for p1, p2 in zip(ref.network_.parameters(), a.network_.parameters()):
            np.testing.assert_allclose(p1.detach().numpy(), p2.detach().numpy(), rtol=0, atol=1e-5)


def test_plan_step_sends_every_long_bag_to_one_overflow_run():
    rng = np.random.RandomState(0)
    n_split = 0
    for _ in range(50):
        sizes = rng.choice([1, 3, 40, 1000], size=30)
        k, groups = B.plan_step(sizes, model_cost=48.0, group_cost=64.0)
        over = np.concatenate(groups) if groups else np.array([], dtype=int)
        assert len(set(over.tolist())) == len(over) <= 30 and len(groups) <= 2
        assert np.all(sizes[sizes > k] == sizes[np.isin(np.arange(30), over) & (sizes > k)])
        assert set(np.flatnonzero(sizes > k)) <= set(over.tolist())
        padded = 30 * k + sum(len(g) * sizes[g].max() for g in groups)
        assert padded <= 30 * sizes.max()
        n_split += bool(groups)
    assert n_split > 40  # one bag of 1000 among small ones is worth its own run
    assert B.plan_step(np.array([4, 4, 5]), 48.0, 64.0) == (5, [])


def test_whole_epoch_dropout_draw_equals_per_bag_draws():
    # fit_many draws a model's dropout masks for a whole epoch at once on the CPU; that is only
    # right if bernoulli_ consumes the generator element by element.
    for dtype in (torch.float32, torch.float64):
        sizes = [3, 1, 40, 7, 1044]
        gen = torch.Generator().manual_seed(7)
        parts = [torch.empty((k, 64), dtype=dtype).bernoulli_(0.5, generator=gen) for k in sizes]
        after = torch.rand(2, generator=gen)
        gen = torch.Generator().manual_seed(7)
        whole = torch.zeros((sum(sizes) + 5, 64), dtype=dtype)
        whole[: sum(sizes)].bernoulli_(0.5, generator=gen)
        assert torch.equal(torch.cat(parts), whole[: sum(sizes)])
        assert torch.equal(torch.rand(2, generator=gen), after)


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
    with pytest.raises(ValueError, match="backend must be"):
        B.fit_many(_small("attention"), sets, [1, 2], backend="numba")
    with pytest.raises(ValueError, match="does not cover"):
        B.fit_many(_small("attention").set_params(hidden_sizes=()), sets, [1, 2], backend="compiled")


def test_compiled_backend_refuses_a_gpu(monkeypatch):
    # What a CUDA machine would see, without one: the compiled kernels are CPU code.
    monkeypatch.setattr(B, "resolve_device", lambda device: torch.device("cuda"))
    sets = _sets(sizes_choice=[2, 3], n_bags=(6, 6))
    with pytest.raises(ValueError, match="trains on the CPU"):
        B.fit_many(_small("attention"), sets, [1, 2], backend="compiled")


def test_global_torch_rng_untouched(one_torch_thread):
    sets = _sets(sizes_choice=[2, 3], n_bags=(6, 6))
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    B.fit_many(_small("attention").set_params(n_epochs=1), sets, [1, 2])
    assert torch.equal(torch.rand(3), expected)


def test_cross_validate_batches_a_bare_baseline_into_the_models_fit_would_give(one_torch_thread, monkeypatch):
    from sklearn.base import clone

    from minitorch_proto.evaluation import cross_validate, stratified_folds

    programs = []
    real = B._fit_group
    monkeypatch.setattr(B, "_fit_group", lambda ests, *a: programs.append(len(ests)) or real(ests, *a))
    bags, y = _sets(sizes_choice=np.arange(1, 9), n_bags=(24,))[0]
    folds = stratified_folds(y, n_repeats=1, n_folds=3)
    est = _small("attention")
    _, fitted = cross_validate(est, bags, y, folds, return_estimators=True)
    assert programs == [3]  # the three folds in one batched program (they were fitted one after another)
    for fold, got in zip(folds, fitted):
        ref = clone(est).set_params(random_state=fold.seed).fit([bags[i] for i in fold.train], y[fold.train])
        _assert_same(ref, got)
    with pytest.raises(ValueError, match="one random state per training set"):
        est.fit_many([(bags, y)])
