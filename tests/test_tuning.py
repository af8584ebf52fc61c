"""Nested tuning: inner splits only, the chosen settings reported, repeatable."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from minitorch_proto.evaluation import tuning
from minitorch_proto.evaluation.cv import cross_validate, stratified_folds
from minitorch_proto.evaluation.reproduction import choice_rows
from minitorch_proto.evaluation.tuning import (
    GRID,
    HalvingSearch,
    SearchBudget,
    halving_schedule,
    sample_candidates,
    search_many,
)
from minitorch_proto.preprocessing import BagStandardizer

from .conftest import make_concept_bags

SMALL = SearchBudget(n_candidates=4, factor=2, max_epochs=6, eval_every=3, inner_folds=2, n_seeds=2)


def test_budget_schedule_and_draw_are_fixed_before_any_data():
    assert halving_schedule(SearchBudget()) == [(27, 6), (9, 17), (3, 50)]
    assert halving_schedule(SMALL) == [(4, 3), (2, 6)]
    a, b = sample_candidates(27, 0), sample_candidates(27, 0)
    assert a == b and len(set(a)) == 27
    assert sample_candidates(27, 1) != a
    for cand in a:
        for key, values in GRID.items():
            assert getattr(cand, key) in values
    assert "27 of 1458 grid points" in SearchBudget().describe()
    with pytest.raises(ValueError, match="score"):
        SearchBudget(score="f1")


class _Recorder:
    """Wraps train_batched and BagStandardizer.fit, remembering every bag they are given."""

    def __init__(self, monkeypatch, bags):
        self.bag_of = {id(b): i for i, b in enumerate(bags)}
        self.trained, self.evaluated, self.scaled = set(), set(), set()
        real_train, real_fit = tuning.train_batched, BagStandardizer.fit
        recorder = self

        def train(bags_, y_, train_sets, seeds, *args, **kwargs):
            for t in train_sets:
                recorder.trained |= {recorder.bag_of[id(bags_[i])] for i in t}
            for e in kwargs.get("eval_sets") or []:
                recorder.evaluated |= {recorder.bag_of[id(bags_[i])] for i in e}
            return real_train(bags_, y_, train_sets, seeds, *args, **kwargs)

        def fit(self_, bags_, *args, **kwargs):
            recorder.scaled |= {recorder.bag_of[id(b)] for b in bags_ if id(b) in recorder.bag_of}
            return real_fit(self_, bags_, *args, **kwargs)

        monkeypatch.setattr(tuning, "train_batched", train)
        monkeypatch.setattr(BagStandardizer, "fit", fit)


def test_search_never_shows_a_test_bag_to_fit_scaler_or_scoring(monkeypatch):
    bags, y = make_concept_bags(40, seed=3)
    fold = stratified_folds(y, 1, 4, random_state=0)[0]
    rec = _Recorder(monkeypatch, bags)
    # The pool holds the test bags (as in the real protocol); the search must not read them.
    search_many(bags, y, [fold.train], [fold.seed], SMALL)
    test = set(fold.test.tolist())
    assert rec.trained and rec.scaled and rec.evaluated
    assert not (rec.trained | rec.scaled | rec.evaluated) & test
    # The whole nested protocol through the one cross-validation: the search and the refit see
    # the training bags only; the test bags reach nothing but predict_proba.
    res = cross_validate(HalvingSearch(SMALL), bags, y, [fold])
    assert len(res) == 1 and not (rec.trained | rec.scaled | rec.evaluated) & test


def test_nested_cv_reports_choices_per_fold_and_same_seed_same_result():
    bags, y = make_concept_bags(40, seed=1)
    folds = stratified_folds(y, 1, 3, random_state=0)
    res, fitted = cross_validate(HalvingSearch(SMALL), bags, y, folds, dataset="toy", return_estimators=True)
    choices = choice_rows(fitted, folds, "toy", "nested")
    assert len(res) == 3 and len(choices) == 3
    assert list(choices[["repeat", "fold"]].itertuples(index=False, name=None)) == [(1, 1), (1, 2), (1, 3)]
    for key in GRID:
        assert choices[key].notna().all()
    assert set(choices["distance"]) <= set(GRID["distance"])
    assert set(choices["epochs"]) <= {3, 6}
    assert [e.best_estimator_.epochs for e in fitted] == choices["epochs"].tolist()
    assert all(e.best_estimator_.n_seeds == SMALL.n_seeds for e in fitted)
    assert res["accuracy"].between(0, 1).all() and choices["budget"].nunique() == 1
    res2, fitted2 = cross_validate(HalvingSearch(SMALL), bags, y, folds, dataset="toy", return_estimators=True)
    np.testing.assert_array_equal(res["auc"].to_numpy(), res2["auc"].to_numpy())
    assert choices["setting"].tolist() == choice_rows(fitted2, folds, "toy", "nested")["setting"].tolist()
    # One fold's search fitted alone equals the same fold in the batched cross-validation.
    alone = HalvingSearch(SMALL, random_state=folds[1].seed).fit([bags[i] for i in folds[1].train], y[folds[1].train])
    test = [bags[i] for i in folds[1].test]
    np.testing.assert_allclose(alone.predict_proba(test), fitted[1].predict_proba(test), atol=1e-6)


def test_the_refit_ensemble_averages_its_members():
    bags, y = make_concept_bags(30, seed=2)
    fold = stratified_folds(y, 1, 3, random_state=0)[0]
    cand = sample_candidates(1, 0)[0]
    cand = type(cand)(**{**cand.estimator_params(), "epochs": 4})
    two = tuning.fit_ensembles(bags, y, [fold.train], [fold.test], [cand], [7], 2)[0]
    members = [tuning.fit_ensembles(bags, y, [fold.train], [fold.test], [cand], [7 + s], 1)[0] for s in (0, 1)]
    np.testing.assert_allclose(two, (members[0] + members[1]) / 2, atol=1e-6)


def test_scikit_learn_halving_search_accepts_lists_of_bags():
    """The library route works too (slower: one fit per candidate and split, see the module docstring)."""
    from sklearn.experimental import enable_halving_search_cv  # noqa: F401
    from sklearn.model_selection import HalvingRandomSearchCV, StratifiedKFold

    from minitorch_proto.estimator import PrototypeMILClassifier

    bags, y = make_concept_bags(40, seed=0)
    search = HalvingRandomSearchCV(
        PrototypeMILClassifier(n_prototypes=4, epochs=2), {"lr_prototypes": [1e-3, 1e-2], "distance": ["euclidean", "cosine"]},
        n_candidates=4, factor=2, resource="epochs", min_resources=2, max_resources=4, cv=StratifiedKFold(2),
        scoring="roc_auc", random_state=0,
    ).fit(bags, y)
    assert set(search.best_params_) == {"lr_prototypes", "distance", "epochs"}
    assert search.predict_proba(bags[:3]).shape == (3, 2)


def test_ladder_table_pairs_folds_and_computes_standard_errors_by_hand():
    import pandas as pd

    from minitorch_proto.book.verdicts import ladder_verdict
    from minitorch_proto.evaluation.ladder import ladder_table

    rows = []
    for rep in (1, 2):
        for fold in (1, 2):
            base = 0.5 + 0.1 * fold + 0.05 * rep
            rows.append(dict(dataset="a", method="paper", repeat=rep, fold=fold, accuracy=base, fit_seconds=1.0))
            rows.append(dict(dataset="a", method="+ x", repeat=rep, fold=fold, accuracy=base + 0.1 * rep,
                             fit_seconds=2.0))
    table = ladder_table(pd.DataFrame(rows))
    second = table[table.step == "+ x"].iloc[0]
    # Paired differences: 0.1 (repeat 1) and 0.2 (repeat 2): mean 0.15, SE of the two repeat means 0.05.
    assert second["diff"] == pytest.approx(0.15)
    assert second["diff_se"] == pytest.approx(0.05)
    assert second["seconds"] == pytest.approx(8.0)
    first = table[table.step == "paper"].iloc[0]
    assert np.isnan(first["diff"]) and first["mean"] == pytest.approx(0.725)
    assert first["se"] == pytest.approx(0.025)
    text = ladder_verdict(table)
    assert "+ x (1/1)" in text and "a +0.150" in text
    # One rung alone: its mean, and no "From 'x' to 'x'" or "No rung raised accuracy".
    alone = ladder_verdict(ladder_table(pd.DataFrame(rows[1::2])))
    assert alone == "Only the rung '+ x' ran, so no rung is compared with another; its mean accuracy: a 0.875."


def test_a_ladder_run_that_skips_rungs_credits_what_the_difference_measures():
    import pandas as pd

    from minitorch_proto.book.verdicts import ladder_verdict
    from minitorch_proto.evaluation.ladder import ladder_table

    rows = [dict(dataset="a", method=m, repeat=1, fold=f, accuracy=acc + 0.01 * f, fit_seconds=1.0)
            for m, acc in (("paper", 0.5), ("+ distance", 0.8), ("+ init", 0.81)) for f in (1, 2, 3)]
    table = ladder_table(pd.DataFrame(rows)).set_index("step")
    # Fixed rungs are cumulative: "+ distance" also holds "+ rates", which this run skipped.
    assert table.loc["+ distance", "against"] == "paper"
    assert table.loc["+ distance", "adds"] == "+ rates + distance"
    assert table.loc["+ init", "adds"] == "+ init"
    text = ladder_verdict(table.reset_index())
    assert "+ rates + distance (1/1)" in text


def test_cross_validated_ensemble_rows_average_the_seeds():
    from minitorch_proto.estimator import PrototypeMILClassifier
    from minitorch_proto.evaluation.ladder import ladder_configs
    from minitorch_proto.training import TrainConfig

    names = [step for step, *_ in ladder_configs("musk1")]
    assert names[0] == "paper" and names[-1] == "+ ensemble"
    bags, y = make_concept_bags(30, seed=5)
    folds = stratified_folds(y, 1, 3, random_state=0)
    cand = sample_candidates(1, 0)[0]
    mconf, tconf = cand.model_config(), TrainConfig(epochs=3, lr_prototypes=1e-2, lr_classifier=1e-2)
    est = PrototypeMILClassifier.from_configs(mconf, tconf, n_seeds=2, device="cpu")
    res = cross_validate(est, bags, y, folds, dataset="toy", method="ens")
    assert len(res) == 3 and (res.method == "ens").all()
    cand = type(cand)(**{**cand.estimator_params(), "epochs": 3, "lr_prototypes": 1e-2, "lr_classifier": 1e-2})
    proba = tuning.fit_ensembles(bags, y, [folds[0].train], [folds[0].test], [cand], [folds[0].seed], 2)[0]
    acc = float(np.mean(proba.argmax(1) == y[folds[0].test]))
    assert res.accuracy.iloc[0] == pytest.approx(acc)


def test_best_baseline_comparison_uses_the_same_folds():
    import pandas as pd

    from minitorch_proto.book.verdicts import comparison_verdict
    from minitorch_proto.evaluation.ladder import best_baseline_comparison

    rows = []
    for fold in (1, 2, 3, 4):
        rows.append(dict(dataset="a", method="ours", evaluation="final", repeat=1, fold=fold, accuracy=0.8))
        rows.append(dict(dataset="a", method="b1", evaluation="final", repeat=1, fold=fold, accuracy=0.7 + 0.05 * fold))
        rows.append(dict(dataset="a", method="b2", evaluation="final", repeat=1, fold=fold, accuracy=0.78))
        # A second repetition that "ours" was not run on: must not count.
        rows.append(dict(dataset="a", method="b2", evaluation="final", repeat=2, fold=fold, accuracy=0.1))
        rows.append(dict(dataset="a", method="prototype x", evaluation="final", repeat=1, fold=fold, accuracy=1.0))
    df = pd.DataFrame(rows)
    table = best_baseline_comparison(df[df.method == "ours"], df[df.method != "ours"], "ours")
    row = table.iloc[0]
    assert row["best_baseline"] == "b1" and row["baseline"] == pytest.approx(0.825)
    assert row["diff"] == pytest.approx(-0.025) and row["n_folds"] == 4
    assert "further below on 1: a (-0.025)" in comparison_verdict(table)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 6)), min_size=2, max_size=40))
def test_fast_auc_is_scikit_learns_number_bit_for_bit(pairs):
    """binary_auc skips roc_auc_score's checks (100x its arithmetic); ties and all must give the same float."""
    from sklearn.metrics import roc_auc_score

    from minitorch_proto.evaluation.metrics import binary_auc

    y = np.array([p[0] for p in pairs])
    s = np.array([p[1] for p in pairs], dtype=np.float64) / 7.0  # few distinct values: many ties
    if y.all() or not y.any():
        assert np.isnan(binary_auc(y, s))
    else:
        assert binary_auc(y, s) == float(roc_auc_score(y, s))


