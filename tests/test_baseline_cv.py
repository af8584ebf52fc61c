"""The baselines under the two budgets, through the registry and the one cross-validation:
same models as fitted one by one, no test-fold leakage."""
from __future__ import annotations

import numpy as np
import pytest

from minitorch_proto.baselines import BASELINES
from minitorch_proto.baselines import batched_fit as B
from minitorch_proto.evaluation import baseline_cv as BCV
from minitorch_proto.evaluation.cv import cross_validate, stratified_folds
from minitorch_proto.meta_estimators import InnerCVSelection, StandardizedMIL
from minitorch_proto.methods import make
from minitorch_proto.preprocessing import BagStandardizer
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
    got = cross_validate(make(method), bags, y, folds, dataset="toy", method=method)
    assert list(got.method.unique()) == [method]
    for fold, (_, row) in zip(folds, got.iterrows()):
        # One by one: standardise on the fold's training bags, fit the fold-seeded baseline, score.
        std = BagStandardizer("feature").fit([bags[i] for i in fold.train])
        est = BASELINES[method](fold.seed).fit(std.transform([bags[i] for i in fold.train]), y[fold.train])
        p = est.predict_proba(std.transform([bags[i] for i in fold.test]))
        assert row.accuracy == pytest.approx(np.mean(p.argmax(1) == y[fold.test]))


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

    monkeypatch.setattr(B, "fit_many", spy)  # what every baseline's fit_many hook calls
    grid = [{f"estimator__{k}": v for k, v in c.items()} for c in BCV.GRIDS["bag_stats"]]
    est = InnerCVSelection(StandardizedMIL(BASELINES["bag_stats"](0), "none"), grid, inner_folds=3)
    res, fitted = cross_validate(est, bags, y, folds, method=BCV.budget_label("bag_stats", "common"),
                                 return_estimators=True)
    assert len(res) == len(folds) and all(e.best_params_ in grid for e in fitted)
    tests = [set(f.test.tolist()) for f in folds]
    # 3 candidates x 3 folds x 3 inner splits, then one final fit per fold
    assert len(seen) == 27 + 3
    for s in seen:
        assert any(not (s & t) for t in tests)
    assert res.method.iloc[0] == BCV.budget_label("bag_stats", "common")


@pytest.mark.parametrize("method", ["bag_stats", "attention", "prototype"])
def test_every_fold_is_standardised_on_its_own_training_bags(method, small, one_torch_thread):
    """Scores alone cannot see a scaler fitted across folds (every fold of this toy set scores 1.0): the fitted
    estimators' statistics are compared with those of each fold's training instances."""
    bags, y, folds = small
    bags = [b * (1 + 5 * (i % 3)) + i for i, b in enumerate(bags)]  # bags far apart: any other pool moves the mean
    estimator = make(method).set_params(epochs=2, n_prototypes=3) if method == "prototype" else make(method)
    _, fitted = cross_validate(estimator, bags, y, folds, return_estimators=True)
    for fold, est in zip(folds, fitted):
        train = np.concatenate([bags[i] for i in fold.train])
        std = est.standardizer_
        np.testing.assert_allclose(std.mean_, train.mean(0), rtol=1e-10)
        np.testing.assert_allclose(std.scale_, train.std(0), rtol=1e-10)


def test_seed_ensemble_averages_its_members(small, one_torch_thread):
    bags, y, folds = small
    est = InnerCVSelection(StandardizedMIL(BASELINES["attention"](0)), [{"estimator__lr": 5e-4}], n_seeds=2)
    res, fitted = cross_validate(est, bags, y, folds[:1], return_estimators=True)
    f = folds[0]
    std = BagStandardizer("feature").fit([bags[i] for i in f.train])
    tr, te = std.transform([bags[i] for i in f.train]), std.transform([bags[i] for i in f.test])
    p = np.mean([BASELINES["attention"](s).set_params(lr=5e-4).fit(tr, y[f.train]).predict_proba(te)
                 for s in BCV.member_seeds(f.seed, 2)], axis=0)
    assert res.accuracy.iloc[0] == pytest.approx(np.mean(p.argmax(1) == y[f.test]))
    assert fitted[0].best_params_ == {"estimator__lr": 5e-4}


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        make("nope")
    with pytest.raises(ValueError, match="budget"):
        make("bag_stats", budget="huge")


def test_the_common_budget_on_a_class_of_one_or_two_bags():
    import warnings

    from minitorch_proto.meta_estimators import InnerCVSelection
    from minitorch_proto.methods import make

    bags, y = make_concept_bags(n_bags=12, seed=2)
    y = np.zeros(12, dtype=int)
    y[:1] = 1  # one positive bag: no inner split can hold it on both sides
    est = make("miles", 0, budget="common")
    with pytest.warns(RuntimeWarning, match="smaller class has 1 bag"):
        est.fit(bags, y)  # a "1 distinct class" error from an inner fit before
    sel = next(e for e in _walk(est) if isinstance(e, InnerCVSelection))
    assert sel.best_params_ == {} and np.isnan(sel.inner_scores_).all()
    assert est.predict_proba(bags).shape == (12, 2)
    top = InnerCVSelection(StandardizedMIL(BASELINES["bag_stats"](0), "none"), [{}, {}], top_k=2)
    with pytest.warns(RuntimeWarning, match="smaller class has 1 bag"):
        top.fit(bags, y)
    assert len(top.estimators_) == 1 and top.selected_params_ == [{}]  # one refit, not top_k copies of it
    y[:2] = 1  # two: two inner splits, each with one positive bag to fit and one to score
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # scikit-learn's "least populated class" warning before
        est = make("miles", 0, budget="common").fit(bags, y)
    sel = next(e for e in _walk(est) if isinstance(e, InnerCVSelection))
    assert len(sel._inner_splits(y, 0)) == 2 and sel.best_params_ in [dict(c) for c in sel.grid]


def _walk(est):
    """The estimator and every estimator it wraps."""
    yield est
    for name in ("estimator", "best_estimator_"):
        inner = getattr(est, name, None)
        if inner is not None and inner is not est:
            yield from _walk(inner)
