"""Evaluating models: scores, cross-validation, tuning, tables, explanations, MIL unit tests.

==================  ====================================================================
module              what it holds
==================  ====================================================================
``metrics``         accuracy and ROC AUC, computed in one place
``cv``              folds and the one cross-validation over estimators (``cross_validate``)
``tuning``          the nested search as an estimator (``HalvingSearch``) over a fixed space
``baseline_cv``     the baselines' two budgets (defaults, common) and their row labels
``ablations``       one change at a time to the paper's model, paired per-fold deltas
``ladder``          from the paper's model to the tuned ensemble, one ingredient a rung
``report``          tables shaped like the paper's Table 2, average ranks, atomic writes
``explain``         prototype tables, nearest instances, per-instance shares
``projection``      prototypes replaced by their nearest training instances, and the cost
``evidence``        instance evidence against a reference, by removal, and its localisation AUC
``mil_unit_tests``  the algorithmic unit tests of Raff & Holt (2023) on any estimator
==================  ====================================================================

Every public name of these modules is re-exported here, so ``from minitorch_proto.evaluation
import stratified_folds, table2`` is the one import path a user (or a notebook) needs.
"""
from __future__ import annotations

# Each module's __all__ is the one list of its public names; the package re-exports them.
from . import (ablations, baseline_cv, cv, evidence, explain, ladder, metrics, mil_unit_tests, projection, report,
               tuning)
from .ablations import *  # noqa: F403
from .baseline_cv import *  # noqa: F403
from .cv import *  # noqa: F403
from .evidence import *  # noqa: F403
from .explain import *  # noqa: F403
from .ladder import *  # noqa: F403
from .metrics import *  # noqa: F403
from .mil_unit_tests import *  # noqa: F403
from .projection import *  # noqa: F403
from .report import *  # noqa: F403
from .tuning import *  # noqa: F403

__all__ = [
    *metrics.__all__,
    *cv.__all__,
    *tuning.__all__,
    *baseline_cv.__all__,
    *ablations.__all__,
    *ladder.__all__,
    *report.__all__,
    *explain.__all__,
    *projection.__all__,
    *evidence.__all__,
    *mil_unit_tests.__all__,
]
