"""Cross-validation of the baselines, all folds (and seeds, and inner fits) trained together.

Two budgets, labelled in the ``method`` column:

* ``"defaults"``: one model per outer fold at the published / package defaults, seeded
  with the fold's seed - the same models as :func:`~minitorch_proto.evaluation.cv.cross_validate_estimator`.
* ``"common"`` (:data:`COMMON_BUDGET`): for each outer fold, every candidate of the method's
  fixed grid (:data:`GRIDS`) is fitted on ``inner_folds`` stratified inner splits of the
  outer *training* bags (one seed each, standardisation fitted on the inner-training bags)
  and scored by mean inner accuracy (ties: mean inner AUC, then grid order); the chosen
  candidate is then fitted ``n_seeds`` times on the whole training fold and the members'
  probabilities are averaged. The test fold takes part in nothing but the final score.
  Methods without randomness (MILES, mi-SVM, bag statistics) get one member.

This is :func:`~minitorch_proto.evaluation.cv.cross_validate` over the registry's
estimators (:mod:`minitorch_proto.methods`): ``StandardizedMIL(baseline)`` for the
defaults, an :class:`~minitorch_proto.meta_estimators.InnerCVSelection` of it for the
common budget, so a user who builds the same estimator and calls ``fit`` gets the
model a table reports. Neural baselines train through
:func:`~minitorch_proto.baselines.batched_fit.fit_many`: one batched program per grid candidate.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from ..baselines import BASELINES
from ..meta_estimators import InnerCVSelection, StandardizedMIL, member_seeds
from ..methods import INNER_FOLDS, METHODS, N_SEEDS
from .cv import Fold, cross_validate

__all__ = ["GRIDS", "COMMON_BUDGET", "STOCHASTIC", "budget_label", "member_seeds", "cross_validate_baseline"]

#: Fixed grids, chosen before any outer result was seen: three candidates per method (the registry's).
GRIDS: dict[str, list[dict]] = {k: [dict(c) for c in m.grid] for k, m in METHODS.items() if m.family == "baseline"}
#: Methods whose fit depends on the seed (they get the seed ensemble).
STOCHASTIC = frozenset(k for k, m in METHODS.items() if m.family == "baseline" and m.stochastic)
COMMON_BUDGET = (
    f"k={N_SEEDS} seed ensemble (stochastic methods) + inner {INNER_FOLDS}-fold tuning over a fixed grid "
    "of 3 candidates"
)


def budget_label(method: str, budget: str) -> str:
    """The ``method`` column value of a baseline under a budget."""
    if budget == "defaults":
        return method
    if method in STOCHASTIC:
        return f"{method} ({N_SEEDS}-seed ensemble, tuned on inner CV)"
    return f"{method} (tuned on inner CV)"


def cross_validate_baseline(
    bags: Sequence[np.ndarray],
    y: np.ndarray,
    folds: Sequence[Fold],
    method: str,
    *,
    budget: str = "defaults",
    dataset: str = "custom",
    standardization: str = "feature",
    n_seeds: int = N_SEEDS,
    inner_folds: int = INNER_FOLDS,
    grid: Sequence[dict] | None = None,
    n_jobs: int = 1,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Cross-validate one baseline of ``BASELINES`` under ``budget`` ("defaults" or "common").

    ``n_jobs`` processes fit the methods that are not batched (MILES, mi-SVM, bag statistics).

    Returns
    -------
    results : DataFrame with ``RESULT_COLUMNS`` (method: :func:`budget_label`)
    choices : one row per outer fold: the chosen candidate and its inner scores (empty for defaults)
    """
    if method not in BASELINES:
        raise ValueError(f"Unknown baseline {method!r}; choose from {', '.join(BASELINES)}.")
    if budget not in ("defaults", "common"):
        raise ValueError(f"budget must be 'defaults' or 'common', got {budget!r}.")
    label = budget_label(method, budget)
    est = StandardizedMIL(BASELINES[method](0), standardization)
    if budget == "common":
        candidates = [{f"estimator__{k}": v for k, v in c.items()} for c in (grid if grid is not None else GRIDS[method])]
        est = InnerCVSelection(est, candidates, inner_folds=inner_folds,
                               n_seeds=int(n_seeds) if method in STOCHASTIC else 1)
    results, fitted = cross_validate(est, bags, y, folds, dataset=dataset, method=label, n_jobs=n_jobs,
                                     return_estimators=True)
    if budget == "defaults":
        return results, pd.DataFrame()
    choices = [dict(dataset=dataset, method=label, repeat=f.repeat, fold=f.fold,
                    **{k.split("__", 1)[1]: v for k, v in e.best_params_.items()},
                    **{f"inner_accuracy_{g}": e.inner_scores_[g, 0] for g in range(len(e.inner_scores_))})
               for f, e in zip(folds, fitted)]
    return results, pd.DataFrame(choices)
