"""The book's one ranking: every method and budget measured on the benchmarks, in one table.

The pages used to rank different subsets (the 12 defaults rows, the 22 rows of the baselines
page, the monotone page's own rows), so the same method placed differently from page to page.
:func:`one_ranking` assembles **every** frozen measurement on the book's 50 folds (5 x 10 CV,
the same folds for every row) and ranks them together; every page that states a rank reads it
from here (and ``tests/test_one_ranking.py`` checks the prose against it).

Rows (:func:`ranking_rows`):

- ``measured_results``: the prototype rows and every baseline at its published defaults;
- ``baseline_common_budget``: the baselines under the common budget;
- ``ladder_results``: the nested rung as the tuned ensemble (ranked), and the fixed rungs
  ``+ rates`` ... ``+ ensemble`` (shown, **not ranked**: their settings were picked after probes on
  these data sets, see :mod:`~minitorch_proto.evaluation.ladder`; the ``paper`` rung is the
  paper-faithful row of ``measured_results`` again, same folds and scores, so it is left out);
- ``monotone_results``: the monotone variant;
- ``recommended_candidates``: every candidate recipe of the recommended model; the ranked row is
  the candidate chosen on the other four data sets for each data set (:func:`recommended_lodo_rows`).

The table is :func:`~minitorch_proto.evaluation.report.comparison_table` (mean ± SE over
repetition means, average rank among rows measured on every data set, budget column) with one
more column, ``place`` (1 = best average rank; tied rows share the better place).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..evaluation import (
    LADDER_RUNG_PREFIX, LADDER_STEPS, comparison_table, leave_one_dataset_out, summarize, tuned_ensemble_rows,
)
from ..methods import PROTOTYPE_RECOMMENDED
from .frozen import load_frozen

__all__ = ["RANKING_TABLES", "ranking_rows", "one_ranking", "recommended_lodo_rows", "recommended_candidates_table",
           "rank_of"]

#: The frozen tables the one ranking is made of.
RANKING_TABLES = ("measured_results", "baseline_common_budget", "ladder_results", "monotone_results",
                  "recommended_candidates")


def recommended_lodo_rows(per_fold: pd.DataFrame, *, metric: str = "auc") -> pd.DataFrame:
    """Per data set, the rows of the candidate recipe chosen on the *other* data sets.

    ``per_fold`` holds the per-fold results of several candidate recipes (``method`` = candidate);
    the choice is :func:`~minitorch_proto.evaluation.report.leave_one_dataset_out` on the mean
    ``metric`` (``benchmarks/recommended_lodo.py`` chooses by mean AUC). The rows come back
    labelled ``prototype (recommended)``, with the choices in ``attrs["choices"]``.
    """
    final = per_fold[per_fold["evaluation"] == "final"]
    scores = summarize(final).pivot(index="method", columns="dataset", values=f"{metric}_mean")
    scores = scores.reindex(list(dict.fromkeys(final["method"])))  # ties: the first candidate run
    choices = leave_one_dataset_out(scores)
    parts = [final[(final["dataset"] == r.held_out) & (final["method"] == r.chosen)] for r in choices.itertuples()]
    out = pd.concat(parts, ignore_index=True).assign(method=PROTOTYPE_RECOMMENDED)
    out.attrs["choices"] = dict(zip(choices["held_out"], choices["chosen"]))
    return out


def recommended_candidates_table(per_fold: pd.DataFrame, *, metric: str = "auc") -> pd.DataFrame:
    """Every candidate recipe on every data set, and which held-out data sets chose it.

    The table behind the recommended model's leave-one-data-set-out choice: one row per
    candidate (``per_fold``'s ``method``), one "accuracy ± SE" column per data set (display
    names; SE over repetition means), the mean ``metric`` over all data sets (what the shipped
    default is chosen by) and ``chosen for``, the held-out data sets whose choice it was.
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
    scores = summ.pivot(index="method", columns="dataset", values=f"{metric}_mean").reindex(order)[present]
    table[f"mean {metric.upper() if metric == 'auc' else metric}"] = scores.mean(axis=1).round(3)
    choices = leave_one_dataset_out(scores)
    table["chosen for"] = [", ".join(DATASET_NAMES[h] for h, c in zip(choices["held_out"], choices["chosen"]) if c == cand)
                           for cand in order]
    return table


def ranking_rows() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The per-fold rows of the one ranking, from the frozen tables: ``(ranked, shown_only)``.

    ``shown_only`` are the fixed ladder rungs, labelled ``"ladder rung '<step>'"``.
    """
    measured, common, ladder, monotone, candidates = (load_frozen(n) for n in RANKING_TABLES)
    recommended = recommended_lodo_rows(candidates)
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