def test_training_goes_on_from_a_fit_exactly_as_without_a_stop():
    from minitorch_proto.training import TrainConfig, train_batched

    bags, y = make_concept_bags(40, seed=3)
    y = np.asarray(y)
    train = [np.arange(0, 30), np.arange(10, 40), np.arange(5, 35)]
    val = [np.arange(30, 40), np.arange(0, 10), np.arange(35, 40)]
    lr_p, lr_w = [1e-2, 1e-3, 1e-2], [1e-3, 1e-2, 1e-2]
    mconf = sample_candidates(1, 0)[0].model_config()
    kw = dict(eval_every=5, backend="compiled", dtype=torch.float64)
    whole = train_batched(bags, y, train, [1, 2, 3], mconf, TrainConfig(epochs=12), eval_sets=val,
                          lr_prototypes=lr_p, lr_classifier=lr_w, **kw)
    first = train_batched(bags, y, train, [1, 2, 3], mconf, TrainConfig(epochs=6), eval_sets=val,
                          lr_prototypes=lr_p, lr_classifier=lr_w, **kw)
    keep = [2, 0]  # a subset, in another order (what successive halving does)
    pick = lambda v: [v[i] for i in keep]  # noqa: E731
    rest = train_batched(bags, y, pick(train), [3, 1], mconf, TrainConfig(epochs=12), eval_sets=pick(val),
                         lr_prototypes=pick(lr_p), lr_classifier=pick(lr_w), resume=[(first, i) for i in keep], **kw)
    assert torch.equal(rest.prototypes, whole.prototypes[keep]) and torch.equal(rest.weight, whole.weight[keep])
    assert sorted(rest.evaluations) == [10, 12]
    for e in (10, 12):
        for n, i in enumerate(keep):
            np.testing.assert_array_equal(rest.evaluations[e][n], whole.evaluations[e][i])
    with pytest.raises(ValueError, match="differs"):
        train_batched(bags, y, pick(train), [4, 1], mconf, TrainConfig(epochs=12), lr_prototypes=pick(lr_p),
                      lr_classifier=pick(lr_w), resume=[(first, i) for i in keep], backend="compiled",
                      dtype=torch.float64)
    with pytest.raises(ValueError, match="already trained"):
        train_batched(bags, y, train, [1, 2, 3], mconf, TrainConfig(epochs=6), lr_prototypes=lr_p, lr_classifier=lr_w,
                      resume=[(first, i) for i in range(3)], backend="compiled", dtype=torch.float64)


