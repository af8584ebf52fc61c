"""The method registry: every method the package can compare, under one key each.

A :class:`Method` holds what the command line, ``reproduce``, ``compare``, the
report and the book need to know about a method: its key (what ``--methods``
takes), the label its rows carry in results files (frozen tables keep these), the
name tables and plots show, its family, how to build it as an estimator, and its
common budget (a fixed grid, written before any common-budget run, though after the
package defaults' outer results were known, and whether it gets a seed ensemble). Nothing else in the package spells a method name.

>>> from minitorch_proto.methods import make, METHODS
>>> est = make("miles", random_state=0)          # a StandardizedMIL around MILES
>>> METHODS["attention"].display
'attention MIL'

Estimators made here carry their own preprocessing (per-fold standardisation inside
``fit``), so ``make(key).fit(raw_bags, y)`` is the model the tables report.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from sklearn.base import BaseEstimator

from .baselines import BASELINES
from .meta_estimators import InnerCVSelection, StandardizedMIL

__all__ = [
    "Method",
    "METHODS",
    "ALL",
    "MEASURED",
    "PROTOTYPE",
    "PROTOTYPE_COMPAT",
    "PROTOTYPE_TUNED",
    "PROTOTYPE_MONOTONE",
    "PROTOTYPE_BEST",
    "PROTOTYPE_RECOMMENDED",
    "MONOTONE_MODEL",
    "MONOTONE_TRAIN",
    "TUNING_MULTIPLIERS",
    "N_SEEDS",
    "INNER_FOLDS",
    "common_budget_reach",
    "get",
    "make",
    "resolve",
    "display_name",
    "prototype_estimator",
]

#: Result labels of the prototype rows (the ``method`` column of results files).
PROTOTYPE = "prototype"
PROTOTYPE_COMPAT = "prototype (published code)"
PROTOTYPE_TUNED = "prototype (rates tuned on inner CV)"
PROTOTYPE_MONOTONE = "prototype (monotone)"
#: Every setting chosen by successive halving on inner splits (evaluation.tuning), refitted as a seed ensemble.
PROTOTYPE_BEST = "prototype (tuned ensemble)"
#: Prototypes started on and pushed onto training instances, a convex head (PrototypeMILClassifier.recommended).
PROTOTYPE_RECOMMENDED = "prototype (recommended)"
#: Learning-rate multipliers of the Table 1 rates tried on inner splits of each training fold.
TUNING_MULTIPLIERS = (1.0, 10.0, 100.0)
#: The monotone variant's settings where the caller gives none: those of the unit-test page
#: (chosen on synthetic data, seeds 100-119, never on a benchmark; book/monotone.md).
MONOTONE_MODEL = {"n_prototypes": 32, "lambda_p": 0.0, "lambda_d": 0.0}
MONOTONE_TRAIN = {"epochs": 30, "lr_prototypes": 1e-2, "lr_classifier": 1e-2, "batch_size": 4}
#: The common budget: inner folds of each training fold, and the seed ensemble of stochastic methods.
N_SEEDS = 5
INNER_FOLDS = 3


def prototype_estimator(dataset: str | None = None, *, compat: bool = False, monotone: bool = False,
                        random_state: int = 0, **overrides: Any):
    """The prototype model as an estimator: Table 1 for a benchmark, the paper's defaults otherwise.

    ``compat=True`` gives the published code's behaviour (its configs and per-instance
    standardisation); ``monotone=True`` the monotone variant with :data:`MONOTONE_MODEL`
    and :data:`MONOTONE_TRAIN` where ``overrides`` set nothing. ``overrides`` are
    estimator parameters and win over everything else.

    Parameters
    ----------
    dataset : str, optional
        A benchmark's name (any case, e.g. "Fox") gives its Table 1 settings; any other name,
        or None (default), the paper's defaults.
    compat : bool, default=False
        The published code's configs (:func:`~minitorch_proto.model.compat_config`) and
        per-instance standardisation.
    monotone : bool, default=False
        The monotone variant (:func:`~minitorch_proto.model.monotone_config`, k-means++ start).
    random_state : int, default=0
        The estimator's seed.
    **overrides
        :class:`~minitorch_proto.estimator.PrototypeMILClassifier` parameters.

    Returns
    -------
    PrototypeMILClassifier
        Unfitted.
    """
    from .estimator import PrototypeMILClassifier
    from .model import PrototypeMILConfig, compat_config, monotone_config
    from .paper import TABLE1, paper_configs
    from .training import TrainConfig, compat_train_config

    known = dataset is not None and dataset.lower() in TABLE1  # "Fox" is the benchmark fox
    mconf, tconf = paper_configs(dataset) if known else (PrototypeMILConfig(), TrainConfig())
    standardization = "feature"
    if compat:
        mconf, tconf, standardization = compat_config(mconf), compat_train_config(tconf), "instance"
    if monotone:
        unset = {k: v for k, v in MONOTONE_MODEL.items() if k not in overrides}
        mconf = monotone_config(mconf, init="kmeans++", **unset)
        tconf = replace(tconf, **{k: v for k, v in MONOTONE_TRAIN.items() if k not in overrides})
    est = PrototypeMILClassifier(standardization=standardization, random_state=random_state)
    params = est.get_params()
    # Only fields the estimator exposes (layer_norm_eps, betas, eps keep the configs' defaults).
    fields = {k: v for k, v in {**mconf.to_dict(), **tconf.to_dict()}.items() if k in params}
    for name in ("pooling", "betas"):  # tuples, as the estimator's defaults (to_dict gives lists)
        if name in fields:
            fields[name] = tuple(fields[name])
    return est.set_params(**{**fields, **overrides})


def _baseline(key: str) -> Callable[..., Any]:
    def build(random_state: int = 0, dataset: str | None = None, **overrides: Any):
        return StandardizedMIL(BASELINES[key](random_state).set_params(**overrides))

    return build


@dataclass(frozen=True)
class Method:
    """One registered method.

    Attributes
    ----------
    key : what ``--methods`` takes
    label : the ``method`` column of its rows in results files
    display : its name in tables and plots
    family : "prototype" or "baseline"
    build : ``build(random_state=0, dataset=None, **overrides) -> estimator`` at the
        method's defaults
    grid : the common budget's candidates (dicts of parameters of the wrapped estimator)
    stochastic : whether the fit depends on the seed (it gets the seed ensemble)
    """

    key: str
    label: str
    display: str
    family: str
    build: Callable[..., Any]
    grid: tuple[Mapping[str, Any], ...] = ()
    stochastic: bool = False
    note: str = field(default="", compare=False)

    def common(self, random_state: int = 0, dataset: str | None = None) -> InnerCVSelection:
        """The method under the common budget: grid chosen on inner folds, seed ensemble if stochastic."""
        if not self.grid:
            raise ValueError(f"{self.key} has no common budget {_NO_COMMON}; drop --budget common.")
        est = self.build(random_state, dataset)
        prefix = "estimator__" if isinstance(est, StandardizedMIL) else ""
        grid = [{prefix + k: v for k, v in c.items()} for c in self.grid]
        return InnerCVSelection(est, grid, inner_folds=INNER_FOLDS, n_seeds=N_SEEDS if self.stochastic else 1,
                                random_state=random_state)


#: Why a prototype row has no common budget: one wording for ``compare`` (:meth:`Method.common`) and
#: ``reproduce`` (:func:`common_budget_reach`).
_NO_COMMON = ("(the baselines have one; the prototype model's tuned rows are methods of their own: prototype-tuned, "
              "prototype-best)")


def common_budget_reach(methods, budget: str = "common") -> list[Method]:
    """The ``methods`` (keys or labels) that a common budget applies to: those with a grid, the baselines.

    Raises
    ------
    ValueError
        When none has one: ``--budget`` would be recorded and change nothing (``compare``, where
        every method gets the budget, refuses each method without one, in the same words).
    """
    found = [get(m) for m in methods]
    if not any(m.grid for m in found):
        names = ", ".join(m.key for m in found)
        raise ValueError(f"--budget {budget}: {names} {'has' if len(found) == 1 else 'have'} no common budget "
                         f"{_NO_COMMON}; drop --budget {budget} or add a baseline.")
    return [m for m in found if m.grid]


def _neural_grid() -> tuple[dict, ...]:
    # A factor 3 either side of the published learning rate.
    return ({"lr": 5e-4 / 3}, {"lr": 5e-4}, {"lr": 1.5e-3})


_BASELINE_ROWS = [
    ("attention", "attention MIL", _neural_grid(), True),
    ("gated_attention", "gated-attention MIL", _neural_grid(), True),
    ("mi_net_max", "mi-Net, instance level (max)", _neural_grid(), True),
    ("mi_net_mean", "mi-Net, instance level (mean)", _neural_grid(), True),
    ("MI_net_max", "MI-Net, bag level (max)", _neural_grid(), True),
    ("MI_net_mean", "MI-Net, bag level (mean)", _neural_grid(), True),
    ("miles", "MILES", ({"C": 0.1}, {"C": 1.0}, {"C": 10.0}), False),
    ("mi_svm", "mi-SVM", ({"C": 1.0}, {"C": 10.0}, {"C": 100.0}), False),
    ("bag_stats", "bag statistics + logistic regression", ({"C": 0.1}, {"C": 1.0}, {"C": 10.0}), False),
]


def _prototype(**kwargs: Any) -> Callable[..., Any]:
    def build(random_state: int = 0, dataset: str | None = None, **overrides: Any):
        return prototype_estimator(dataset, random_state=random_state, **kwargs, **overrides)

    return build


def _tuned(random_state: int = 0, dataset: str | None = None, **overrides: Any) -> InnerCVSelection:
    # Table 1's rates times TUNING_MULTIPLIERS, chosen by mean inner AUC on INNER_FOLDS folds.
    est = prototype_estimator(dataset, random_state=random_state, **overrides)
    grid = [{"lr_prototypes": est.lr_prototypes * k, "lr_classifier": est.lr_classifier * k}
            for k in TUNING_MULTIPLIERS]
    return InnerCVSelection(est, grid, inner_folds=INNER_FOLDS, n_seeds=1, random_state=random_state,
                            scoring="auc")


def _best(random_state: int = 0, dataset: str | None = None, **overrides: Any):
    # The nested search's budget is its whole definition; the benchmark plays no part.
    from .evaluation.tuning import HalvingSearch, SearchBudget

    budget = overrides.pop("budget", None) or SearchBudget(random_state=random_state)
    return HalvingSearch(budget, random_state=random_state, **overrides)


def _recommended(random_state: int = 0, dataset: str | None = None, **overrides: Any):
    # One recipe for every data set: the benchmark's Table 1 plays no part.
    from .estimator import PrototypeMILClassifier

    return PrototypeMILClassifier.recommended(random_state=random_state, **overrides)


#: key -> Method, in the order tables list them.
METHODS: dict[str, Method] = {m.key: m for m in [
    Method("prototype", PROTOTYPE, "prototype model (paper-faithful)", "prototype", _prototype()),
    Method("prototype-compat", PROTOTYPE_COMPAT, "prototype model (published code's behaviour)", "prototype",
           _prototype(compat=True)),
    Method("prototype-tuned", PROTOTYPE_TUNED, "prototype model (rates tuned on inner CV)", "prototype", _tuned,
           note="learning rates x (1, 10, 100) of Table 1 chosen by mean AUC on 3 inner folds"),
    Method("prototype-best", PROTOTYPE_BEST, "prototype model (nested search, 5-seed ensemble)", "prototype", _best,
           note="successive-halving search on inner folds, 5-seed ensemble"),
    Method("prototype-recommended", PROTOTYPE_RECOMMENDED,
           "prototype model (recommended: real-instance prototypes, convex head)", "prototype", _recommended),
    Method("prototype-monotone", PROTOTYPE_MONOTONE, "prototype model (monotone variant)", "prototype",
           _prototype(monotone=True)),
    *[Method(key, key, display, "baseline", _baseline(key), grid, stochastic)
      for key, display, grid, stochastic in _BASELINE_ROWS],
]}

#: What ``--methods all`` means: every registered method but the nested search (``prototype-best``, hours).
ALL = tuple(key for key in METHODS if key != "prototype-best")
#: The rows of the frozen table ``measured_results`` (``benchmarks/reproduce_all.py``): the paper-faithful and
#: published-code rows, the tuned rates, every baseline. The recommended and monotone rows have frozen tables of
#: their own (their choices and variants), so the one ranking would list them twice.
MEASURED = ("prototype", "prototype-compat", "prototype-tuned", *(row[0] for row in _BASELINE_ROWS))

_BY_LABEL = {m.label: m for m in METHODS.values()}


def get(key_or_label: str) -> Method:
    """The method with this key (or results label); a one-line ValueError naming the choices otherwise."""
    if key_or_label in METHODS:
        return METHODS[key_or_label]
    if key_or_label in _BY_LABEL:
        return _BY_LABEL[key_or_label]
    raise ValueError(f"unknown method {key_or_label!r}; choose from {', '.join(METHODS)} or 'all'")


def resolve(spec: str) -> list[Method]:
    """``"a,b,c"`` or ``"all"`` as methods, in the order given (duplicates dropped); ``all`` may stand among
    other names (``prototype-best,all``: that one first, then every other)."""
    keys = [s.strip() for s in str(spec).split(",") if s.strip()]
    keys = [k for key in keys for k in (ALL if key == "all" else [key])]
    if not keys:
        raise ValueError("no method named; choose from " + ", ".join(METHODS))
    out: list[Method] = []
    for k in keys:
        m = get(k)
        if m not in out:
            out.append(m)
    return out


def make(key: str, random_state: int = 0, *, dataset: str | None = None, budget: Any = "defaults",
         **overrides: Any) -> BaseEstimator:
    """A fresh, unfitted estimator for ``key`` under ``budget``.

    Parameters
    ----------
    key : str
        A registered method (:data:`METHODS`), as ``--methods`` takes it.
    random_state : int, default=0
        The estimator's seed (member 0's under the common budget).
    dataset : str, optional
        The data set's name: a benchmark's (any case) gives the prototype rows the paper's
        Table 1 rates; any other name, or None, the defaults.
    budget : {"defaults", "common"} or SearchBudget, default="defaults"
        The method at its defaults, or with the common budget (inner-CV tuning over its fixed
        grid and, for stochastic methods, the seed ensemble). For ``"prototype-best"``, a
        :class:`~minitorch_proto.evaluation.tuning.SearchBudget` is its search's budget (the
        estimator's own ``budget`` parameter, which this keyword would otherwise hide).
    **overrides
        Estimator parameters (``"defaults"`` only).

    Raises
    ------
    ValueError
        For an unknown ``key``, a ``budget`` that is none of these (None included), a
        SearchBudget for another method than ``"prototype-best"``, or overrides with ``"common"``.
    """
    from .evaluation.tuning import SearchBudget

    m = get(key)
    if isinstance(budget, SearchBudget):  # the nested search's own parameter
        if m.key != "prototype-best":  # said here: the estimator would name a parameter the caller never set
            raise ValueError(f"a SearchBudget is the budget of prototype-best's search; {m.key} takes budget "
                             "'defaults' or 'common'.")
        return m.build(random_state, dataset, budget=budget, **overrides)
    if budget == "defaults":
        return m.build(random_state, dataset, **overrides)
    if budget == "common":
        if overrides:
            raise ValueError("the common budget takes no parameter overrides.")
        return m.common(random_state, dataset)
    raise ValueError(f"budget must be 'defaults', 'common' or (prototype-best only) a SearchBudget, got {budget!r}.")


def display_name(label: str) -> str:
    """The name a table or plot shows for a results label or key (the label itself when unknown)."""
    m = _BY_LABEL.get(label) or METHODS.get(label)
    if m is None:  # a baseline under the common budget: "miles (tuned on inner CV)" -> "MILES (tuned on inner CV)"
        base, sep, budget = label.partition(" (")
        m = METHODS.get(base) if sep else None
        return f"{m.display} ({budget}" if m is not None else label
    return m.display
