"""Registered methods side by side on the same folds of any data set.

What ``minitorch-proto compare`` runs: each method of the registry
(:mod:`minitorch_proto.methods`) is built as an estimator, cross-validated with
:func:`~minitorch_proto.evaluation.cv.cross_validate` on one shared list of folds,
and summarised in one table. Because every method sees the same splits, the
per-fold differences between two methods are paired.
"""
from __future__ import annotations

import sys
import time
from typing import Sequence

import numpy as np
import pandas as pd

from ..methods import Method, make
from ..utils import progress_bar
from .baseline_cv import budget_label
from .cv import Fold, cross_validate, summarize

__all__ = ["compare_methods", "comparison_summary"]


def compare_methods(
    methods: Sequence[Method],
    bags: Sequence[np.ndarray],
    y,
    folds: Sequence[Fold],
    *,
    dataset: str = "custom",
    table1: str | None = None,
    budget: str = "defaults",
    random_state: int = 0,
    n_jobs: int = 1,
    progress: bool = False,
    return_predictions: bool = False,
    bag_ids=None,
) -> pd.DataFrame | tuple[pd.DataFrame, pd.DataFrame]:
    """Cross-validate each method on the same ``folds``; per-fold rows of every method.

    Parameters
    ----------
    methods : registry entries (:func:`minitorch_proto.methods.resolve`)
    bags, y : the data set (raw features: each estimator standardises inside ``fit``)
    folds : shared by every method
    dataset : the ``dataset`` column
    table1 : a benchmark name whose Table 1 settings the prototype rows use (None: package defaults)
    budget : "defaults" or "common" (see :meth:`minitorch_proto.methods.Method.common`)

    return_predictions : also return every test bag's probabilities under every method
        (:func:`~minitorch_proto.evaluation.cv.prediction_rows`)
    bag_ids : the ids the predictions name bags by; None: ``bags.bag_ids`` if present, else positions

    Returns
    -------
    DataFrame of :data:`~minitorch_proto.evaluation.cv.RESULT_COLUMNS`, the ``method``
    column holding each method's results label (a baseline's under ``budget="common"``: its common-budget
    label, as ``reproduce`` writes it); with ``return_predictions``, a tuple
    ``(results, predictions)``.
    """
    estimators = [make(m.key, random_state, dataset=table1, budget=budget) for m in methods]
    frames, predictions = [], []
    for m, est in progress_bar(list(zip(methods, estimators)), progress, "methods"):
        t0 = time.perf_counter()
        # Under the common budget a baseline's rows carry reproduce's label for it ("miles (tuned on inner CV)").
        label = budget_label(m.key, budget) if m.family == "baseline" else m.label
        res, pred = cross_validate(est, bags, y, folds, dataset=dataset, method=label, n_jobs=n_jobs,
                                   return_predictions=True, bag_ids=bag_ids)
        predictions.append(pred)
        if progress:
            print(f"{m.key}: accuracy {res.accuracy.mean():.3f}, AUC {res.auc.mean():.3f} "
                  f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
        frames.append(res)
    results = pd.concat(frames, ignore_index=True)
    return (results, pd.concat(predictions, ignore_index=True)) if return_predictions else results


def comparison_summary(results: pd.DataFrame) -> pd.DataFrame:
    """One row per method: mean accuracy and AUC with their spread, best first by AUC.

    The spread is the standard error over repetition means when there are several
    repetitions, else the standard deviation over folds; the column names say which.
    """
    from ..methods import display_name

    summ = summarize(results)
    several = bool((summ["n_repeats"] > 1).all())
    spread, word = ("se_repeats", "SE over repeats") if several else ("std_folds", "SD over folds")
    rows = []
    for _, r in summ.iterrows():
        rows.append({
            "method": display_name(r["method"]),
            f"accuracy (± {word})": f"{r['accuracy_mean']:.3f} ± {r[f'accuracy_{spread}']:.3f}",
            f"AUC (± {word})": f"{r['auc_mean']:.3f} ± {r[f'auc_{spread}']:.3f}",
            "folds": int(r["n_folds"]),
            "_auc": r["auc_mean"],
        })
    table = pd.DataFrame(rows).sort_values("_auc", ascending=False, kind="stable").drop(columns="_auc")
    return table.reset_index(drop=True)