def test_warm_started_halving_chooses_and_scores_exactly_as_from_scratch():
    """Survivors trained on from their last rung: same scores, rung tables and choices, bit for bit."""
    bags, y = make_concept_bags(50, seed=1)
    folds = stratified_folds(y, 1, 3, random_state=0)
    budget = SearchBudget(n_candidates=6, factor=2, max_epochs=8, eval_every=3, inner_folds=2, n_seeds=1)
    args = (bags, y, [f.train for f in folds], [f.seed for f in folds], budget)
    warm, cold = search_many(*args), search_many(*args, warm_start=False)
    for a, b in zip(warm, cold):
        assert a.chosen == b.chosen and a.inner_score == b.inner_score
        assert len(a.rungs) == 3
        for x, z in zip(a.rungs, b.rungs):
            pd.testing.assert_frame_equal(x, z)


def test_search_cv_on_float32_bags_pools_each_bag_once(monkeypatch):
    pooled = []
    shipped = tuning.shared_pool
    monkeypatch.setattr(tuning, "shared_pool", lambda sets: pooled.append(shipped(sets)) or pooled[-1])
    bags, y = make_concept_bags(n_bags=24, seed=2)
    folds = stratified_folds(y, n_repeats=1, n_folds=3)
    res32 = cross_validate(HalvingSearch(SMALL), [b.astype(np.float32) for b in bags], y, folds)
    assert len(pooled[0][0]) == 24  # one slot per bag, not one per bag and fold
    assert pooled[0][0][0].dtype == np.float32  # kept as given: every use converts it exactly
    twin = cross_validate(HalvingSearch(SMALL), [b.astype(np.float32).astype(np.float64) for b in bags], y, folds)
    assert np.array_equal(res32[["accuracy", "auc"]].to_numpy(), twin[["accuracy", "auc"]].to_numpy())


