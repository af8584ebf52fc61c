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

Neural baselines train through :func:`~minitorch_proto.baselines.batched_fit.fit_many`: one
batched program per grid candidate.
"""
from __future__ import annotations

import time
from typing import Sequence

import numpy as np
import pandas as pd

from ..baselines import BASELINES
from ..baselines.batched_fit import fit_many
from ..preprocessing import BagStandardizer
from .cv import RESULT_COLUMNS, Fold, _fold_row, stratified_folds
from .metrics import scores_from_proba

__all__ = ["GRIDS", "COMMON_BUDGET", "STOCHASTIC", "budget_label", "member_seeds", "cross_validate_baseline"]

#: Fixed grids, chosen before any outer result was seen: three candidates per method. The
#: neural nets vary the learning rate by a factor 3 either side of the published value.
GRIDS: dict[str, list[dict]] = {
    **{name: [{"lr": 5e-4 / 3}, {"lr": 5e-4}, {"lr": 1.5e-3}]
       for name in ("attention", "gated_attention", "mi_net_max", "mi_net_mean", "MI_net_max", "MI_net_mean")},
    "miles": [{"C": 0.1}, {"C": 1.0}, {"C": 10.0}],
    "mi_svm": [{"C": 1.0}, {"C": 10.0}, {"C": 100.0}],
    "bag_stats": [{"C": 0.1}, {"C": 1.0}, {"C": 10.0}],
}
#: Methods whose fit depends on the seed (they get the seed ensemble).
STOCHASTIC = frozenset({"attention", "gated_attention", "mi_net_max", "mi_net_mean", "MI_net_max", "MI_net_mean"})
N_SEEDS = 5
INNER_FOLDS = 3
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


def member_seeds(seed: int, k: int) -> list[int]:
    """Seeds of a k-member ensemble; member 0 is the single model's seed."""
    return [int(seed) + 10_000 * j for j in range(k)]


def _proba(est, bags, n_classes: int) -> np.ndarray:
    proba = np.asarray(est.predict_proba(bags))
    full = np.zeros((len(bags), n_classes))
    full[:, np.asarray(est.classes_).astype(int)] = proba
    return full


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
    y = np.asarray(y, dtype=np.int64)
    n_classes = int(y.max()) + 1
    template = BASELINES[method](0)
    label = budget_label(method, budget)
    t0 = time.perf_counter()
    if budget == "defaults":
        sets = []
        for f in folds:
            std = BagStandardizer(standardization).fit([bags[i] for i in f.train])
            sets.append((std, std.transform([bags[i] for i in f.train])))
        fitted = fit_many(template, [(s[1], y[f.train]) for s, f in zip(sets, folds)], [f.seed for f in folds],
                          n_jobs=n_jobs)
        seconds = (time.perf_counter() - t0) / len(folds)
        rows = []
        for (std, _), f, est in zip(sets, folds, fitted):
            acc, auc = scores_from_proba(y[f.test], _proba(est, std.transform([bags[i] for i in f.test]), n_classes))
            rows.append(_fold_row(dataset, label, f, "final", np.nan, acc, auc, seconds))
        return pd.DataFrame(rows, columns=RESULT_COLUMNS), pd.DataFrame()

    grid = list(grid if grid is not None else GRIDS[method])
    k = int(n_seeds) if method in STOCHASTIC else 1
    # Stage 1: every (outer fold, inner split) for every candidate; scored on inner validation bags.
    inner = []  # (outer index, train positions, validation positions, seed)
    for o, f in enumerate(folds):
        for s in stratified_folds(y[f.train], 1, inner_folds, random_state=f.seed):
            inner.append((o, f.train[s.train], f.train[s.test], f.seed * 10 + s.fold))
    prepared = []
    for _, tr, va, _ in inner:
        std = BagStandardizer(standardization).fit([bags[i] for i in tr])
        prepared.append((std.transform([bags[i] for i in tr]), std.transform([bags[i] for i in va])))
    acc = np.zeros((len(folds), len(grid)))
    auc = np.zeros((len(folds), len(grid)))
    for g, cand in enumerate(grid):
        fitted = fit_many(template, [(p[0], y[m[1]]) for p, m in zip(prepared, inner)], [m[3] for m in inner],
                          params=[cand] * len(inner), n_jobs=n_jobs)
        for (o, _, va, _), p, est in zip(inner, prepared, fitted):
            a, u = scores_from_proba(y[va], _proba(est, p[1], n_classes))
            acc[o, g] += a / inner_folds
            auc[o, g] += (0.5 if np.isnan(u) else u) / inner_folds
    chosen = [max(range(len(grid)), key=lambda g: (acc[o, g], auc[o, g], -g)) for o in range(len(folds))]
    # Stage 2: the chosen candidate, k seeds, on each whole training fold.
    outer = []
    for f in folds:
        std = BagStandardizer(standardization).fit([bags[i] for i in f.train])
        outer.append((std.transform([bags[i] for i in f.train]), std.transform([bags[i] for i in f.test])))
    members = [(o, j) for o in range(len(folds)) for j in range(k)]
    fitted = fit_many(template, [(outer[o][0], y[folds[o].train]) for o, _ in members],
                      [member_seeds(folds[o].seed, k)[j] for o, j in members],
                      params=[grid[chosen[o]] for o, _ in members], n_jobs=n_jobs)
    proba = [np.zeros((len(f.test), n_classes)) for f in folds]
    for (o, _), est in zip(members, fitted):
        proba[o] += _proba(est, outer[o][1], n_classes) / k
    seconds = (time.perf_counter() - t0) / len(folds)
    rows, choice_rows = [], []
    for o, f in enumerate(folds):
        a, u = scores_from_proba(y[f.test], proba[o])
        rows.append(_fold_row(dataset, label, f, "final", np.nan, a, u, seconds))
        choice_rows.append(dict(dataset=dataset, method=label, repeat=f.repeat, fold=f.fold, **grid[chosen[o]],
                                **{f"inner_accuracy_{g}": acc[o, g] for g in range(len(grid))}))
    return pd.DataFrame(rows, columns=RESULT_COLUMNS), pd.DataFrame(choice_rows)
