"""The "your own data" page's real example: registered methods on the UCSB breast-cancer bags.

Each method of the registry is built at its defaults (``make_method(key, seed)``: no
benchmark's Table 1, this is not one of the five), cross-validated with
:func:`~minitorch_proto.evaluation.cv.cross_validate` on one shared list of folds, and
scored on each test fold. Beside the package's accuracy and AUC, the balanced accuracy
(mean of the two per-class recalls of the same arg-max predictions): 26 malignant against
32 benign bags make plain accuracy lean towards the majority class.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from sklearn.metrics import balanced_accuracy_score

from ..evaluation.cv import Fold, cross_validate, mean_standard_error
from ..meta_estimators import proba_in
from ..methods import display_name, make, resolve
from ..validation import check_labels

__all__ = ["compare_on_bags", "method_budget", "pathology_table"]


def compare_on_bags(data, folds: Sequence[Fold], keys: Sequence[str], seed: int = 0) -> tuple[pd.DataFrame, dict]:
    """Per-fold rows of every method (the package's columns plus ``balanced_accuracy`` and ``key``).

    ``keys``: registered methods (a key, ``"a,b"`` or ``"all"`` each; a method named twice runs once).
    Returns the rows and, per key, the fitted estimator of each fold (for looking inside them).
    """
    y_enc, classes = check_labels(np.asarray(data.y), len(data.bags))
    frames, fitted_by_key = [], {}
    methods = [m for key in keys for m in resolve(key)]
    for method in [m for i, m in enumerate(methods) if m not in methods[:i]]:  # "all", "a,b": each once
        results, fitted = cross_validate(make(method.key, seed), data.bags, data.y, folds, dataset=data.name,
                                         method=method.label, return_estimators=True)
        balanced = []
        for fold, model, accuracy in zip(folds, fitted, results["accuracy"]):
            pred = proba_in(model, [data.bags[i] for i in fold.test], classes).argmax(axis=1)
            truth = y_enc[fold.test]
            # The same predictions as the package's accuracy, or the two columns would describe two models.
            if not np.isclose(np.mean(pred == truth), accuracy):
                raise AssertionError(f"{method.key}: balanced accuracy computed from other predictions than accuracy")
            balanced.append(balanced_accuracy_score(truth, pred))
        frames.append(results.assign(balanced_accuracy=balanced, key=method.key))
        fitted_by_key[method.key] = fitted
    return pd.concat(frames, ignore_index=True), fitted_by_key


def _cell(values: pd.Series, repeats: pd.Series) -> str:
    """Mean ± SD over folds, and the SE over repetition means when there are several repetitions."""
    text = f"{values.mean():.3f} ± {values.std(ddof=1):.3f}"
    # The SE over repetition means needs two of them (with fewer, mean_standard_error gives the folds' SE).
    if values.groupby(repeats).mean().notna().sum() > 1:
        text += f" (SE {mean_standard_error(values, repeats):.3f})"
    return text


def method_budget(key: str, seed: int = 0) -> str:
    """What a registered method has at its defaults, read from the estimator it builds: members
    averaged and choices made on inner folds differ between methods, and a table should say so."""
    from ..evaluation.tuning import HalvingSearch, SearchBudget
    from ..meta_estimators import InnerCVSelection

    est = make(resolve(key)[0].key, seed)
    if isinstance(est, HalvingSearch):
        seeds = (est.budget or SearchBudget()).n_seeds
        return f"settings searched on inner folds (successive halving), then a {seeds}-seed ensemble"
    if isinstance(est, InnerCVSelection):
        members = int(est.n_seeds)
        return (f"{len(est.grid)} settings compared on inner folds, the best refitted"
                + (f" as a {members}-seed ensemble" if members > 1 else ""))
    members = int(getattr(est, "n_seeds", 1) or 1)
    text = f"{members}-member ensemble" if members > 1 else "one model"
    if getattr(est, "head", None) == "logistic":
        text += ", the head's strength" + (" and features" if getattr(est, "head_features", "all") == "inner" else "")
        text += " chosen on inner folds"
    recipe = {"prototype": "package defaults (Musk1's Table 1 rates)", "prototype-recommended": "the shipped recipe",
              "prototype-compat": "the published code's settings", "prototype-monotone": "the monotone variant's settings"}
    return f"{text}, {recipe.get(key, 'package defaults')}"


def pathology_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The own-data page's table: one row per method, best mean AUC first.

    Columns: AUC, balanced accuracy, accuracy, fit seconds per fold, budget. Not the ranking of
    the benchmarks (that is :func:`~minitorch_proto.evaluation.report.comparison_table`).
    """
    out = []
    for key, g in rows.groupby("key", sort=False):
        out.append({"method": display_name(key), "key": key, "AUC": _cell(g["auc"], g["repeat"]),
                    "balanced accuracy": _cell(g["balanced_accuracy"], g["repeat"]),
                    "accuracy": _cell(g["accuracy"], g["repeat"]), "fit s / fold": round(g["fit_seconds"].mean(), 1),
                    "budget": method_budget(key), "_auc": g["auc"].mean()})
    table = pd.DataFrame(out).sort_values("_auc", ascending=False, kind="stable").drop(columns="_auc")
    return table.reset_index(drop=True)
