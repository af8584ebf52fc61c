"""The book's one ranking: every method and budget measured on the benchmarks, in one table.

The pages used to rank different subsets (the 12 defaults rows, the 22 rows of the baselines
page, the monotone page's own rows), so the same method placed differently from page to page.
:func:`one_ranking` assembles **every** frozen measurement on the book's 50 folds (5 x 10 CV,
the same folds for every row) and ranks them together; every page that states a rank reads it
from here (and ``tests/test_one_ranking.py`` checks the prose against it).

Rows (:func:`ranking_rows`):

- ``measured_results``: the prototype rows and every baseline at its package defaults;
- ``baseline_common_budget``: the baselines under the common budget;
- ``ladder_results``: the nested rung as the tuned ensemble (ranked), and the fixed rungs
  ``+ rates`` ... ``+ ensemble`` (shown, **not ranked**: their settings were picked after probes on
  these data sets, see :mod:`~minitorch_proto.evaluation.ladder`; the ``paper`` rung is the
  paper-faithful row of ``measured_results`` again, same folds and scores, so it is left out);
- ``monotone_results``: the monotone variant;
- ``recommended_candidates``: every candidate recipe of the recommended model; the ranked row is
  the candidate chosen for each data set on the other four and on MNIST-bags
  (:func:`recommended_lodo_rows`);
- ``recommended_candidates_mnist``: the same candidates on MNIST-bags, a development set of that
  choice only (never ranked).

The table is :func:`~minitorch_proto.evaluation.report.comparison_table` (mean ± SE over
repetition means, average rank among rows measured on every data set, budget column) with one
more column, ``place`` (1 = best average rank; tied rows share the better place).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..evaluation import (
    LADDER_RUNG_PREFIX, LADDER_STEPS, comparison_table, ladder_table, leave_one_dataset_out, summarize,
    tuned_ensemble_rows,
)
from ..methods import PROTOTYPE_RECOMMENDED
from .frozen import load_frozen

__all__ = ["RANKING_TABLES", "ranking_rows", "one_ranking", "candidate_scores", "recommended_lodo_rows",
           "recommended_candidates_table",
           "recommended_ablation_table", "rank_of"]

#: The frozen tables the one ranking is made of.
RANKING_TABLES = ("measured_results", "baseline_common_budget", "ladder_results", "monotone_results",
                  "recommended_candidates", "recommended_candidates_mnist")

#: Display names of the development sets (data sets that take part in choices and are never reported).
DEVELOPMENT_NAMES = {"mnist-bags": "MNIST-bags"}


def candidate_scores(per_fold: pd.DataFrame, development: pd.DataFrame | None = None, *,
                     metric: str = "auc") -> tuple[pd.DataFrame, list[str]]:
    """Mean ``metric`` of every candidate recipe per data set, development sets included.

    ``per_fold``: the benchmarks' per-fold rows (``method`` = candidate, ``evaluation`` = "final");
    ``development``: per-run rows on development sets (``dataset``, ``method``, ``metric``; e.g.
    the frozen ``recommended_candidates_mnist``), averaged over their runs. Returns the score
    table (candidates in the order first run, benchmarks then development sets) and the names of
    the development columns. Every candidate needs a score on every development set.
    """
    final = per_fold[per_fold["evaluation"] == "final"]
    order = list(dict.fromkeys(final["method"]))  # ties: the first candidate run
    scores = summarize(final).pivot(index="method", columns="dataset", values=f"{metric}_mean").reindex(order)
    if development is None or not len(development):
        return scores, []
    dev = development.groupby(["method", "dataset"])[metric].mean().unstack("dataset")
    missing = [c for c in order if c not in dev.index]
    if missing:
        raise ValueError(f"candidates {missing} have no score on the development sets.")
    names = [d for d in dict.fromkeys(development["dataset"]) if d not in scores.columns]
    return pd.concat([scores, dev.reindex(order)[names]], axis=1), names


def recommended_lodo_rows(per_fold: pd.DataFrame, development: pd.DataFrame | None = None, *,
                          metric: str = "auc") -> pd.DataFrame:
    """Per data set, the rows of the candidate recipe chosen on the *other* data sets.

    ``per_fold`` holds the per-fold results of several candidate recipes (``method`` = candidate);
    the choice is :func:`~minitorch_proto.evaluation.report.leave_one_dataset_out` on the mean
    ``metric`` (``benchmarks/recommended_lodo.py`` chooses by mean AUC), with the data sets of
    ``development`` (see :func:`candidate_scores`) in every choice and never reported. The rows
    come back labelled ``prototype (recommended)``, with the choices in ``attrs["choices"]``.
    """
    final = per_fold[per_fold["evaluation"] == "final"]
    scores, dev = candidate_scores(per_fold, development, metric=metric)
    choices = leave_one_dataset_out(scores, development=dev)
    parts = [final[(final["dataset"] == r.held_out) & (final["method"] == r.chosen)] for r in choices.itertuples()]
    out = pd.concat(parts, ignore_index=True).assign(method=PROTOTYPE_RECOMMENDED)
    out.attrs["choices"] = dict(zip(choices["held_out"], choices["chosen"]))
    return out


def recommended_candidates_table(per_fold: pd.DataFrame, development: pd.DataFrame | None = None, *,
                                 metric: str = "auc") -> pd.DataFrame:
    """Every candidate recipe on every data set, and which held-out data sets chose it.

    The table behind the recommended model's leave-one-data-set-out choice: one row per
    candidate (``per_fold``'s ``method``), one "accuracy ± SE" column per data set (display
    names; SE over repetition means), one "<set> AUC (development)" column per development set
    of ``development`` (:func:`candidate_scores`), the mean ``metric`` over all of them (what the
    shipped default is chosen by) and ``chosen for``, the held-out data sets whose choice it was.
    """
    from ..evaluation import DATASET_NAMES

    final = per_fold[per_fold["evaluation"] == "final"]
    summ = summarize(final)
    order = list(dict.fromkeys(final["method"]))
    present = [d for d in DATASET_NAMES if d in set(summ["dataset"])]
    mean = summ.pivot(index="method", columns="dataset", values="accuracy_mean").reindex(order)[present]
    se = summ.pivot(index="method", columns="dataset", values="accuracy_se_repeats").reindex(order)[present]
    table = pd.DataFrame({DATASET_NAMES[d]: [f"{m:.3f} ± {e:.3f}" for m, e in zip(mean[d], se[d])] for d in present},
                         index=pd.Index(order, name="candidate"))
    scores, dev = candidate_scores(per_fold, development, metric=metric)
    scores = scores[present + dev]
    label = metric.upper() if metric == "auc" else metric
    for d in dev:
        table[f"{DEVELOPMENT_NAMES.get(d, d)} {label} (development)"] = scores[d].round(3)
    table[f"mean {label}"] = scores.mean(axis=1).round(3)
    choices = leave_one_dataset_out(scores, development=dev)
    table["chosen for"] = [", ".join(DATASET_NAMES[h] for h, c in zip(choices["held_out"], choices["chosen"]) if c == cand)
                           for cand in order]
    return table


def recommended_ablation_table(per_fold: pd.DataFrame, shipped: str = "shipped recipe") -> pd.DataFrame:
    """What each ingredient of the recommended recipe is worth: every row paired fold by fold with ``shipped``.

    ``per_fold`` holds per-fold results (``method`` = row, e.g. the frozen table
    ``recommended_ablation``). The ``shipped`` row shows "accuracy ± SE" per data set; every other
    row shows its paired accuracy difference to it, "difference ± SE" (SE over repetition means
    of the per-fold differences, as :func:`~minitorch_proto.evaluation.ladder.ladder_table`).
    Columns: one per data set (display names), ``mean`` (the mean difference over data sets) and
    ``time`` (the row's total fitting seconds over the shipped row's, same folds).
    ``attrs["diff"]`` and ``attrs["diff_se"]`` hold the numeric differences and their standard
    errors (rows x data set keys).
    """
    from ..evaluation import DATASET_NAMES

    final = per_fold[per_fold["evaluation"] == "final"]
    if shipped not in set(final["method"]):
        raise ValueError(f"the shipped row {shipped!r} is not in the table.")
    order = [shipped] + [m for m in dict.fromkeys(final["method"]) if m != shipped]
    present = [d for d in DATASET_NAMES if d in set(final["dataset"])]
    base = final[final["method"] == shipped]
    own = ladder_table(base).set_index("dataset")
    cells = {shipped: {d: f"{own.at[d, 'mean']:.3f} ± {own.at[d, 'se']:.3f}" for d in present if d in own.index}}
    diffs, ses, times = {}, {}, {shipped: 1.0}
    for row in order[1:]:
        # Two-rung ladder (shipped, row): its second rung holds the paired per-fold difference.
        pair = ladder_table(pd.concat([base, final[final["method"] == row]], ignore_index=True))
        pair = pair[pair["step"] == row].set_index("dataset")
        cells[row] = {d: f"{pair.at[d, 'diff']:+.3f} ± {pair.at[d, 'diff_se']:.3f}" for d in present if d in pair.index}
        diffs[row] = {d: pair.at[d, "diff"] for d in present if d in pair.index}
        ses[row] = {d: pair.at[d, "diff_se"] for d in present if d in pair.index}
        times[row] = pair["seconds"].sum() / own.loc[pair.index, "seconds"].sum()
    table = pd.DataFrame.from_dict(cells, orient="index").reindex(columns=present).rename(columns=DATASET_NAMES)
    table.index.name = "recipe"
    diff = pd.DataFrame.from_dict(diffs, orient="index").reindex(columns=present)
    table["mean"] = [""] + [f"{v:+.3f}" for v in diff.mean(axis=1)]
    table["time"] = [f"{times[r]:.1f} x" for r in order]
    table.attrs["diff"] = diff
    table.attrs["diff_se"] = pd.DataFrame.from_dict(ses, orient="index").reindex(columns=present)
    return table


def ranking_rows() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The per-fold rows of the one ranking, from the frozen tables: ``(ranked, shown_only)``.

    ``shown_only`` are the fixed ladder rungs, labelled ``"ladder rung '<step>'"``.
    """
    measured, common, ladder, monotone, candidates, candidates_dev = (load_frozen(n) for n in RANKING_TABLES)
    recommended = recommended_lodo_rows(candidates, candidates_dev)
    fixed = [s for s, _ in LADDER_STEPS[1:]]  # the 'paper' rung repeats measured_results' prototype row
    rungs = ladder[ladder["method"].isin(fixed)]
    rungs = rungs.assign(method=[f"{LADDER_RUNG_PREFIX}'{s}'" for s in rungs["method"]])
    ranked = pd.concat([measured, common, tuned_ensemble_rows(ladder), monotone, recommended], ignore_index=True)
    return ranked, rungs.reset_index(drop=True)


