"""The baselines' two budgets and the labels their rows carry.

Two budgets, labelled in the ``method`` column:

* ``"defaults"``: one model per outer fold at the published / package defaults, seeded
  with the fold's seed: ``methods.make(key)``.
* ``"common"`` (:data:`COMMON_BUDGET`): for each outer fold, every candidate of the method's
  fixed grid (:data:`GRIDS`) is fitted on ``inner_folds`` stratified inner splits of the
  outer *training* bags (one seed each, standardisation fitted on the inner-training bags)
  and scored by mean inner accuracy (ties: mean inner AUC, then grid order); the chosen
  candidate is then fitted ``n_seeds`` times on the whole training fold and the members'
  probabilities are averaged. The test fold takes part in nothing but the final score.
  Methods whose fit barely depends on the seed (MILES: only through the rows its sigma is
  measured on; mi-SVM, bag statistics) get one member.

Both are estimators of the registry (:mod:`minitorch_proto.methods`), cross-validated with
:func:`~minitorch_proto.evaluation.cv.cross_validate`: ``StandardizedMIL(baseline)`` for the
defaults (``make(key)``), an :class:`~minitorch_proto.meta_estimators.InnerCVSelection` of it
for the common budget (``make(key, budget="common")``), so a user who builds the same estimator and calls ``fit`` gets the
model a table reports, up to the code it was frozen with (the frozen common-budget rows broke exact inner
ties by rounding on a few folds; ``benchmarks/README.md``). Neural baselines train through
:func:`~minitorch_proto.baselines.batched_fit.fit_many`: one batched program per grid candidate.
"""
from __future__ import annotations

from ..meta_estimators import member_seeds
from ..methods import INNER_FOLDS, METHODS, N_SEEDS

__all__ = ["GRIDS", "COMMON_BUDGET", "STOCHASTIC", "budget_label", "member_seeds"]

#: Fixed grids, three candidates per method (the registry's): written before any common-budget run, after
#: the defaults' outer results were known, and unchanged since.
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
