"""Baseline cross-validation under the two budgets: same models as one by one, no test-fold leakage."""
from __future__ import annotations

import numpy as np
import pytest

from minitorch_proto.baselines import BASELINES
from minitorch_proto.baselines import batched_fit as B
from minitorch_proto.evaluation import baseline_cv as BCV
from minitorch_proto.evaluation.cv import cross_validate_estimator, stratified_folds
from tests.conftest import make_concept_bags


@pytest.fixture
def small(monkeypatch):
    bags, y = make_concept_bags(n_bags=30, n_features=4, seed=3)
    folds = stratified_folds(y, n_repeats=1, n_folds=3, random_state=0)
    real = dict(BASELINES)

    def shrink(name):
        factory = real[name]
        return lambda seed=None: factory(seed).set_params(n_epochs=2, hidden_sizes=(8, 4))

    for name in ("attention", "MI_net_max"):
        monkeypatch.setitem(BASELINES, name, shrink(name))
    return bags, y, folds


@pytest.mark.parametrize("method", ["attention", "MI_net_max", "bag_stats"])
def test_defaults_match_the_one_by_one_runner(method, small, one_torch_thread):
    bags, y, folds = small
    got, choices = BCV.cross_validate_baseline(bags, y, folds, method, dataset="toy")
    ref = cross_validate_estimator(bags, y, folds, BASELINES[method], dataset="toy", method=method)
    assert choices.empty and list(got.method.unique()) == [method]
    np.testing.assert_allclose(got.accuracy, ref.accuracy)
    np.testing.assert_allclose(got.auc, ref.auc, atol=1e-6)


def test_common_budget_never_fits_or_scales_on_test_bags(small, monkeypatch, one_torch_thread):
    bags, y, folds = small
    # every bag recognisable by a marker column (no standardisation, so it survives)
    bags = [np.column_stack([b, np.full(len(b), i / 1000.0)]) for i, b in enumerate(bags)]
    seen = []
    real = B.fit_many

    def spy(estimator, train_sets, random_states, **kw):
        for tr, _ in train_sets:
            seen.append({int(round(float(b[0, -1]) * 1000.0)) for b in tr})
        return real(estimator, train_sets, random_states, **kw)

    monkeypatch.setattr(BCV, "fit_many", spy)
    res, choices = BCV.cross_validate_baseline(bags, y, folds, "bag_stats", budget="common",
                                              standardization="none")
    assert len(res) == len(folds) and len(choices) == len(folds)
    tests = [set(f.test.tolist()) for f in folds]
    # 3 candidates x 3 folds x 3 inner splits, then one final fit per fold
    assert len(seen) == 27 + 3
    for s in seen:
        assert any(not (s & t) for t in tests)
    assert res.method.iloc[0] == BCV.budget_label("bag_stats", "common")


def test_seed_ensemble_averages_its_members(small, one_torch_thread):
    bags, y, folds = small
    res, choices = BCV.cross_validate_baseline(bags, y, folds[:1], "attention", budget="common", n_seeds=2,
                                              grid=[{"lr": 5e-4}])
    f = folds[0]
    from minitorch_proto.preprocessing import BagStandardizer

    std = BagStandardizer("feature").fit([bags[i] for i in f.train])
    tr, te = std.transform([bags[i] for i in f.train]), std.transform([bags[i] for i in f.test])
    p = np.mean([BASELINES["attention"](s).set_params(lr=5e-4).fit(tr, y[f.train]).predict_proba(te)
                 for s in BCV.member_seeds(f.seed, 2)], axis=0)
    assert res.accuracy.iloc[0] == pytest.approx(np.mean(p.argmax(1) == y[f.test]))
    assert choices.lr.iloc[0] == 5e-4


def test_bad_arguments(small):
    bags, y, folds = small
    with pytest.raises(ValueError, match="Unknown baseline"):
        BCV.cross_validate_baseline(bags, y, folds, "nope")
    with pytest.raises(ValueError, match="budget"):
        BCV.cross_validate_baseline(bags, y, folds, "bag_stats", budget="huge")