def one_ranking(results: pd.DataFrame | None = None, shown_only: pd.DataFrame | None = None, *,
                metric: str = "accuracy") -> pd.DataFrame:
    """THE comparison of the book: every method and budget, mean ± SE, budget, average rank, place.

    Parameters
    ----------
    results : per-fold rows to rank (default: :func:`ranking_rows`, the frozen tables)
    shown_only : per-fold rows to show without a rank (default: the fixed ladder rungs); they
        never change the ranked rows' ranks
    metric : "accuracy" or "auc"

    Returns
    -------
    DataFrame indexed by display name: one "mean ± SE" column per data set, ``average rank``
    (1 = best; NaN for rows not ranked), ``place`` (1 = first; ties share the better place;
    ``<NA>`` for rows not ranked), ``data sets`` and ``budget``. Ranked rows first, best first.
    ``attrs["n_ranked"]`` is the number of ranked rows.
    """
    if results is None:
        results, default_shown = ranking_rows()
        shown_only = default_shown if shown_only is None else shown_only
    table = comparison_table(results, metric=metric)
    if shown_only is not None and len(shown_only):
        extra = comparison_table(shown_only, metric=metric)
        extra["average rank"] = np.nan
        table = pd.concat([table, extra.reindex(columns=table.columns)])
    ranks = table["average rank"]
    place = ranks.rank(method="min", ascending=True)
    table.insert(table.columns.get_loc("average rank") + 1, "place", place.astype("Int64"))
    table.attrs["n_ranked"] = int(ranks.notna().sum())
    return table


def rank_of(table: pd.DataFrame, name: str) -> tuple[int, int, float]:
    """``(place, number of ranked rows, average rank)`` of one row of :func:`one_ranking`."""
    if name not in table.index or pd.isna(table.at[name, "place"]):
        raise ValueError(f"{name!r} is not a ranked row of the table.")
    return int(table.at[name, "place"]), int(table.attrs["n_ranked"]), float(table.at[name, "average rank"])
