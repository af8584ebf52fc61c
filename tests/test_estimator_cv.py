"""The scikit-learn contract, input errors, and cross-validation without leakage."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from sklearn.base import BaseEstimator

from minitorch_proto.evaluation.cv import (
    CVTask,
    Fold,
    cross_validate,
    evaluate_tasks,
    split_file_folds,
    stratified_folds,
    summarize,
)
from minitorch_proto.estimator import PrototypeMILClassifier, load_model
from minitorch_proto.model import PrototypeMILConfig
from minitorch_proto.training import TrainConfig

from .conftest import assert_predictions_match, make_concept_bags

FAST = dict(n_prototypes=8, epochs=40, lr_prototypes=3e-2, lr_classifier=3e-2, device="cpu")


def test_learns_a_concept_and_generalises():
    bags, y = make_concept_bags(n_bags=60, seed=0)
    test_bags, test_y = make_concept_bags(n_bags=60, seed=1)
    clf = PrototypeMILClassifier(**FAST, random_state=0).fit(bags, y)
    assert clf.score(test_bags, test_y) >= 0.85


def test_sklearn_contract_and_label_mapping():
    bags, y = make_concept_bags(n_bags=30, seed=0)
    labels = np.where(y == 1, "pos", "neg")
    clf = PrototypeMILClassifier(**FAST, random_state=3)
    twin = clone(clf)
    assert twin.get_params() == clf.get_params()
    clf.set_params(epochs=20)
    assert clf.epochs == 20
    clf.fit(bags, labels)
    assert list(clf.classes_) == ["neg", "pos"]
    proba = clf.predict_proba(bags)
    assert proba.shape == (30, 2)
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-6)
    pred = clf.predict(bags)
    assert set(pred) <= {"neg", "pos"}
    assert np.array_equal(pred, np.where(proba[:, 1] > 0.5, "pos", "neg"))
    dec = clf.decision_function(bags)
    np.testing.assert_allclose(1 / (1 + np.exp(-dec)), proba[:, 1], rtol=1e-5)
    assert clf.transform(bags).shape == (30, 8)


def test_same_seed_same_model_different_seed_different_model():
    bags, y = make_concept_bags(n_bags=20, seed=0)
    a = PrototypeMILClassifier(**FAST, random_state=1).fit(bags, y).predict_proba(bags)
    b = PrototypeMILClassifier(**FAST, random_state=1).fit(bags, y).predict_proba(bags)
    c = PrototypeMILClassifier(**FAST, random_state=2).fit(bags, y).predict_proba(bags)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_save_and_load_round_trip(tmp_path):
    bags, y = make_concept_bags(n_bags=20, seed=0)
    clf = PrototypeMILClassifier(**FAST, pooling=("min", "max")).fit(bags, y)
    path = clf.save(tmp_path / "sub" / "model.pt")
    again = load_model(path)
    np.testing.assert_array_equal(again.predict_proba(bags), clf.predict_proba(bags))
    assert again.get_params() == clf.get_params()
    assert [p.name for p in path.parent.iterdir()] == ["model.pt"]  # no temporary file left
    with pytest.raises(FileNotFoundError):
        load_model(tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    from minitorch_proto.serialization import ModelFileError

    with pytest.raises(ModelFileError, match="junk.pt is damaged or not a minitorch_proto model file"):
        load_model(tmp_path / "junk.pt")


@pytest.mark.parametrize(
    "bags, y, match",
    [
        ([np.ones((2, 3)), np.ones((0, 3))], [0, 1], "empty"),
        ([np.ones((2, 3)), np.ones((2, 4))], [0, 1], "features"),
        ([np.ones((2, 3)), np.array([[1.0, np.nan, 0.0]])], [0, 1], "NaN"),
        ([np.ones((2, 3)), np.array([[1.0, np.inf, 0.0]])], [0, 1], "infinite"),
        ([np.ones((2, 3)), np.ones((2, 3))], [1, 1], "class"),
        ([np.ones((2, 3)), np.ones((2, 3))], [0, 1, 1], "labels"),
        ([np.ones((2, 3, 1)), np.ones((2, 3, 1))], [0, 1], "2-D"),
        ([], [], "empty"),
        ([np.ones((2, 3)), np.ones((2, 3))], [0.5, 1.0], "class labels"),
    ],
)
def test_bad_input_is_named(bags, y, match):
    with pytest.raises(ValueError, match=match):
        PrototypeMILClassifier(**FAST).fit(bags, y)


def test_predict_checks_feature_count_and_fitting():
    from sklearn.exceptions import NotFittedError

    bags, y = make_concept_bags(n_bags=10, seed=0)
    with pytest.raises(NotFittedError):
        PrototypeMILClassifier().predict(bags)
    clf = PrototypeMILClassifier(**{**FAST, "epochs": 1}).fit(bags, y)
    with pytest.raises(ValueError, match="fitted with 4"):
        clf.predict([np.ones((2, 5))])


def test_bad_hyper_parameters_fail_before_training():
    bags, y = make_concept_bags(n_bags=10, seed=0)
    with pytest.raises(ValueError, match="pooling"):
        PrototypeMILClassifier(pooling=("median",)).fit(bags, y)
    with pytest.raises(ValueError, match="lr_prototypes"):
        PrototypeMILClassifier(lr_prototypes=-1).fit(bags, y)


# ------------------------------------------------------------------ folds
def test_stratified_folds_are_disjoint_stratified_and_deterministic():
    y = np.array([0] * 45 + [1] * 47)
    folds = stratified_folds(y, n_repeats=5, n_folds=10, random_state=0)
    assert len(folds) == 50
    for r in range(1, 6):
        rep = [f for f in folds if f.repeat == r]
        tests = np.concatenate([f.test for f in rep])
        assert sorted(tests.tolist()) == list(range(92))  # every bag tested exactly once per repetition
        for f in rep:
            assert np.intersect1d(f.train, f.test).size == 0
            assert abs(y[f.test].mean() - y.mean()) < 0.15
    again = stratified_folds(y, n_repeats=5, n_folds=10, random_state=0)
    assert all(np.array_equal(a.test, b.test) for a, b in zip(folds, again))
    assert not np.array_equal(folds[0].test, folds[10].test)  # repetitions differ
    assert len({f.seed for f in folds}) == 50
    with pytest.raises(ValueError, match="two classes"):
        stratified_folds(np.zeros(20), 1, 2)
    with pytest.raises(ValueError, match="fewer than n_folds"):
        stratified_folds(np.array([0] * 20 + [1] * 3), 1, 5)


def test_different_seeds_share_no_partition_and_seed_0_is_as_frozen():
    from sklearn.model_selection import StratifiedKFold

    y = np.array([0] * 45 + [1] * 47)

    def partitions(folds):
        return {tuple(sorted(tuple(sorted(f.test.tolist())) for f in folds if f.repeat == r))
                for r in {f.repeat for f in folds}}

    # Every frozen table used seed 0: its folds are StratifiedKFold's with seeds 0..4, unchanged.
    zero = stratified_folds(y, 5, 10, random_state=0)
    first = next(StratifiedKFold(10, shuffle=True, random_state=4).split(np.zeros(92), y))[1]
    assert np.array_equal(zero[40].test, first) and [f.split_seed for f in zero[::10]] == [0, 1, 2, 3, 4]
    # Before, --seed 1 reused four of seed 0's five partitions (shuffle seed random_state + r).
    runs = [partitions(stratified_folds(y, 5, 10, random_state=s)) for s in range(4)]
    assert all(len(runs[a] & runs[b]) == 0 for a in range(4) for b in range(a + 1, 4))
    assert stratified_folds(y, 1, 10, random_state=3)[0].split_seed == 3  # one repetition: as before


def test_split_file_folds_from_the_authors_files(shared_mil):
    from minitorch_proto.data import load_benchmark, read_split_files

    data = load_benchmark("elephant", data_dir=shared_mil)
    folds = split_file_folds(data.bag_ids, read_split_files(shared_mil / "folds", "Elephant"))
    assert len(folds) == 10
    assert sorted(np.concatenate([f.test for f in folds]).tolist()) == list(range(200))
    for f in folds:
        assert len(f.test) == 20 and data.y[f.test].sum() == 10
        assert len(f.train) == 180
    with pytest.raises(ValueError, match="not in the data"):
        split_file_folds(data.bag_ids, {(1, 1): np.array([9999])})


# ----------------------------------------------------------------- leakage
class RecordingEstimator(BaseEstimator):
    """Remembers exactly which bags reached fit; predicts the training prior."""

    seen: list = []

    def __init__(self, random_state=0):
        self.random_state = random_state

    def fit(self, bags, y):
        RecordingEstimator.seen.append([b.copy() for b in bags])
        self.classes_ = np.unique(y)
        self.p_ = float(np.mean(y))
        return self

    def predict_proba(self, bags):
        return np.tile([1 - self.p_, self.p_], (len(bags), 1))


def test_estimator_cv_never_shows_test_bags_to_fit_or_standardisation():
    bags, y = make_concept_bags(n_bags=20, seed=0)
    folds = stratified_folds(y, n_repeats=1, n_folds=4)
    # Make test bags of fold 0 wildly different: if they leaked into the
    # standardisation, the training bags' statistics would move.
    marked = [b.copy() for b in bags]
    for i in folds[0].test:
        marked[i] = marked[i] + 1e6
    RecordingEstimator.seen = []
    from minitorch_proto.meta_estimators import StandardizedMIL

    cross_validate(StandardizedMIL(RecordingEstimator()), marked, y, folds[:1])
    seen = RecordingEstimator.seen[0]
    assert len(seen) == len(folds[0].train)
    X = np.concatenate(seen)
    np.testing.assert_allclose(X.mean(0), 0, atol=1e-9)  # standardised with training bags only
    np.testing.assert_allclose(X.std(0), 1, atol=1e-9)


def test_batched_cv_standardises_on_training_bags_only():
    from minitorch_proto.training import train_batched

    bags, y = make_concept_bags(n_bags=20, seed=0)
    folds = stratified_folds(y, n_repeats=1, n_folds=4)
    fit = train_batched(bags, y, [f.train for f in folds], [f.seed for f in folds],
                        PrototypeMILConfig(n_prototypes=3), TrainConfig(epochs=1), device="cpu")
    for f, std in zip(folds, fit.standardizers):
        train_X = np.concatenate([bags[i] for i in f.train])
        np.testing.assert_allclose(std.mean_, train_X.mean(0))
        all_X = np.concatenate(bags)
        assert not np.allclose(std.mean_, all_X.mean(0))


def test_prototype_cv_rows_and_honest_default():
    bags, y = make_concept_bags(n_bags=40, seed=0)
    folds = stratified_folds(y, n_repeats=2, n_folds=4)
    names = np.array(["neg", "pos"])
    task = CVTask("toy", bags, y, folds, PrototypeMILConfig(n_prototypes=8),
                  TrainConfig(epochs=30, lr_prototypes=3e-2, lr_classifier=3e-2), classes=names)
    res, pred = evaluate_tasks([task], evaluations=("final", "test_selected"), device="cpu",
                               return_predictions=True)
    assert len(res) == 16
    assert_predictions_match(pred, res)  # the selected epoch's probabilities under "test_selected"
    final = res[res.evaluation == "final"]
    assert (final.epoch == 30).all()  # the model evaluated is the last one, never test-chosen
    sel = res[res.evaluation == "test_selected"]
    assert set(sel.epoch) <= {5, 10, 15, 20, 25, 30}
    assert (sel.auc.values >= final.auc.values - 1e-12).all()  # selection can only flatter
    assert final.accuracy.mean() > 0.7
    # The same models scored through the estimator and predict_proba: the one cross-validation.
    est = PrototypeMILClassifier(n_prototypes=8, epochs=30, lr_prototypes=3e-2, lr_classifier=3e-2, device="cpu")
    via_estimator, via_pred, fitted = cross_validate(est, bags, names[y], folds, dataset="toy",
                                                     return_predictions=True, return_estimators=True)
    assert len(fitted) == len(folds) and set(via_pred.label) == {"neg", "pos"}
    assert (via_estimator.epoch == 30).all()  # the estimator's last epoch, as evaluate_tasks' rows (it was empty)
    final_pred = pred[pred.evaluation == "final"]
    np.testing.assert_array_equal(via_pred.bag, final_pred.bag)  # positions: no ids given
    np.testing.assert_allclose(via_pred.proba_pos, final_pred.proba_pos, atol=1e-5)  # float32 engines
    np.testing.assert_allclose(via_estimator.accuracy, final.accuracy)
    np.testing.assert_allclose(via_estimator.auc, final.auc, atol=1e-6)
    with pytest.raises(ValueError, match="Unknown evaluation"):
        evaluate_tasks([task], evaluations=("best",))


def test_summary_spreads_by_hand():
    res = pd.DataFrame({
        "dataset": "d", "method": "m", "evaluation": "final",
        "repeat": [1, 1, 2, 2], "fold": [1, 2, 1, 2], "accuracy": [0.5, 0.7, 0.9, 1.0],
        "auc": [0.6, 0.6, 0.8, 0.8], "fit_seconds": 1.0,
    })
    s = summarize(res).iloc[0]
    assert s.accuracy_mean == pytest.approx(0.775)
    assert s.accuracy_std_folds == pytest.approx(np.std([0.5, 0.7, 0.9, 1.0], ddof=1))
    assert s.accuracy_se_repeats == pytest.approx(np.std([0.6, 0.95], ddof=1) / np.sqrt(2))
    assert s.n_folds == 4 and s.n_repeats == 2
    assert s.fit_seconds_total == 4.0 and "fit_seconds" not in s  # a sum of per-fold shares, named as one


def test_training_data_sets_together_equals_training_them_apart():
    import torch

    a_bags, a_y = make_concept_bags(n_bags=20, seed=0)
    b_bags, b_y = make_concept_bags(n_bags=24, seed=1, shift=2.0)
    mconf = PrototypeMILConfig(n_prototypes=4)
    tasks = [
        CVTask("a", a_bags, a_y, stratified_folds(a_y, 1, 4), mconf, TrainConfig(epochs=3, lr_prototypes=1e-2, lr_classifier=2e-2)),
        CVTask("b", b_bags, b_y, stratified_folds(b_y, 1, 3), mconf, TrainConfig(epochs=3, lr_prototypes=5e-3, lr_classifier=1e-2)),
    ]
    together = evaluate_tasks(tasks, device="cpu", dtype=torch.float64)
    apart = pd.concat([evaluate_tasks([t], device="cpu", dtype=torch.float64) for t in tasks], ignore_index=True)
    cols = ["dataset", "repeat", "fold", "n_train", "accuracy", "auc"]
    pd.testing.assert_frame_equal(together[cols].reset_index(drop=True), apart[cols].reset_index(drop=True),
                                  check_exact=False, rtol=1e-9)
    assert list(together.dataset.unique()) == ["a", "b"]


def test_tasks_with_other_labels_or_class_counts_score_as_alone():
    import torch

    bags, y = make_concept_bags(n_bags=24, seed=2)
    three = make_concept_bags(n_bags=24, seed=3)[0]
    y3 = np.arange(24) % 3
    mconf, tconf = PrototypeMILConfig(n_prototypes=4), TrainConfig(epochs=2, lr_prototypes=1e-2, lr_classifier=1e-2)
    folds = stratified_folds(y, 1, 3)
    cols = ["accuracy", "auc"]
    alone = evaluate_tasks([CVTask("a", bags, y, folds, mconf, tconf)], device="cpu", dtype=torch.float64)
    # -1/+1 labels: -1 had been read as the last class (accuracy inverted)
    signed = evaluate_tasks([CVTask("a", bags, 2 * y - 1, folds, mconf, tconf)], device="cpu", dtype=torch.float64)
    np.testing.assert_allclose(signed[cols].to_numpy(), alone[cols].to_numpy())
    # beside a three-class task of the same width: it had been trained as three classes
    mixed, pred = evaluate_tasks([CVTask("a", bags, y, folds, mconf, tconf),
                                  CVTask("t", three, y3, stratified_folds(y3, 1, 3), mconf, tconf)],
                                 device="cpu", dtype=torch.float64, return_predictions=True)
    np.testing.assert_allclose(mixed[mixed.dataset == "a"][cols].to_numpy(), alone[cols].to_numpy())
    assert set(pred[pred.dataset == "a"]["label"]) == {0, 1}
    # folds that test bags they train on are refused
    leaky = [Fold(repeat=1, fold=1, train=np.arange(24), test=np.arange(6), seed=0)]
    with pytest.raises(ValueError, match="must be disjoint"):
        cross_validate(PrototypeMILClassifier(epochs=1), bags, y, leaky)


def test_tuning_uses_inner_splits_only_and_picks_the_better_rate():
    from minitorch_proto.meta_estimators import InnerCVSelection

    bags, y = make_concept_bags(n_bags=40, seed=0)
    folds = stratified_folds(y, 1, 4)
    base = PrototypeMILClassifier(n_prototypes=8, epochs=15, device="cpu")
    grid = [dict(lr_prototypes=1e-7, lr_classifier=1e-7), dict(lr_prototypes=3e-2, lr_classifier=3e-2)]
    sel = InnerCVSelection(base, grid, inner_folds=2, scoring="auc")
    res, fitted = cross_validate(sel, bags, y, folds, return_estimators=True)
    assert len(res) == 4
    assert all(e.best_params_["lr_prototypes"] == 3e-2 for e in fitted)  # a rate that learns beats one that cannot move
    assert all(e.inner_scores_[1, 1] > e.inner_scores_[0, 1] for e in fitted)

    # Poison the test bags of fold 0: if any of them reached tuning, its inner scores would change.
    marked = [b.copy() for b in bags]
    for i in folds[0].test:
        marked[i] = marked[i] * 0 + 1e3
    _, fitted2 = cross_validate(sel, marked, y, folds[:1], return_estimators=True)
    np.testing.assert_allclose(fitted2[0].inner_scores_, fitted[0].inner_scores_)


@pytest.mark.parametrize("init", ["kmeans++", "instances"])
def test_save_and_load_data_driven_initialisations(tmp_path, init):
    bags, y = make_concept_bags(n_bags=20, seed=0)
    clf = PrototypeMILClassifier(**{**FAST, "epochs": 3}, init=init).fit(bags, y)
    again = load_model(clf.save(tmp_path / "m.pt"))
    np.testing.assert_array_equal(again.predict_proba(bags), clf.predict_proba(bags))
    assert again.model_.config.init == init


def test_fit_seeds_trains_several_seeds_together_and_equals_separate_fits():
    bags, y = make_concept_bags(n_bags=24, seed=0)
    base = PrototypeMILClassifier(**{**FAST, "epochs": 5})
    many = base.fit_seeds(bags, y, [1, 2, 3])
    assert not hasattr(base, "model_")  # the template itself stays unfitted
    assert [m.random_state for m in many] == [1, 2, 3]
    for seed, est in zip([1, 2, 3], many):
        single = clone(base).set_params(random_state=seed).fit(bags, y)
        np.testing.assert_allclose(est.predict_proba(bags), single.predict_proba(bags), rtol=1e-5, atol=1e-6)
        assert len(est.history_) == 5
    assert not np.allclose(many[0].predict_proba(bags), many[1].predict_proba(bags))
    with pytest.raises(ValueError, match="seeds"):
        base.fit_seeds(bags, y, [])


@pytest.mark.parametrize("backend", ["tensor", "compiled"])
def test_estimator_matches_the_sequential_reference_trainer(backend):
    import torch

    from minitorch_proto.model import PrototypeMIL
    from minitorch_proto.preprocessing import BagStandardizer
    from minitorch_proto.training import train_model

    bags, y = make_concept_bags(n_bags=20, seed=4)
    clf = PrototypeMILClassifier(**{**FAST, "epochs": 4}, random_state=9, backend=backend).fit(bags, y)
    st = BagStandardizer("feature").fit(bags)
    model = PrototypeMIL(bags[0].shape[1], 2, clf.model_config(), generator=torch.Generator().manual_seed(9))
    train_model(model, [torch.as_tensor(b, dtype=torch.float32) for b in st.transform(bags)], torch.as_tensor(y),
                clf.train_config(), seed=9)
    torch.testing.assert_close(clf.model_.prototypes, model.prototypes, rtol=1e-4, atol=1e-5)


def test_cv_on_float32_bags_pools_each_bag_once_with_the_same_result(monkeypatch):
    """Folds share bag objects; converting float32 bags must not give every fold its own copy of each."""
    import minitorch_proto.estimator_training as estimator_module

    pooled = []
    shipped = estimator_module.shared_pool

    def spy(sets):
        out = shipped(sets)
        pooled.append(len(out[0]))
        return out

    monkeypatch.setattr(estimator_module, "shared_pool", spy)
    bags, y = make_concept_bags(n_bags=30, seed=4)
    folds = stratified_folds(y, n_repeats=2, n_folds=3)
    est = PrototypeMILClassifier(n_prototypes=3, epochs=2, device="cpu")
    res64 = cross_validate(est, bags, y, folds)
    res32 = cross_validate(est, [b.astype(np.float32) for b in bags], y, folds)
    assert pooled == [30, 30]  # one slot per bag, not one per bag and fold (120 before)
    # float32 values are float64 values rounded; the same training on them, fold for fold
    same = cross_validate(est, [b.astype(np.float32).astype(np.float64) for b in bags], y, folds)
    assert np.array_equal(res32["auc"].to_numpy(), same["auc"].to_numpy())
    assert len(res64) == len(res32)


def test_check_shared_bags_validates_each_object_once_and_names_bad_bags():
    from minitorch_proto.validation import check_shared_bags

    a, b = np.ones((2, 3), np.float32), np.zeros((1, 3), np.float32)
    seen = {}
    first, second = check_shared_bags([a, b], seen), check_shared_bags([b, a], seen)
    assert first[0] is second[1] and first[1] is second[0] and first[0].dtype == np.float64
    with pytest.raises(ValueError, match=r"bags\[1\] contains NaN"):
        check_shared_bags([a, np.full((1, 3), np.nan)], seen)
