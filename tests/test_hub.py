"""The hub: one method registry, estimators that carry their preprocessing, one cross_validate, compare."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

import minitorch_proto
from minitorch_proto import cli, meta_estimators, methods
from minitorch_proto.baselines import BASELINES
from minitorch_proto.evaluation.cv import cross_validate, stratified_folds
from minitorch_proto.evaluation.report import DISPLAY_NAMES
from minitorch_proto.meta_estimators import InnerCVSelection, SeedEnsemble, StandardizedMIL
from minitorch_proto.preprocessing import BagStandardizer
from tests.conftest import assert_predictions_match, make_concept_bags


@pytest.fixture
def scaled():
    """Concept bags whose features live on very different scales (standardisation matters)."""
    bags, y = make_concept_bags(n_bags=36, n_features=4, seed=5)
    scale = np.array([1.0, 1e3, 1e-3, 50.0])
    return [b * scale + 7.0 for b in bags], y


def test_every_baseline_and_row_label_is_registered_once():
    assert set(BASELINES) <= set(methods.METHODS)
    labels = [m.label for m in methods.METHODS.values()]
    assert len(labels) == len(set(labels))
    # the report's names are the registry's, for every label
    assert DISPLAY_NAMES == {m.label: m.display for m in methods.METHODS.values()}
    assert [m.key for m in methods.resolve("all")] == list(methods.ALL)
    # 'all' is what the help says: every method but the hours-long nested search, the recommended one included
    assert set(methods.ALL) == set(methods.METHODS) - {"prototype-best"}
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        methods.resolve("miles,nope")
    # the paper's quoted rows that measured baselines stand for name registered methods and quoted rows
    from minitorch_proto.paper import REPORTED_BASELINES, REPORTED_COUNTERPARTS
    assert set(REPORTED_COUNTERPARTS) <= set(methods.METHODS)
    assert set(REPORTED_COUNTERPARTS.values()) <= set(REPORTED_BASELINES)


def test_cli_method_names_come_from_the_registry(capsys):
    assert cli._parse_methods("prototype-compat,miles") == [methods.PROTOTYPE_COMPAT, "miles"]
    with pytest.raises(SystemExit) as exc:
        cli.main(["reproduce", "--methods", "nope", "--out", "x"])
    assert exc.value.code == 2
    assert "unknown method 'nope'" in capsys.readouterr().err
    # 'all' among other names had been refused as an unknown method 'all'.
    assert [m.key for m in methods.resolve("prototype-best,all")] == ["prototype-best", *methods.ALL]
    assert [m.key for m in methods.resolve("miles,all")] == ["miles", *[k for k in methods.ALL if k != "miles"]]


def test_registry_estimators_standardise_inside_fit(scaled):
    bags, y = scaled
    est = methods.make("miles", random_state=0)
    assert isinstance(est, StandardizedMIL)
    est.fit(bags, y)
    std = BagStandardizer("feature").fit(bags)
    by_hand = BASELINES["miles"](0).fit(std.transform(bags), y)
    np.testing.assert_allclose(est.predict_proba(bags), by_hand.predict_proba(std.transform(bags)), atol=1e-12)
    # raw features give another model: the wrapper is what makes fit(raw) the reported model
    raw = BASELINES["miles"](0).fit(bags, y)
    assert not np.allclose(raw.decision_function(bags), by_hand.decision_function(std.transform(bags)))


def test_prototype_presets_set_their_implied_settings():
    est = methods.make("prototype-monotone")
    assert est.monotone and not est.layer_norm and tuple(est.pooling) == ("min",)
    assert est.n_prototypes == methods.MONOTONE_MODEL["n_prototypes"]
    compat = methods.make("prototype-compat", dataset="musk2")
    assert compat.standardization == "instance" and compat.accumulate_gradients
    assert methods.make("prototype", dataset="tiger").lr_classifier == pytest.approx(1e-4)
    # Every registered method is an estimator now, the tuned rows included.
    tuned = methods.make("prototype-tuned", dataset="musk1")
    assert isinstance(tuned, InnerCVSelection) and tuned.scoring == "auc"
    assert [c["lr_classifier"] for c in tuned.grid] == pytest.approx([3e-5, 3e-4, 3e-3])
    from minitorch_proto.evaluation.tuning import HalvingSearch

    assert isinstance(methods.make("prototype-best"), HalvingSearch)
    for key in methods.METHODS:
        clone(methods.make(key))


def test_seed_ensemble_is_the_average_of_its_members(scaled):
    bags, y = scaled
    base = StandardizedMIL(BASELINES["mi_net_mean"](0).set_params(n_epochs=3, hidden_sizes=(8, 4)))
    ens = SeedEnsemble(base, n_seeds=3, random_state=11).fit(bags, y)
    members = [meta_estimators.with_random_state(base, s).fit(bags, y) for s in (11, 10_011, 20_011)]
    np.testing.assert_allclose(ens.predict_proba(bags), np.mean([m.predict_proba(bags) for m in members], axis=0),
                               atol=1e-6)
    with pytest.raises(ValueError, match="n_seeds"):
        SeedEnsemble(base, n_seeds=2.5).fit(bags, y)


def test_cross_validate_is_the_only_public_cross_validation():
    # Issue 26: one cross-validation over estimators; everything else is an estimator or a fold helper.
    import inspect

    names = set()
    for mod in [minitorch_proto, minitorch_proto.evaluation, *(
            getattr(minitorch_proto.evaluation, m) for m in ("cv", "tuning", "ladder", "baseline_cv", "ablations"))]:
        names |= {n for n in getattr(mod, "__all__", dir(mod)) if "cross_validate" in n and not n.startswith("_")}
    assert names == {"cross_validate"}
    assert inspect.signature(cross_validate).parameters.keys() >= {"estimator", "bags", "y", "folds"}


@pytest.mark.parametrize("refit", [False, True], ids=["gradient head", "push + convex head (threaded refits)"])
def test_prototype_fit_many_equals_fits_one_by_one_and_shares_the_pool(scaled, refit):
    from minitorch_proto import PrototypeMILClassifier

    bags, y = scaled
    folds = stratified_folds(y, 1, 3, random_state=4)
    est = PrototypeMILClassifier(n_prototypes=4, epochs=3, lr_prototypes=1e-2, lr_classifier=1e-2, device="cpu")
    if refit:
        est.set_params(init="kmeans++", distance="cosine", push=True, head="logistic", head_penalty="l1")
    # Learning rates may differ inside one batched program; the copies still equal single fits.
    copies = [clone(est).set_params(random_state=f.seed, lr_classifier=lr)
              for f, lr in zip(folds, (1e-2, 2e-2, 5e-3))]
    sets = [([bags[i] for i in f.train], y[f.train]) for f in folds]
    together = est.fit_many(sets, estimators=copies)
    for f, c, (b, t) in zip(folds, together, sets):
        alone = clone(c).fit(b, t)
        test = [bags[i] for i in f.test]
        np.testing.assert_allclose(c.predict_proba(test), alone.predict_proba(test), atol=1e-6)
        assert c.standardizer_.mean_ == pytest.approx(alone.standardizer_.mean_)
        if refit:
            np.testing.assert_array_equal(c.prototype_sources_, alone.prototype_sources_)
            assert c.head_C_ == alone.head_C_
    with pytest.raises(ValueError, match="one random state per training set"):
        est.fit_many(sets)


def test_tuned_rates_choose_on_inner_auc_and_refit_the_winner(scaled):
    from minitorch_proto import PrototypeMILClassifier

    bags, y = scaled
    base = PrototypeMILClassifier(n_prototypes=4, epochs=4, lr_prototypes=1e-4, lr_classifier=1e-4, device="cpu")
    grid = [{"lr_prototypes": 1e-4 * k, "lr_classifier": 1e-4 * k} for k in (1, 100)]
    sel = InnerCVSelection(base, grid, inner_folds=2, scoring="auc", random_state=3).fit(bags, y)
    winner = clone(base).set_params(**sel.best_params_, random_state=3).fit(bags, y)
    np.testing.assert_allclose(sel.predict_proba(bags), winner.predict_proba(bags), atol=1e-6)
    assert sel.best_score_ == pytest.approx(sel.inner_scores_[grid.index(sel.best_params_), 1])
    with pytest.raises(ValueError, match="scoring"):
        InnerCVSelection(base, grid, scoring="f1").fit(bags, y)


@pytest.mark.parametrize("scoring", ["accuracy", "auc"])
def test_the_top_k_ensemble_equals_the_average_of_its_members(scaled, scoring):
    from minitorch_proto import PrototypeMILClassifier

    bags, y = scaled
    base = PrototypeMILClassifier(n_prototypes=3, epochs=3, lr_prototypes=1e-2, lr_classifier=1e-2, device="cpu")
    grid = [{"lr_prototypes": r, "lr_classifier": r} for r in (1e-4, 1e-2, 5e-2)]
    one = InnerCVSelection(base, grid, inner_folds=2, scoring=scoring, random_state=3).fit(bags, y)
    two = InnerCVSelection(base, grid, inner_folds=2, scoring=scoring, random_state=3, top_k=2).fit(bags, y)
    # The same inner scores rank the candidates; the best is the one top_k=1 picks.
    np.testing.assert_array_equal(two.inner_scores_, one.inner_scores_)
    assert two.selected_params_[0] == one.best_params_ == two.best_params_
    col = 1 if scoring == "auc" else 0
    order = sorted(range(3), key=lambda g: (-two.inner_scores_[g, col], g))
    assert two.selected_params_ == [grid[g] for g in order[:2]]
    members = [clone(base).set_params(**c, random_state=3).fit(bags, y) for c in two.selected_params_]
    expected = np.mean([m.predict_proba(bags) for m in members], axis=0)
    np.testing.assert_allclose(two.predict_proba(bags), expected, atol=1e-6)
    np.testing.assert_allclose(one.predict_proba(bags), members[0].predict_proba(bags), atol=1e-6)
    assert not np.allclose(expected, members[0].predict_proba(bags))  # the average is not its best member
    for bad in (0, 4, 1.5, True):
        with pytest.raises(ValueError, match="top_k must be an integer from 1 to the number of candidates"):
            InnerCVSelection(base, grid, top_k=bad).fit(bags, y)


def test_inner_selection_never_sees_what_fit_was_not_given(scaled):
    bags, y = scaled
    marked = [np.column_stack([b, np.full(len(b), i)]) for i, b in enumerate(bags)]
    seen = []

    class Spy(StandardizedMIL):
        # Every fit (one by one or through fit_many) standardises its training bags here first.
        def _prepare(self, bags):
            seen.append({int(b[0, -1]) for b in bags})
            return super()._prepare(bags)

    sel = InnerCVSelection(Spy(BASELINES["bag_stats"](0)), [{"estimator__C": 0.1}, {"estimator__C": 10.0}])
    given = list(range(0, 36, 2)) + [1, 3, 5, 7, 9, 11]
    sel._fit_many([sel], [([marked[i] for i in given], y[given])], 1)
    assert seen and all(s <= set(given) for s in seen)
    assert sel.best_params_ in sel.grid and sel.inner_scores_.shape == (2, 2)


def test_labels_are_kept_as_given(scaled):
    bags, y = scaled
    words = np.where(y == 1, "tumour", "normal")
    est = methods.make("bag_stats").fit(bags, words)
    assert set(est.predict(bags)) <= {"tumour", "normal"}
    folds = stratified_folds(words, 1, 3)
    a = cross_validate(methods.make("bag_stats"), bags, words, folds)
    b = cross_validate(methods.make("bag_stats"), bags, y, folds)
    np.testing.assert_allclose(a.auc, b.auc)


def _csv(tmp_path, bags, y):
    rows = [dict(bag=f"slide_{i:03d}", label=int(y[i]), **{f"f{j}": v for j, v in enumerate(inst)})
            for i, b in enumerate(bags) for inst in b]
    path = tmp_path / "mydata.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.mark.parametrize("source", ["csv", "bags-dir"])
def test_compare_runs_registered_methods_on_the_same_folds(source, tmp_path, capsys, one_torch_thread):
    from minitorch_proto.data.disk import write_bag_folder

    bags, y = make_concept_bags(n_bags=24, n_features=3, seed=1)
    if source == "csv":
        args = ["--csv", str(_csv(tmp_path, bags, y))]
    else:
        write_bag_folder(tmp_path / "bags", bags, y, [f"slide_{i:03d}" for i in range(len(bags))])
        args = ["--bags-dir", str(tmp_path / "bags")]
    out = tmp_path / "out"
    code = cli.main(["compare", *args, "--methods", "prototype,miles,attention", "--repeats", "1", "--folds", "3",
                     "--out", str(out), "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    for name in ("attention MIL", "MILES", "prototype model (paper-faithful)"):
        assert name in printed
    res = pd.read_csv(out / "results.csv")
    assert set(res.method) == {"prototype", "miles", "attention"} and len(res) == 9
    splits = res.groupby("method")[["repeat", "fold", "seed", "n_train", "n_test"]].apply(
        lambda g: tuple(map(tuple, g.sort_values(["repeat", "fold"]).to_numpy())))
    assert splits.nunique() == 1  # every method saw the same folds
    assert (out / "comparison.png").stat().st_size > 1000
    assert json.loads((out / "run.json").read_text())["command"] == "compare"
    # summary.csv is data, joinable with results.csv (it used to hold "0.950 ± 0.000" strings under
    # display names and headers that changed with --repeats); the printed table is summary.txt.
    summ = pd.read_csv(out / "summary.csv")
    assert set(summ.method) == set(res.method) and summ.accuracy_mean.dtype == float
    by_hand = res.groupby("method").accuracy.mean()
    assert np.allclose(summ.set_index("method").accuracy_mean[by_hand.index], by_hand)
    assert "MILES" in (out / "summary.txt").read_text()
    # Every test bag's scores, named by the user's bag ids, pairing methods bag by bag.
    pred = pd.read_csv(out / "predictions.csv", dtype={"bag": str})
    assert_predictions_match(pred, res)
    if source == "bags-dir":
        assert set(pred.bag) == {f"slide_{i:03d}" for i in range(len(bags))}
    paired = pred.pivot_table(index=["repeat", "bag"], columns="method", values="proba_1")
    assert len(paired) == len(bags) and not paired.isna().any().any()


def test_compare_refuses_a_method_without_that_budget_before_reading_data(tmp_path, capsys):
    # The nested search is its own budget: it has no "common" one, and that is said before any data is read.
    code = cli.main(["compare", "--csv", str(tmp_path / "missing.csv"), "--methods", "miles,prototype-best",
                     "--budget", "common", "--out", str(tmp_path / "o")])
    assert code == 2
    err = capsys.readouterr().err
    assert "prototype-best" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_cross_validate_is_exported_and_registry_estimators_clone():
    assert "cross_validate" in minitorch_proto.__all__
    est = clone(methods.make("miles"))
    assert est.get_params()["standardization"] == "feature"


@pytest.mark.parametrize("key", ["prototype-tuned", "prototype-best"])
def test_reproduce_runs_the_tuned_rows_as_estimators_and_writes_their_choices(key, tmp_path):
    # Every registered method runs through reproduce's one path (registry estimator + cross_validate),
    # the caller's --epochs reaching the tuned rates' base model (the ladder's best row keeps its own
    # recipes, so --epochs there is refused as a flag that would change nothing).
    import pandas as pd

    out = tmp_path / "r"
    epochs = ["--epochs", "2"] if key == "prototype-tuned" else []
    code = cli.main(["reproduce", "--datasets", "musk1", "--methods", key, "--repeats", "1", "--folds", "2",
                     *epochs, "--out", str(out)])
    assert code == 0
    results = pd.read_csv(out / "results.csv")
    assert len(results) == 2 and results.method.nunique() == 1
    choices = pd.read_csv(out / ("tuning_choices.csv" if key == "prototype-tuned" else "best_choices.csv"))
    assert len(choices) == 2
    if key == "prototype-tuned":
        rates = [3e-5 * k for k in methods.TUNING_MULTIPLIERS]  # Table 1's Musk1 rate times the multipliers
        assert all(min(abs(v - r) for r in rates) < 1e-12 for v in choices.lr_classifier), choices


def test_measured_results_holds_exactly_the_measured_methods():
    """benchmarks/reproduce_all.py freezes methods.MEASURED; the recommended and monotone rows come from
    their own tables, so they must not be in it (the one ranking would list them twice)."""
    from minitorch_proto.book.frozen import load_frozen

    labels = {methods.get(k).label for k in methods.MEASURED}
    assert set(load_frozen("measured_results")["method"]) == labels
    assert set(methods.MEASURED) < set(methods.ALL)
    assert not {"prototype-recommended", "prototype-monotone", "prototype-best"} & set(methods.MEASURED)


def test_compare_labels_common_budget_rows_as_reproduce_does(tmp_path, capsys):
    bags, y = make_concept_bags(n_bags=18, n_features=3, seed=4)
    out = tmp_path / "out"
    assert cli.main(["compare", "--csv", str(_csv(tmp_path, bags, y)), "--methods", "bag_stats", "--budget", "common",
                     "--repeats", "1", "--folds", "3", "--out", str(out), "--quiet"]) == 0
    # The same label as reproduce --budget common: a defaults run's rows looked the same before.
    assert set(pd.read_csv(out / "results.csv").method) == {"bag_stats (tuned on inner CV)"}
    assert "(tuned on inner CV)" in (out / "summary.txt").read_text()
    assert cli.main(["compare", "--csv", str(_csv(tmp_path, bags, y)), "--methods", "prototype", "--budget", "common",
                     "--out", str(tmp_path / "x")]) == 2
    assert "prototype-tuned, prototype-best" in capsys.readouterr().err


@pytest.mark.parametrize("key", ["bag_stats", "miles", "mi_svm"])
def test_baselines_class_weight_names_the_labels_given_to_fit(scaled, key):
    bags, y = scaled
    base = BASELINES[key](0)
    # Labels 1/2: {1: 5} weights label 1 (it had weighted the encoded class 1, label 2).
    y12 = np.where(y == 1, 2, 1)
    heavy_first = clone(base).set_params(class_weight={1: 5.0}).fit(bags, y12)
    as_encoded = clone(base).set_params(class_weight={0: 5.0}).fit(bags, y)
    np.testing.assert_allclose(heavy_first.decision_function(bags), as_encoded.decision_function(bags), atol=1e-8)
    words = np.where(y == 1, "tumour", "normal")
    by_name = clone(base).set_params(class_weight={"normal": 5.0}).fit(bags, words)
    np.testing.assert_allclose(by_name.decision_function(bags), as_encoded.decision_function(bags), atol=1e-8)
    with pytest.raises(ValueError, match="not in y"):
        clone(base).set_params(class_weight={"cancer": 2.0}).fit(bags, words)


def test_inner_selection_fits_its_copies_on_the_labels_as_given(scaled):
    from minitorch_proto import PrototypeMILClassifier

    bags, y = scaled
    words = np.where(y == 1, "pos", "neg")
    est = PrototypeMILClassifier(n_prototypes=3, epochs=2, head="logistic", class_weight={"neg": 1.0, "pos": 3.0},
                                 random_state=0)
    sel = InnerCVSelection(est, [{"n_prototypes": 2}, {"n_prototypes": 3}], inner_folds=2).fit(bags, words)
    numbers = InnerCVSelection(clone(est).set_params(class_weight={0: 1.0, 1: 3.0}),
                               [{"n_prototypes": 2}, {"n_prototypes": 3}], inner_folds=2).fit(bags, y)
    np.testing.assert_allclose(sel.inner_scores_, numbers.inner_scores_)
    with pytest.raises(ValueError, match="bags is empty"):
        InnerCVSelection(est, [{}]).fit([], [])


def test_wrappers_read_dataframe_bags_by_column_name(scaled):
    bags, y = scaled
    frames = [pd.DataFrame(b, columns=list("abcd")) for b in bags]
    shuffled = [f[["c", "a", "d", "b"]] for f in frames]
    for key in ("miles", "bag_stats", "prototype-tuned"):
        est = methods.make(key)
        if key == "prototype-tuned":
            est.set_params(estimator__epochs=2)
        est.fit(frames, y)
        assert list(est.feature_names_in_) == list("abcd") and est.n_features_in_ == 4, key
        np.testing.assert_allclose(est.predict_proba(shuffled), est.predict_proba(frames), err_msg=key)
    bare = BASELINES["bag_stats"](0).fit(frames, y)
    np.testing.assert_allclose(bare.predict_proba(shuffled), bare.predict_proba(frames))
    mixed = [shuffled[0], *bags[1:]]  # one frame among arrays: the frame by name, the arrays by position
    np.testing.assert_allclose(bare.predict_proba(mixed), bare.predict_proba(bags))


def test_wrapper_scores_keep_the_inner_models_ranking(scaled):
    from scipy.special import expit

    bags, y = scaled
    est = methods.make("bag_stats").set_params(estimator__C=1e4).fit(bags, y)
    inner = est.estimator_.decision_function(est.standardizer_.transform(bags))
    np.testing.assert_allclose(est.decision_function(bags), inner, rtol=1e-9)
    assert np.abs(inner).max() > 30  # beyond where scores from probabilities would tie
    ens = SeedEnsemble(methods.make("bag_stats"), n_seeds=2).fit(bags, y)
    np.testing.assert_allclose(expit(ens.decision_function(bags)), ens.predict_proba(bags)[:, 1], atol=1e-12)


def test_large_seeds_and_default_labels_of_cross_validate(scaled):
    bags, y = scaled
    folds = stratified_folds(y, 1, 3, random_state=5_000_000)  # fold seeds past 2**32 before
    assert all(0 <= f.seed < 2**32 for f in folds)
    assert stratified_folds(y, 1, 3, random_state=7)[0].seed == 7000 + 100 + 1  # unchanged where it fits
    a = cross_validate(methods.make("bag_stats"), bags, y, folds)
    b = cross_validate(methods.make("miles"), bags, y, folds)
    assert set(a["method"]) == {"StandardizedMIL(BagStatistics)"} and set(b["method"]) == {"StandardizedMIL(MILES)"}
    methods.make("bag_stats", 500_000_000, budget="common").fit(bags, y)


def test_make_passes_a_search_budget_to_the_nested_search_and_keeps_tuples():
    from minitorch_proto.evaluation.tuning import SearchBudget

    budget = SearchBudget(n_candidates=3, random_state=1)
    assert methods.make("prototype-best", budget=budget).budget is budget
    assert methods.make("prototype").get_params()["betas"] == (0.9, 0.999)


def test_streaming_fits_read_dataframe_bags_by_name_and_feature_names_cannot_rename_them(scaled):
    from minitorch_proto import PrototypeMILClassifier

    bags, y = scaled
    frames = [pd.DataFrame(b, columns=list("abcd")) for b in bags]
    shuffled = [f[["d", "c", "b", "a"]] for f in frames]
    est = PrototypeMILClassifier(n_prototypes=3, epochs=2, random_state=0)
    streamed = clone(est).fit_streaming(shuffled, y)
    fitted = clone(est).fit(frames, y)
    assert list(streamed.feature_names_in_) == list("dcba")
    np.testing.assert_allclose(streamed.predict_proba(frames), streamed.predict_proba(shuffled))
    np.testing.assert_allclose(clone(est).fit_streaming(frames, y).predict_proba(frames), fitted.predict_proba(frames),
                               atol=1e-6)
    with pytest.raises(ValueError, match="differ from the DataFrame bags' own columns"):
        clone(est).fit(frames, y, feature_names=list("dcba"))
    assert list(clone(est).fit(frames, y, feature_names=list("abcd")).feature_names_in_) == list("abcd")


def test_candidates_tied_on_the_same_bags_follow_the_tie_rule_not_rounding():
    from minitorch_proto.meta_estimators import rank_candidates

    # Fox, MILES (baselines audit): C=1 and C=10 both right on 110 of 180 inner bags, their means a bit apart.
    one = (0.6 + 41 / 60 + 33 / 60) / 3
    ten = (0.6 + 39 / 60 + 35 / 60) / 3
    assert one != ten and round(one, 12) == round(ten, 12)
    scores = np.array([[one, 0.674], [ten, 0.657]])
    assert rank_candidates(scores, scores[:, 1], "accuracy") == [0, 1]  # the higher inner AUC wins the tie
    assert rank_candidates(np.array([[0.5, 0.9], [0.5, 0.9]]), np.array([0.9, 0.9]), "auc") == [0, 1]
    assert rank_candidates(np.array([[0.5, 0.7], [0.6, 0.1]]), np.array([0.7, 0.1]), "auc") == [0, 1]


def test_training_frames_in_mixed_column_orders_are_read_by_name(scaled):
    bags, y = scaled
    frames = [pd.DataFrame(b, columns=list("abcd")) for b in bags]
    mixed = [f[["d", "c", "b", "a"]] if i % 3 == 1 else f for i, f in enumerate(frames)]  # the first in order
    held = np.empty(len(mixed), dtype=object)
    held[:] = mixed
    for make in (lambda: BASELINES["bag_stats"](0), lambda: methods.make("bag_stats")):
        one_order = make().fit(frames, y)
        np.testing.assert_allclose(make().fit(mixed, y).decision_function(frames), one_order.decision_function(frames))
        np.testing.assert_allclose(one_order.decision_function(held), one_order.decision_function(frames))


def test_tuning_ties_within_rounding_go_to_the_tie_rule_and_unscored_candidates_last():
    from minitorch_proto.utils import rank_candidates

    a, b = 0.3733146635765, 0.37331466357650006  # one bit apart across a 12-decimal rounding boundary
    assert rank_candidates(np.array([[a, 0.7], [b, 0.6]]), np.array([0.7, 0.6]), "accuracy") == [0, 1]
    assert rank_candidates(np.array([[np.nan, 0.5], [0.8, 0.5], [0.9, 0.5]]), np.zeros(3), "accuracy") == [2, 1, 0]


def test_large_seeds_reach_every_member_and_fold_of_the_recommended_model(scaled):
    from minitorch_proto import PrototypeMILClassifier

    bags, y = scaled
    est = PrototypeMILClassifier.recommended(n_prototypes=3, random_state=2**32 - 1).fit(bags, y)
    assert est.predict_proba(bags).shape == (len(bags), 2)  # member 1's seed 2**32 had failed in scikit-learn
    # The members stay two models (a seed clamped into range, not wrapped, would make member 1 member 0 again).
    first, second = (m.prototypes.detach().numpy() for m in est.models_)
    assert len(est.models_) == 2 and not np.array_equal(first, second)


def test_make_says_what_budget_must_be():
    from minitorch_proto.evaluation.tuning import SearchBudget

    # None had reached the estimator's set_params: "Invalid parameter 'budget' for estimator MILES(...)".
    for key, budget, said in [("miles", None, "budget must be 'defaults', 'common' or (prototype-best only) a "
                               "SearchBudget, got None"),
                              ("prototype-best", {"n_candidates": 9}, "budget must be 'defaults', 'common'"),
                              ("miles", SearchBudget(), "a SearchBudget is the budget of prototype-best's search; "
                               "miles takes budget 'defaults' or 'common'")]:
        with pytest.raises(ValueError, match=re.escape(said)) as exc:
            methods.make(key, budget=budget)
        assert "\n" not in str(exc.value) and "Invalid parameter" not in str(exc.value)


def test_reproduce_places_every_row_that_takes_a_device_or_backend(monkeypatch):
    """reproduce's --device and --backend reach every row whose estimator has such a parameter, nested or not."""
    from types import SimpleNamespace

    from minitorch_proto.evaluation import reproduction as R
    from minitorch_proto.evaluation.cv import RESULT_COLUMNS
    from minitorch_proto.model import PrototypeMILConfig
    from minitorch_proto.training import TrainConfig

    seen = {}

    def row(method):
        return pd.DataFrame([dict(zip(RESULT_COLUMNS, ["toy", method, "final", 1, 1, 0, 1, 1, 1, 1.0, 1.0, 0.0]))])

    def fake_cv(est, *args, method=None, **kwargs):
        seen[method] = {k: v for k, v in est.get_params(deep=True).items() if k.rsplit("__", 1)[-1] in R.PLACEMENT}
        return row(method), pd.DataFrame({"x": [0]}), []

    def fake_tasks(tasks, device=None, backend=None, **kwargs):
        seen[tasks[0].method] = {"device": device, "backend": backend}
        return row(tasks[0].method), pd.DataFrame({"x": [0]})

    monkeypatch.setattr(R, "cross_validate", fake_cv)
    monkeypatch.setattr(R, "evaluate_tasks", fake_tasks)
    bags, y = make_concept_bags(n_bags=12, seed=1)
    keys = ["prototype", "prototype-tuned", "prototype-best", "prototype-recommended", "attention", "miles"]
    R.run_methods(keys, {"toy": SimpleNamespace(name="toy", bags=bags, y=y)}, {"toy": stratified_folds(y, 1, 2)},
                  lambda ds, m: (PrototypeMILConfig(), TrainConfig(), "feature"), budgets=("defaults", "common"),
                  device="cpu", backend="tensor")
    # Before: the tuned and recommended rows kept "auto", the nested search "cpu", --backend reached neither.
    for label, params in seen.items():
        for name, value in params.items():
            assert value == {"device": "cpu", "backend": "tensor"}[name.rsplit("__", 1)[-1]], (label, name, value)
    assert seen["attention (5-seed ensemble, tuned on inner CV)"] == {"estimator__estimator__device": "cpu"}
    assert seen["miles"] == {} and seen["miles (tuned on inner CV)"] == {}
    assert R.placement(keys, "cpu", "tensor") == {
        **{methods.get(k).label: {"device": "cpu", "backend": "tensor"} for k in keys[:4]},
        "attention": {"device": "cpu", "backend": None}, "miles": {"device": "cpu", "backend": None}}


