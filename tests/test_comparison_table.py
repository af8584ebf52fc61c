"""The comparison table: mean ± SE over repetition means, average ranks, budget per row."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from minitorch_proto.evaluation.baseline_cv import budget_label
from minitorch_proto.evaluation.cv import RESULT_COLUMNS
from minitorch_proto.evaluation.report import common_budget_gains, comparison_table, row_budget


def _results(acc: dict, evaluation: str = "final") -> pd.DataFrame:
    """acc[(method, dataset)] = per-repetition lists of fold accuracies."""
    rows = []
    for (method, dataset), reps in acc.items():
        for r, folds in enumerate(reps, start=1):
            for f, a in enumerate(folds, start=1):
                rows.append(dict(dataset=dataset, method=method, evaluation=evaluation, repeat=r, fold=f,
                                 seed=100 * r + f, n_train=9, n_test=1, epoch=np.nan, accuracy=a, auc=a,
                                 fit_seconds=0.1))
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def test_means_standard_errors_and_ranks_by_hand():
    common = budget_label("attention", "common")
    res = _results({
        ("prototype", "musk1"): [[1.0, 0.8], [0.6, 0.6]],   # rep means 0.9, 0.6
        ("prototype", "fox"): [[0.5, 0.5], [0.5, 0.5]],
        ("attention", "musk1"): [[0.7, 0.7], [0.7, 0.7]],
        ("attention", "fox"): [[0.6, 0.6], [0.8, 0.8]],
        (common, "musk1"): [[0.75, 0.75], [0.75, 0.75]],
        (common, "fox"): [[0.7, 0.7], [0.7, 0.7]],
        ("miles", "musk1"): [[0.9, 0.9], [0.9, 0.9]],       # no Fox: no rank
    })
    res = pd.concat([res, _results({("attention", "fox"): [[0.0, 0.0], [0.0, 0.0]]}, "test_selected")])
    table = comparison_table(res)
    assert list(table.columns) == ["Musk1", "Fox", "average rank", "data sets", "budget"]
    proto = table.loc["prototype model (paper-faithful)"]
    # mean 0.75; SE = std(0.9, 0.6; ddof=1) / sqrt(2) = 0.15
    assert proto["Musk1"] == "0.750 ± 0.150"
    assert table.loc["attention MIL", "Fox"] == "0.700 ± 0.100"   # test_selected rows ignored
    # Ranked rows (MILES lacks Fox): Musk1: prototype 0.75 ties the common-budget row (1.5 each),
    # attention 3; Fox: the common-budget row 0.7 ties attention 0.7 (1.5 each), prototype 3.
    ranks = table["average rank"]
    assert ranks["prototype model (paper-faithful)"] == pytest.approx((1.5 + 3) / 2)
    assert ranks["attention MIL"] == pytest.approx((3 + 1.5) / 2)
    assert ranks["attention MIL (5-seed ensemble, tuned on inner CV)"] == pytest.approx((1.5 + 1.5) / 2)
    assert np.isnan(ranks["MILES"]) and table.loc["MILES", "data sets"] == 1
    assert table.loc["MILES", "Fox"] == ""
    # sorted by rank, the unranked row last
    assert list(table.index)[0] == "attention MIL (5-seed ensemble, tuned on inner CV)"
    assert list(table.index)[-1] == "MILES"
    assert table.loc["attention MIL", "budget"].startswith("package defaults")
    assert "5-seed ensemble" in table.loc["attention MIL (5-seed ensemble, tuned on inner CV)", "budget"]


def test_average_ranks_rank_only_methods_measured_on_every_data_set():
    from minitorch_proto.evaluation.report import average_ranks, ranked_table

    res = _results({("a", "musk1"): [[0.8, 0.8]], ("a", "fox"): [[0.6, 0.6]],
                    ("c", "musk1"): [[0.7, 0.7]], ("c", "fox"): [[0.7, 0.7]],
                    ("b", "musk1"): [[0.9, 0.9]]})  # b ran where it does best only
    ranks = average_ranks(res)
    assert ranks["a"] == pytest.approx(1.5) and ranks["c"] == pytest.approx(1.5)
    assert np.isnan(ranks["b"]) and ranks.index[-1] == "b"
    assert "b" in ranked_table(res).index  # still shown, unranked
    mine = _results({("a", "my_slides"): [[0.5, 0.5]], ("c", "my_slides"): [[0.9, 0.9]]})
    assert "my_slides" in ranked_table(pd.concat([res, mine])).columns  # ranked over it, so shown (it was hidden)


def test_row_budget_reads_every_label_of_baseline_cv():
    assert row_budget(budget_label("miles", "defaults")).startswith("package defaults")
    assert row_budget(budget_label("miles", "common")).startswith("common budget: inner-CV tuning")
    assert "ensemble" not in row_budget(budget_label("bag_stats", "common"))
    assert row_budget(budget_label("MI_net_max", "common")).endswith("5-seed ensemble")
    assert "tuned" in row_budget("prototype (rates tuned on inner CV)")


def test_bad_input():
    res = _results({("prototype", "musk1"): [[1.0, 0.8]]})
    with pytest.raises(ValueError, match="metric"):
        comparison_table(res, metric="f1")
    with pytest.raises(ValueError, match="final"):
        comparison_table(res.assign(evaluation="test_selected"))


def test_common_budget_gains():
    res = _results({
        ("miles", "musk1"): [[0.8, 0.8]], ("miles", "fox"): [[0.5, 0.5]],
        (budget_label("miles", "common"), "musk1"): [[0.9, 0.7]],      # mean 0.8: gain 0
        ("attention", "fox"): [[0.6, 0.6]],
        (budget_label("attention", "common"), "fox"): [[0.7, 0.7]],
        ("prototype (rates tuned on inner CV)", "fox"): [[0.9, 0.9]],   # not a baseline budget
    })
    gains = common_budget_gains(res)
    assert list(gains.columns) == ["Musk1", "Fox"]
    assert gains.loc["MILES", "Musk1"] == pytest.approx(0.0) and np.isnan(gains.loc["MILES", "Fox"])
    assert gains.loc["attention MIL", "Fox"] == pytest.approx(0.1)
    assert len(gains) == 2
    assert common_budget_gains(_results({("miles", "fox"): [[0.5]]})).empty


def test_tuned_ensemble_rows_join_the_table_on_the_same_folds():
    from minitorch_proto.methods import PROTOTYPE_BEST
    from minitorch_proto.book.frozen import load_frozen
    from minitorch_proto.evaluation.ladder import NESTED_STEP, TUNED_ENSEMBLE, tuned_ensemble_rows

    assert TUNED_ENSEMBLE == PROTOTYPE_BEST  # the label `reproduce --methods prototype-best` writes
    ladder = _results({("paper", "musk1"): [[0.5, 0.5]], (NESTED_STEP, "musk1"): [[0.9, 0.9], [0.7, 0.7]],
                       (NESTED_STEP, "fox"): [[0.6, 0.6], [0.6, 0.6]], ("+ ensemble", "fox"): [[1.0, 1.0]]})
    rows = tuned_ensemble_rows(ladder)
    assert set(rows.method) == {TUNED_ENSEMBLE} and len(rows) == 8   # fixed rungs left out
    table = comparison_table(pd.concat([rows, _results({("prototype", "musk1"): [[0.5, 0.5]],
                                                        ("prototype", "fox"): [[0.5, 0.5]]})]))
    name = "prototype model (nested search, 5-seed ensemble)"
    assert table.loc[name, "Musk1"] == "0.800 ± 0.100" and table.loc[name, "average rank"] == 1.0
    assert "5-seed ensemble" in table.loc[name, "budget"] and "nested" in table.loc[name, "budget"]
    with pytest.raises(ValueError, match="nested"):
        tuned_ensemble_rows(ladder[ladder.method != NESTED_STEP])
    # The frozen nested rung was cross-validated on measured_results' 50 folds of every data set.
    keys = ["dataset", "repeat", "fold", "seed", "n_train", "n_test"]
    nested = tuned_ensemble_rows(load_frozen("ladder_results"))[keys].sort_values(keys)
    measured = load_frozen("measured_results")
    paper = measured[(measured.method == "prototype") & (measured.evaluation == "final")][keys].sort_values(keys)
    assert len(nested) == 250
    np.testing.assert_array_equal(nested.to_numpy(), paper.to_numpy())


def test_equal_means_summed_in_another_order_share_a_rank_and_a_choice():
    # 0.1 + 0.2 + 0.3 and 0.3 + 0.2 + 0.1 differ in the last bit: the ranks had been 1.25 and 1.75
    # (the frozen one ranking had two such ties: Tiger accuracy, Musk2 AUC), and a tie read as "below".
    from minitorch_proto.book.verdicts import comparison_verdict
    from minitorch_proto.evaluation.ladder import best_baseline_comparison
    from minitorch_proto.evaluation.report import average_ranks, leave_one_dataset_out

    res = _results({("a", "musk1"): [[0.1, 0.2, 0.3]], ("b", "musk1"): [[0.3, 0.2, 0.1]],
                    ("a", "fox"): [[0.5, 0.5, 0.5]], ("b", "fox"): [[0.5, 0.5, 0.5]]})
    assert np.mean([0.1, 0.2, 0.3]) != np.mean([0.3, 0.2, 0.1])  # the noise the ranks must not see
    ranks = average_ranks(res)
    assert ranks["a"] == ranks["b"] == 1.5
    assert comparison_table(res).loc[:, "average rank"].tolist() == [1.5, 1.5]
    table = best_baseline_comparison(res[res["method"] == "b"].assign(method="ours"), res[res["method"] == "a"],
                                     "ours")
    assert "at or above the best measured baseline on 2 of 2" in comparison_verdict(table)
    scores = pd.DataFrame({"musk1": [0.6, 0.1 + 0.2 + 0.3], "fox": [0.6, 0.6], "tiger": [0.0, 1.0]}, index=["x", "y"])
    assert leave_one_dataset_out(scores)["chosen"].tolist()[-1] == "x"  # a tie: the first, as documented


def test_summaries_count_only_the_folds_that_have_an_auc():
    from minitorch_proto.evaluation.cv import mean_standard_error, summarize

    res = _results({("a", "musk1"): [[0.8, 0.5], [0.6, 0.7], [0.5, 0.5]]})
    res["auc"] = [0.8, np.nan, 0.6, 0.7, np.nan, np.nan]  # one-class test folds have no AUC
    row = summarize(res).iloc[0]
    assert row["auc_mean"] == pytest.approx(0.7) and row["auc_n_folds"] == 3 and row["n_folds"] == 6
    expected = np.std([0.8, 0.65], ddof=1) / np.sqrt(2)  # it had divided by sqrt(3), counting the empty repetition
    assert row["auc_se_repeats"] == pytest.approx(expected)
    assert mean_standard_error(res["auc"], res["repeat"]) == pytest.approx(expected)


def test_the_common_budget_one_model_rows_are_not_called_deterministic():
    # MILES's kernel width comes from a seeded sample once a training fold has over 1,000 instances
    # (4 of the 5 benchmarks): "one seed", not "deterministic". The frozen rows' labels stay as they are.
    for key in ("miles", "mi_svm", "bag_stats"):
        line = row_budget(budget_label(key, "common"))
        assert line == "common budget: inner-CV tuning over a 3-point grid (one model, one seed)", line
    from minitorch_proto.book.frozen import load_frozen

    assert budget_label("miles", "common") in set(load_frozen("baseline_common_budget")["method"])
