"""What a fit leaves behind: every fitted attribute from this fit, none from an earlier one, and
nothing at all when it fails; what a saved model brings back; the wrappers' seeds."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from minitorch_proto import PrototypeMILClassifier
from minitorch_proto.data.disk import DiskBagDataset, write_bag_folder
from minitorch_proto.meta_estimators import InnerCVSelection, SeedEnsemble

from .conftest import make_concept_bags


def _small(**params) -> PrototypeMILClassifier:
    return PrototypeMILClassifier(n_prototypes=4, epochs=3, device="cpu", **params)


@pytest.fixture(scope="module")
def data():
    return make_concept_bags(n_bags=24, seed=5)


def _fitted(est) -> set[str]:
    return {k for k in vars(est) if k.endswith("_") and not k.startswith("_")}


def test_a_refit_keeps_nothing_of_the_earlier_fit(data, tmp_path):
    bags, y = data
    clf = _small(push=True, init="kmeans++", head="logistic", n_seeds=2).fit(bags, y)
    assert {"prototype_sources_", "head_C_", "head_features_"} <= _fitted(clf)
    clf.set_params(push=False, head="gradient", n_seeds=1).fit(bags, y)
    # Exactly what a fresh estimator with these settings has: the pushed sources and the head's choices are gone.
    assert _fitted(clf) == _fitted(clone(clf).fit(bags, y))
    assert not {"prototype_sources_", "head_C_", "head_features_"} & _fitted(clf)
    path = clf.save(tmp_path / "m.safetensors")  # the file it writes loads (the stale sources made it invalid)
    np.testing.assert_array_equal(PrototypeMILClassifier.load(path).predict_proba(bags), clf.predict_proba(bags))


@pytest.mark.parametrize("how", ["bad random_state", "labels refused", "class_weight refused", "diverged"])
def test_a_failed_fit_leaves_the_estimator_unfitted(data, how):
    bags, y = data
    clf = _small().fit(bags, y)
    changes = {"bad random_state": dict(random_state=-1),
               "class_weight refused": dict(head="logistic", class_weight={0: 1.0, 7: 2.0}),
               "diverged": dict(lr_prototypes=1e30, lr_classifier=1e30, standardization="none")}.get(how, {})
    clf.set_params(**changes)
    y_new = np.where(y == 1, "p", "n") if how != "labels refused" else np.zeros(len(y))
    with pytest.raises(ValueError):
        clf.fit([b[:, :2] for b in bags] if how == "bad random_state" else bags, y_new)
    # Before, the new classes_ sat on the old model: predict gave the new labels from the old network.
    assert _fitted(clf) == set()
    with pytest.raises(NotFittedError):
        clf.predict(bags)


def test_streaming_fits_start_fresh_too(data):
    bags, y = data
    clf = _small(push=True, init="kmeans++").fit_streaming(bags, y)
    assert "prototype_sources_" in _fitted(clf)
    clf.set_params(push=False).fit_streaming(bags, y)
    assert "prototype_sources_" not in _fitted(clf)
    with pytest.raises(ValueError, match="class_weight"):
        clf.set_params(head="logistic", class_weight={0: 1.0, 9: 1.0}).fit_streaming(bags, y)
    assert _fitted(clf) == set()


@pytest.mark.parametrize("labels", ["ints", "bools", "strings"])
def test_a_saved_model_brings_back_its_parameters_and_fitted_attributes(data, tmp_path, labels):
    bags, y = data
    y = {"ints": y, "bools": y.astype(bool), "strings": np.where(y == 1, "pos", "neg")}[labels]
    classes = np.unique(y)
    weights = {classes[0]: 1.0, classes[1]: 2.5}
    clf = _small(head="logistic", class_weight=weights, n_seeds=2, random_state=3).fit(bags, y)
    loaded = PrototypeMILClassifier.load(clf.save(tmp_path / "m.safetensors"))
    # JSON keeps only text keys: {"0": 1.0} used to come back, and the loaded model could not be refitted.
    assert loaded.get_params() == clf.get_params()
    assert loaded.class_weight == weights and all(type(k) is type(c) for k, c in zip(loaded.class_weight,
                                                                                   classes.tolist()))
    for name in ("head_C_", "head_features_", "seed_", "histories_"):
        assert getattr(loaded, name) == getattr(clf, name), name
    assert loaded.member(1).head_C_ == clf.head_C_[1:]
    refit = clone(loaded).fit(bags, y)
    np.testing.assert_array_equal(refit.predict_proba(bags), clf.predict_proba(bags))


def test_write_bag_folder_refuses_what_its_reader_would_and_writes_nothing(data, tmp_path):
    bags, y = data
    cases = {
        "repeated id": (dict(bags=bags[:3], y=y[:3], bag_ids=["7", "7", "8"]), "repeats ['7']"),
        "empty bag": (dict(bags=[bags[0], bags[1][:0]], y=y[:2], bag_ids=None), "bags[1] is empty"),
        "NaN": (dict(bags=[bags[0], np.full_like(bags[1], np.nan)], y=y[:2], bag_ids=None), "NaN"),
        "missing label": (dict(bags=bags[:2], y=[1, None], bag_ids=None), "missing label"),
        "labels short": (dict(bags=bags[:3], y=y[:2], bag_ids=None), "3 bags but 2 labels"),
        "label read back as missing": (dict(bags=bags[:2], y=["NA", "1"], bag_ids=None), "'NA' would read back"),
        "labels one number": (dict(bags=bags[:3], y=["01", "1", "1"], bag_ids=None), "are the same number"),
        "labels one word": (dict(bags=bags[:3], y=["a", " a", "a"], bag_ids=None), "differ only in case"),
    }
    for name, (kwargs, words) in cases.items():
        root = tmp_path / name.replace(" ", "_")
        with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("]", r"\]")):
            write_bag_folder(root, **kwargs)
        assert not root.exists(), name  # checked before the folder is made: nothing half-written
    labels = write_bag_folder(tmp_path / "ok", bags[:4], y[:4], ["007", "7", "07", "x"])
    ds = DiskBagDataset(tmp_path / "ok", labels)
    assert list(ds.bag_ids) == ["007", "7", "07", "x"]
    named = write_bag_folder(tmp_path / "na", bags[:2], ["NA", "tumour"])  # among names, NA is a class
    assert sorted(DiskBagDataset(tmp_path / "na", named).y.tolist()) == ["NA", "tumour"]
    np.testing.assert_array_equal(ds[1], bags[1].astype(np.float32))


def test_wrappers_follow_scikit_learns_seeds_and_fitted_checks(data):
    bags, y = data
    ensemble = SeedEnsemble(_small(), n_seeds=2)
    with pytest.raises(NotFittedError):  # was an AttributeError on classes_
        ensemble.predict(bags)
    draws = [SeedEnsemble(_small(), 2, random_state=None).fit(bags, y).predict_proba(bags) for _ in range(2)]
    assert not np.array_equal(*draws)  # None drew 0 every time
    fixed = [SeedEnsemble(_small(), 2, random_state=np.random.RandomState(4)).fit(bags, y).predict_proba(bags)
             for _ in range(2)]
    np.testing.assert_array_equal(*fixed)  # a seeded generator repeats (it raised a TypeError)
    seven = SeedEnsemble(_small(), 2, random_state=7).fit(bags, y)
    assert [m.random_state for m in seven.estimators_] == [7, 10_007]
    grid = [{}, {"lambda_w": 0.1}]
    inner = [InnerCVSelection(_small(), grid, inner_folds=2, random_state=None).fit(bags, y) for _ in range(2)]
    assert not np.array_equal(inner[0].predict_proba(bags), inner[1].predict_proba(bags))


@pytest.mark.parametrize("kind", ["bag statistics", "MILES", "mi-SVM", "attention", "standardized", "ensemble",
                                  "inner CV"])
def test_a_failed_fit_of_a_baseline_or_wrapper_leaves_it_unfitted(data, kind):
    from minitorch_proto.baselines import MILES, MISVM, AttentionMIL, BagStatistics
    from minitorch_proto.meta_estimators import StandardizedMIL

    bags, y = data
    bad = {"bag statistics": (BagStatistics(), {"C": -1.0}), "MILES": (MILES(), {"C": -1.0}),
           "mi-SVM": (MISVM(), {"C": -1.0}), "attention": (AttentionMIL(n_epochs=1), {"n_epochs": 0}),
           "standardized": (StandardizedMIL(BagStatistics()), {"estimator__C": -1.0}),
           "ensemble": (SeedEnsemble(BagStatistics(), n_seeds=2), {"estimator__C": -1.0}),
           "inner CV": (InnerCVSelection(BagStatistics(), [{}], inner_folds=2), {"n_seeds": 0})}
    est, breaking = bad[kind]
    est.fit(bags, y)
    est.set_params(**breaking)
    with pytest.raises(ValueError):
        est.fit(bags, np.where(y == 1, "pos", "neg"))
    # Before, classes_ was already ["neg", "pos"] on the old model: predict answered in new labels.
    assert _fitted(est) == set()
    with pytest.raises(NotFittedError):
        est.predict(bags)


def test_wrappers_decide_like_scikit_learn_on_three_classes_and_name_a_wrong_feature_count(data):
    from minitorch_proto.baselines import BagStatistics
    from minitorch_proto.meta_estimators import StandardizedMIL

    bags, y = data
    three = np.arange(len(y)) % 3
    ensemble = SeedEnsemble(_small(), n_seeds=1).fit(bags, three)
    scores = ensemble.decision_function(bags)
    assert scores.shape == (len(bags), 3)  # was (n,): the last class's log-odds only
    np.testing.assert_array_equal(ensemble.classes_[scores.argmax(axis=1)], ensemble.predict(bags))
    two = SeedEnsemble(_small(), n_seeds=1).fit(bags, y)
    assert two.decision_function(bags).shape == (len(bags),)
    np.testing.assert_array_equal(two.decision_function(bags) > 0, two.predict(bags) == two.classes_[1])
    std = StandardizedMIL(BagStatistics()).fit(bags, y)
    with pytest.raises(ValueError, match="3 features but the model was fitted with 4"):  # was numpy's broadcast error
        std.predict_proba([b[:, :3] for b in bags])


def test_inner_cv_takes_a_scikit_learn_param_grid_and_refuses_what_it_cannot_read(data):
    bags, y = data
    as_dict = InnerCVSelection(_small(), {"lambda_w": [0.0, 0.1]}, inner_folds=2).fit(bags, y)
    as_list = InnerCVSelection(_small(), [{"lambda_w": 0.0}, {"lambda_w": 0.1}], inner_folds=2).fit(bags, y)
    assert as_dict.inner_scores_.shape == (2, 2)
    np.testing.assert_array_equal(as_dict.inner_scores_, as_list.inner_scores_)
    assert as_dict.best_params_ == as_list.best_params_
    as_array = InnerCVSelection(_small(), {"lambda_w": np.array([0.0, 0.1])}, inner_folds=2).fit(bags, y)
    np.testing.assert_array_equal(as_array.inner_scores_, as_list.inner_scores_)  # arrays are lists, as in sklearn
    with pytest.raises(ValueError, match="dict of lists"):
        InnerCVSelection(_small(), {"lambda_w": 0.1}, inner_folds=2).fit(bags, y)
    with pytest.raises(ValueError, match="n_seeds must be >= 1"):  # was one model, silently
        InnerCVSelection(_small(), [{}], inner_folds=2, n_seeds=0).fit(bags, y)
    with pytest.raises(ValueError, match="random_state"):  # was seeds [0, 1]
        _small().fit_seeds(bags, y, seeds=[0.7, 1.2])


def test_halving_search_draws_a_seed_for_none_and_decides_like_its_refit(data, monkeypatch):
    from minitorch_proto.evaluation import tuning

    seen = []

    def fake_search(pool, labels, index_sets, seeds, budget, **kwargs):  # the search itself is tested elsewhere
        seen.append(list(seeds))
        chosen = tuning.Candidate(distance="euclidean", lr_prototypes=1e-2, lr_classifier=1e-2, init="kmeans++",
                                  pooling=("min",), layer_norm=True, n_prototypes=4, epochs=2)
        return [tuning.SearchResult(chosen=chosen, inner_score=0.5, rungs=[], seconds=0.0) for _ in index_sets]

    monkeypatch.setattr(tuning, "search_many", fake_search)
    bags, y = data
    for _ in range(2):
        search = tuning.HalvingSearch(random_state=None).fit(bags, y)
    assert seen[0] != seen[1]  # None was always 0
    np.testing.assert_allclose(search.decision_function(bags), search.best_estimator_.decision_function(bags))


def test_an_unfitted_search_raises_not_fitted_and_a_wrong_budget_is_named(data):
    from minitorch_proto.evaluation.tuning import HalvingSearch
    from minitorch_proto.meta_estimators import InnerCVSelection

    bags, y = data
    with pytest.raises(NotFittedError):  # was an AttributeError on classes_
        HalvingSearch().predict(bags)
    with pytest.raises(ValueError, match="budget must be a SearchBudget"):
        HalvingSearch(budget={"inner_folds": 3}).fit(bags, y)
    with pytest.raises(ValueError, match="inner_folds must be >= 2"):  # it skipped tuning, blaming the data
        InnerCVSelection(_small(), [{"epochs": 1}, {"epochs": 2}], inner_folds=1).fit(bags, y)