def test_reproduce_without_device_or_backend_leaves_each_rows_own_placement(monkeypatch):
    """The default "auto" moves nothing: the nested search and the neural baselines keep their CPU default
    (on a GPU machine "auto" would otherwise have moved them there), and run.json says so."""
    from types import SimpleNamespace

    from minitorch_proto.evaluation import reproduction as R
    from minitorch_proto.evaluation.cv import RESULT_COLUMNS
    from minitorch_proto.model import PrototypeMILConfig
    from minitorch_proto.training import TrainConfig

    seen = {}

    def fake_cv(est, *args, method=None, **kwargs):
        seen[method] = {k: v for k, v in est.get_params(deep=True).items() if k.rsplit("__", 1)[-1] in R.PLACEMENT}
        row = dict(zip(RESULT_COLUMNS, ["toy", method, "final", 1, 1, 0, 1, 1, 1, 1.0, 1.0, 0.0]))
        return pd.DataFrame([row]), pd.DataFrame({"x": [0]}), []

    monkeypatch.setattr(R, "cross_validate", fake_cv)
    bags, y = make_concept_bags(n_bags=12, seed=1)
    keys = ["prototype-best", "attention", "prototype-recommended"]
    R.run_methods(keys, {"toy": SimpleNamespace(name="toy", bags=bags, y=y)}, {"toy": stratified_folds(y, 1, 2)},
                  lambda ds, m: (PrototypeMILConfig(), TrainConfig(), "feature"), device="auto", backend="auto")
    best = methods.get("prototype-best").label
    assert {v for k, v in seen[best].items() if k.endswith("device")} == {"cpu"}
    assert set(seen["attention"].values()) == {"cpu"}
    # Monkeypatched to a GPU machine, the record still names the CPU for the rows that keep it.
    monkeypatch.setattr("minitorch_proto.utils.resolve_device", lambda d: __import__("torch").device(
        "cuda" if d == "auto" else d))
    where = R.placement(keys, "auto", "auto")
    assert where[best]["device"] == "cpu" and where["attention"]["device"] == "cpu"
    assert where[methods.get("prototype-recommended").label]["device"] == "cuda"


def test_run_record_places_each_budgets_rows_under_their_own_labels():
    from minitorch_proto.evaluation import reproduction as R
    from minitorch_proto.evaluation.baseline_cv import budget_label

    where = R.placement(["attention", "miles", "prototype"], "cpu", "auto", budgets=("defaults", "common"))
    # The common budget's rows are results rows of their own: run.json had named only the defaults' labels.
    assert set(where) == {"attention", budget_label("attention", "common"), "miles", budget_label("miles", "common"),
                          methods.get("prototype").label}
    assert where[budget_label("attention", "common")] == where["attention"] == {"device": "cpu", "backend": None}