def test_a_search_on_too_few_bags_names_its_own_setting():
    from minitorch_proto.evaluation.tuning import HalvingSearch

    bags, y = make_concept_bags(12, seed=1)
    y = np.zeros(12, dtype=int)
    y[:2] = 1  # two positive bags: SMALL's two inner folds fit, three do not
    with pytest.raises(ValueError, match=r"SearchBudget\(inner_folds=3\) needs; lower inner_folds"):
        HalvingSearch(SearchBudget(n_candidates=2, factor=2, max_epochs=2, eval_every=1, inner_folds=3)).fit(bags, y)


def test_the_ladder_script_refuses_rows_of_other_folds():
    # --fixed-from and --nested-from rows are paired fold by fold; rows of another --seed had paired silently.
    import importlib.util
    from pathlib import Path

    from minitorch_proto.book.frozen import load_frozen
    from minitorch_proto.data import load_benchmark
    from minitorch_proto.evaluation.cv import stratified_folds

    spec = importlib.util.spec_from_file_location(
        "run_ladder", Path(__file__).resolve().parents[1] / "benchmarks" / "run_ladder.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    rows = load_frozen("ladder_results")
    folds = {"musk1": stratified_folds(load_benchmark("musk1", download=False).y, 5, 10, random_state=0)}
    script.check_same_folds(rows[rows.dataset == "musk1"], folds, "frozen")  # every frozen rung is of these folds
    rows = rows[(rows.dataset == "musk1") & (rows.method == "paper")]
    with pytest.raises(SystemExit, match="musk1 repeat 1 fold 1 has .* not .* run with the same --repeats and --seed"):
        script.check_same_folds(rows.assign(seed=rows.seed + 7), folds, "shifted.csv")
    # A file of one repetition against --repeats 5 (its rows are those folds' first tenth) is refused too.
    with pytest.raises(SystemExit, match="'paper' has 10 distinct of the 50 folds of --repeats 5"):
        script.check_same_folds(rows[rows.repeat == 1], folds, "one_repeat.csv")
    with pytest.raises(SystemExit, match="or a fold twice"):
        script.check_same_folds(pd.concat([rows, rows.iloc[:1]]), folds, "twice.csv")


def test_page_08_s_wide_ladder_table_and_choice_counts():
    import pandas as pd

    from minitorch_proto.book import ladder_wide_table, search_choice_counts
    from minitorch_proto.evaluation.ladder import ladder_table

    rows = [dict(dataset=d, method=m, repeat=r, fold=f, accuracy=a + 0.01 * f + 0.02 * r, fit_seconds=1.0)
            for d in ("fox", "musk1") for m, a in (("paper", 0.5), ("+ rates", 0.6)) for r in (1, 2) for f in (1, 2)]
    table = ladder_table(pd.DataFrame(rows))
    wide = ladder_wide_table(table, {"musk1": "Musk1", "fox": "Fox"})
    assert list(wide.columns) == ["Musk1", "Fox", "seconds (all 2)"] and list(wide.index) == ["paper", "+ rates"]
    assert wide.loc["paper", "Musk1"] == "0.545 ± 0.010"
    assert wide.loc["+ rates", "Fox"] == "0.645 ± 0.010 (+0.100 ± 0.000)"
    assert wide.loc["+ rates", "seconds (all 2)"] == 8.0
    choices = pd.DataFrame({"dataset": ["musk1"] * 3 + ["fox"], "distance": ["cosine", "cosine", "euclidean", "cosine"]})
    counts = search_choice_counts(choices, ["distance"], {"musk1": "Musk1", "fox": "Fox"})
    assert counts.loc["distance", "Musk1"] == "cosine (2), euclidean (1)" and counts.loc["distance", "Fox"] == "cosine (1)"


def test_the_ladder_script_freezes_only_the_whole_protocol(tmp_path, capsys):
    # --repeats 1 on all five data sets had replaced the book's 5 x 10 ladder with a 1 x 10 one, ranked beside
    # 5 x 10 rows; refused before any data is loaded.
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "run_ladder", Path(__file__).resolve().parents[1] / "benchmarks" / "run_ladder.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    for name in script.NESTED_FILES:
        (tmp_path / name).write_text("")
    with pytest.raises(SystemExit) as exit_:
        script.main(["--repeats", "1", "--nested-from", str(tmp_path), "--freeze"])
    assert exit_.value.code == 2 and "--freeze needs the whole protocol, --repeats 5; got 1" in capsys.readouterr().err


# A small space (8 points, 2 structures) for searches whose schedule is the point, not the grid.
TINY_GRID = {"distance": ("euclidean",), "lr_prototypes": (1e-3, 1e-2), "lr_classifier": (1e-3, 1e-2),
             "init": ("normal",), "pooling": (("min",),), "layer_norm": (True, False), "n_prototypes": (2,)}


@pytest.mark.parametrize("backend", ["compiled", "tensor"])
def test_rungs_of_equal_epochs_carry_on_without_training(monkeypatch, backend):
    """A small max_epochs rounds two rungs to one epoch count: the survivors carry on, untrained (had crashed)."""
    budget = SearchBudget(n_candidates=8, factor=2, max_epochs=2, eval_every=1, inner_folds=2, n_seeds=1)
    assert halving_schedule(budget) == [(8, 1), (4, 1), (2, 2)]
    bags, y = make_concept_bags(24, seed=1)
    calls, real = [], tuning.train_batched

    def train(*args, **kwargs):
        calls.append((args[5].epochs, kwargs.get("resume") is not None))
        return real(*args, **kwargs)

    monkeypatch.setattr(tuning, "train_batched", train)
    runs = []
    for warm in (True, False):
        calls.clear()
        runs.append(tuning.search(bags, y, budget, grid=TINY_GRID, backend=backend, warm_start=warm))
        # Rung 1 trains both structures once; rung 2 trains nothing; rung 3 goes on from rung 1's fits
        # where the engine can (the compiled one, warm), else from scratch.
        assert [c for c in calls if c[0] == 1] == [(1, False)] * 2
        assert {c for c in calls if c[0] != 1} == {(2, warm and backend == "compiled")}
    for result in runs:
        first, second, third = result.rungs
        assert len(first) == 8 and len(second) == 4 and len(third) == 2
        kept = first.set_index("candidate").loc[second.candidate, ["best_epoch", "inner_score"]]
        np.testing.assert_array_equal(kept.to_numpy(), second[["best_epoch", "inner_score"]].to_numpy())
    assert runs[0].chosen == runs[1].chosen and runs[0].inner_score == runs[1].inner_score
    for a, b in zip(*(r.rungs for r in runs)):
        pd.testing.assert_frame_equal(a, b)


def test_the_nested_search_runs_a_budget_of_few_epochs_and_describes_the_grid_it_searched():
    from minitorch_proto import methods

    bags, y = make_concept_bags(24, seed=2)
    budget = SearchBudget(n_candidates=8, factor=2, max_epochs=2, eval_every=1, inner_folds=2, n_seeds=1)
    est = methods.make("prototype-best", 0, budget=budget, grid=TINY_GRID)
    res, fitted = cross_validate(est, bags, y, stratified_folds(y, 1, 2, random_state=0), return_estimators=True)
    assert res["accuracy"].between(0, 1).all()
    assert fitted[0].choices()["budget"].startswith("8 of 8 grid points, successive halving (factor 2: 8 x 1 ep")


def test_the_budget_line_counts_the_grid_searched():
    four = {**TINY_GRID, "layer_norm": (True,), "lr_classifier": (1e-3,), "n_prototypes": (2, 3)}
    assert SearchBudget().describe().startswith("27 of 1458 grid points, successive halving (factor 3: 27 x 6 ep")
    # A grid smaller than n_candidates is drawn whole, and the rungs are sized from the points it has.
    line = SearchBudget().describe(four)
    assert line.startswith("4 of 4 grid points, successive halving (factor 3: 4 x 17 ep, 2 x 50 ep)"), line
    assert len(sample_candidates(27, 0, four)) == 4
    # What a fitted search reports in best_choices.csv: its own grid's size (it had said 1458).
    bags, y = make_concept_bags(16, seed=3)
    budget = SearchBudget(n_candidates=4, factor=2, max_epochs=2, eval_every=1, inner_folds=2, n_seeds=1)
    line = HalvingSearch(budget, grid=TINY_GRID).fit(bags, y).choices()["budget"]
    assert line.startswith("4 of 8 grid points, successive halving (factor 2: 4 x 1 ep, 2 x 2 ep)"), line


def test_a_grid_smaller_than_the_draw_is_halved_from_its_first_rung():
    """27 candidates asked of an 8-point grid: rungs of 8, 4, 2 (they had been 8, 8, 7, 4, 2: rungs that cut
    nothing, and with another budget, e.g. 4 points under the default one, 4 x 6 then 4 x 17 epochs)."""
    budget = SearchBudget(n_candidates=27, factor=2, max_epochs=4, eval_every=1, inner_folds=2, n_seeds=1)
    assert halving_schedule(budget) == [(27, 1), (14, 1), (7, 1), (4, 2), (2, 4)]
    assert halving_schedule(budget, 8) == [(8, 1), (4, 2), (2, 4)] and halving_schedule(budget, 1) == [(1, 4)]
    bags, y = make_concept_bags(16, seed=4)
    result = tuning.search(bags, y, budget, grid=TINY_GRID)
    assert [len(r) for r in result.rungs] == [8, 4, 2]
    assert [int(r.epochs_trained.iloc[0]) for r in result.rungs] == [1, 2, 4]
    assert budget.describe(TINY_GRID).startswith("8 of 8 grid points, successive halving (factor 2: 8 x 1 ep, 4 x 2 ep, 2 x 4 ep)")


def test_a_grid_with_an_empty_key_is_refused_in_one_line():
    """It had drawn no candidate and failed with an IndexError after the first rung."""
    with pytest.raises(ValueError, match=r"^the grid has no point to draw: \['init'\] hold no value\.$"):
        sample_candidates(27, 0, {**TINY_GRID, "init": ()})
    bags, y = make_concept_bags(12, seed=5)
    with pytest.raises(ValueError, match="no point to draw"):
        tuning.search(bags, y, SearchBudget(n_candidates=4, factor=2, max_epochs=2, eval_every=1, inner_folds=2,
                                            n_seeds=1), grid={**TINY_GRID, "init": ()})


@pytest.mark.parametrize("field, value, problem", [
    ("n_seeds", 2.7, "whole number"), ("inner_folds", 2.5, "whole number"), ("max_epochs", True, "whole number"),
    ("n_candidates", "9", "whole number"), ("eval_every", None, "whole number"), ("factor", 1, ">= 2"),
    ("inner_folds", 1, ">= 2"), ("n_seeds", 0, ">= 1"), ("random_state", -1, ">= 0"),
    ("random_state", 2**32, "<= 4294967295"),
])
def test_a_budget_takes_whole_numbers_in_range_only(field, value, problem):
    with pytest.raises(ValueError, match=rf"^SearchBudget\.{field} must be (a )?{re.escape(problem)}") as exc:
        SearchBudget(**{field: value})
    assert "\n" not in str(exc.value)
    # Whole numbers of other types are kept as ints: the description is the budget that runs.
    budget = SearchBudget(n_seeds=np.int64(3), n_candidates=9.0)
    assert type(budget.n_seeds) is int and type(budget.n_candidates) is int and budget == SearchBudget(n_seeds=3,
                                                                                                       n_candidates=9)
    assert "9 of 1458 grid points" in budget.describe() and "3-seed ensemble" in budget.describe()


def test_a_budget_takes_no_seed_or_a_random_state_as_scikit_learn_does():
    from minitorch_proto.methods import make

    # make("prototype-best", random_state=None) passes None on; it had been refused, naming a field never set.
    assert make("prototype-best", random_state=None).budget.random_state is None
    state = np.random.RandomState(3)
    assert SearchBudget(random_state=state).random_state is state
    with pytest.raises(ValueError, match="SearchBudget.random_state"):
        SearchBudget(random_state="3")
