"""Verdicts are written from the numbers they are given, and change when the numbers change."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from minitorch_proto.book.verdicts import (
    ablation_verdict,
    format_span,
    formulation_verdict,
    own_data_verdict,
    ranking_verdict,
    reproduction_verdict,
    selection_verdict,
)

REPORTED = {"musk1": (0.908, 0.1), "fox": (0.691, 0.1)}


def summary(rows):
    return pd.DataFrame(rows, columns=["dataset", "method", "evaluation", "accuracy_mean", "accuracy_se_repeats",
                                       "accuracy_std_folds"])


def test_format_span():
    assert format_span([0.134, 0.241]) == "0.13 to 0.24"
    assert format_span([0.2, 0.2001]) == "0.20"
    assert format_span([-0.05, 0.1], signed=True) == "-0.05 to +0.10"
    assert format_span([np.nan, 0.5]) == "0.50"
    with pytest.raises(ValueError):
        format_span([np.nan])


def test_reproduction_verdict_says_not_reproduced_with_the_measured_gap():
    s = summary([("musk1", "p", "final", 0.774, 0.008, 0.1), ("fox", "p", "final", 0.534, 0.02, 0.1)])
    text = reproduction_verdict(s, REPORTED, method="p")
    assert "**not reproduced**" in text
    assert "0.13 to 0.16 below" in text  # 0.908-0.774 = 0.134, 0.691-0.534 = 0.157
    assert "Musk1" not in text and "musk1" in text
    assert "Musk1" in reproduction_verdict(s, REPORTED, method="p", display={"musk1": "Musk1"})
    one = reproduction_verdict(s[s.dataset == "musk1"], REPORTED, method="p", display={"musk1": "Musk1"})
    assert "0.13 below the reported one on Musk1;" in one and "every data set" not in one and "mean" not in one
    above = summary([("musk1", "p", "final", 0.95, 0.005, 0.1)])
    assert "measured minus reported accuracy is +0.04 on musk1; not reproduced on musk1." in reproduction_verdict(
        above, REPORTED, method="p")


def test_reproduction_verdict_says_reproduced_when_within_tolerance():
    s = summary([("musk1", "p", "final", 0.90, 0.01, 0.1), ("fox", "p", "final", 0.70, np.nan, 0.1)])
    text = reproduction_verdict(s, REPORTED, method="p")
    assert "**were reproduced**" in text and "not" not in text


def test_reproduction_verdict_partial_and_two_standard_errors():
    # Fox is 0.05 off but its standard error (0.03) makes that within two standard errors.
    s = summary([("musk1", "p", "final", 0.70, 0.01, 0.1), ("fox", "p", "final", 0.641, 0.03, 0.1)])
    text = reproduction_verdict(s, REPORTED, method="p")
    assert "reproduced on 1 of 2 data sets only" in text and "not reproduced on musk1" in text


def test_reproduction_verdict_errors():
    s = summary([("tiger", "p", "final", 0.7, 0.01, 0.1)])
    with pytest.raises(ValueError, match="reported"):
        reproduction_verdict(s, REPORTED, method="p")
    with pytest.raises(ValueError, match="no rows"):
        reproduction_verdict(s, REPORTED, method="q")


def test_selection_verdict_measures_the_gain():
    s = summary([("musk1", "c", "final", 0.54, 0.02, 0.1), ("musk1", "c", "test_selected", 0.73, 0.02, 0.1),
                 ("fox", "c", "final", 0.58, 0.02, 0.1), ("fox", "c", "test_selected", 0.62, 0.02, 0.1)])
    text = selection_verdict(s, method="c", display={"musk1": "Musk1"})
    assert "raises the accuracy by +0.04 to +0.19 (most on Musk1)" in text
    # It chooses by test AUC, so accuracy can fall; one data set has no "most"; nothing chosen, nothing claimed.
    fox = summary([("fox", "c", "final", 0.545, 0.02, 0.1), ("fox", "c", "test_selected", 0.49, 0.02, 0.1)])
    assert "lowers the accuracy by 0.06 (on Fox);" in selection_verdict(fox, method="c", display={"fox": "Fox"})
    same = summary([("fox", "c", "final", 0.5, 0.02, 0.1), ("fox", "c", "test_selected", 0.5, 0.02, 0.1)])
    assert selection_verdict(same, method="c").startswith("Letting the test fold choose the epoch changed no accuracy")
    mixed = s.assign(accuracy_mean=[0.54, 0.73, 0.58, 0.50])
    assert "changes the accuracy by -0.08 to +0.19 (most on Musk1)" in selection_verdict(
        mixed, method="c", display={"musk1": "Musk1"})


def test_ablation_verdict_names_best_and_worst_and_the_gap():
    deltas = pd.DataFrame({
        "setting": ["base", "a", "b", "a", "b"],
        "dataset": ["m", "m", "m", "f", "f"],
        "delta": [0.0, 0.05, -0.10, 0.03, -0.2],
        "delta_se": [0.0, 0.01, 0.2, 0.01, 0.01],
    })
    text = ablation_verdict(deltas, baseline="base", gap=0.13)
    assert "+0.040 (a)" in text and "-0.150 (b)" in text
    assert "3 of 4" in text  # a/m, a/f and b/f exceed two standard errors; b/m does not
    assert "No single change closes the gap of 0.13" in text and "(a) covers 31%" in text
    assert ablation_verdict(deltas, baseline="base", gap=0.13, brief=True).startswith("No single change")
    assert ablation_verdict(deltas, baseline="base", brief=True).count(".") == 3  # one sentence, two numbers
    assert "as large as the gap" in ablation_verdict(deltas, baseline="base", gap=0.03)
    # Already above the paper: no gap, and no "covers nan% of it" (the share of a gap of -0.01).
    text = ablation_verdict(deltas.assign(delta=deltas["delta"] - 0.2), baseline="base", gap=-0.01)
    assert "There is no gap to close" in text and "+0.01" in text and "nan" not in text


def test_verdicts_word_their_numbers_as_printed():
    from minitorch_proto.book import mnist_sweep_verdict
    from minitorch_proto.book.verdicts import comparison_verdict

    # "median test AUC 0.85 (misses the bar of ... 0.85)" for 0.8496.
    runs = pd.DataFrame({"target": [9] * 2, "seed": [0, 1], "digit_like": [True] * 2, "test_auc": [0.8495, 0.8497]})
    assert "median test AUC 0.8496 (misses the bar of 2/2 and 0.85)" in mnist_sweep_verdict(runs)
    assert "median test AUC 0.86 (meets" in mnist_sweep_verdict(runs.assign(test_auc=0.86))
    table = pd.DataFrame({"dataset": ["musk1", "fox", "tiger", "elephant"], "diff": [0.01, -0.0203, np.nan, -0.05]})
    text = comparison_verdict(table)
    # -0.0203 prints as -0.020: within the margin of 0.02, not "further below" it; Tiger was silently left out.
    assert "within 0.02 below it on 1 (fox), and further below on 1: elephant (-0.050)." in text
    assert "No difference could be measured on 1 (tiger)." in text


def test_formulation_and_own_data_verdicts():
    text = formulation_verdict(1.0, 0.95, 0.5, 2.3, 0.12)
    assert "1.00" in text and "0.95" in text and "0.50" in text and "moved to within 0.12" in text
    assert "found the concept without" in text
    # One epoch: the larger problem at chance and the prototype still far: no claim that it found anything.
    short = formulation_verdict(0.5, 0.5, 0.5, 2.3, 2.0, concept_radius=0.5)
    assert "did not find the concept" in short and "within 0.50" in short
    assert "did not find" in formulation_verdict(1.0, 1.0, 0.5, 2.3, 0.8, concept_radius=0.5)
    assert "ended 2.40 from" in formulation_verdict(1.0, 1.0, 0.5, 2.3, 2.4)
    text = ablation_verdict(pd.DataFrame({"setting": ["base", "a", "b"], "delta": [0.0, 0.0, 0.02]}), baseline="base")
    assert "none lowered it" in text and "largest loss" not in text
    s = summary([("d", "prototype", "final", 0.9, 0.01, 0.05), ("d", "bag_stats", "final", 0.8, 0.01, 0.04)])
    text = own_data_verdict(s, method="prototype", baseline="bag_stats", held_out_accuracy=0.93,
                            reload_identical=True, display={"bag_stats": "bag statistics"})
    assert "0.10 above bag statistics" in text and "0.93" in text and "identical" in text


def test_ranking_verdict():
    ranks = pd.Series({"a": 1.5, "b": 3.0, "c": 2.0})
    assert "places 3 of 3" in ranking_verdict(ranks, "b")
    assert "best average rank" in ranking_verdict(ranks, "a")
    with pytest.raises(ValueError):
        ranking_verdict(ranks, "z")
    # average_ranks' NaN for a method missing a data set: it had been "the best average rank (1.0)"
    unranked = pd.Series({"a": 1.5, "b": 3.0, "c": 2.0, "d": np.nan})
    with pytest.raises(ValueError, match="has no average rank"):
        ranking_verdict(unranked, "d")
    assert "places 3 of 3" in ranking_verdict(unranked, "b")  # and it was counted among the ranked


def test_ranking_verdict_tied_methods_share_the_better_place():
    ranks = pd.Series({"a": 1.0, "b": 2.5, "c": 2.5, "d": 4.0})
    assert "places 2 of 4" in ranking_verdict(ranks, "b")
    assert "places 2 of 4" in ranking_verdict(ranks, "c")
    assert "places 4 of 4" in ranking_verdict(ranks, "d")


def test_show_verdict_is_an_escaped_admonition():
    from minitorch_proto.book.verdicts import show_verdict

    box = show_verdict("**Reproduced** on `musk1`: a < b & c", title="Verdict <live>").data
    assert box.startswith('<div class="admonition important">')
    assert '<p class="admonition-title"><strong>Verdict &lt;live&gt;</strong></p>' in box
    assert "<p><strong>Reproduced</strong> on <code>musk1</code>: a &lt; b &amp; c</p>" in box
    assert "<live>" not in box and "a < b" not in box
    two = show_verdict(["First.", "Second."]).data
    assert two.count("<p>") == 2 and "<p>First.</p><p>Second.</p>" in two
