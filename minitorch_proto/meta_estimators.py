"""Estimators built from estimators: a bag pipeline, a seed ensemble, an inner-CV selection.

The cross-validation harness used to do work that the estimators did not (it
standardised the baselines' features per training fold), so a user who built
``MILES().fit(raw_bags, y)`` got a different model from the one the tables
report. These wrappers put that work where scikit-learn users expect it, in the
estimator: whatever :func:`~minitorch_proto.methods.make` builds and
:func:`~minitorch_proto.evaluation.cross_validate` scores is the same object a
user can ``fit`` on raw bags.

* :class:`StandardizedMIL` - per-feature standardisation fitted on the bags given
  to ``fit``, then the wrapped estimator.
* :class:`SeedEnsemble` - ``n_seeds`` copies with seeds ``random_state + 10_000 j``,
  probabilities averaged.
* :class:`InnerCVSelection` - each candidate of a fixed grid scored on stratified
  inner splits of the training bags only (mean accuracy, ties by AUC, then grid
  order), the winner (or the mean of the ``top_k`` best) refitted on all of them,
  optionally as a seed ensemble.

Each has ``fit_many(train_sets, random_states)``, which fits one copy per training
set and trains the neural members of all of them together
(:func:`minitorch_proto.baselines.batched_fit.fit_many`), so a whole cross-validation
stays one batched program per setting.
"""
from __future__ import annotations

import warnings
from typing import Any, Mapping, Sequence, Union

import numpy as np
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.model_selection import ParameterGrid, StratifiedKFold
from sklearn.utils.validation import check_is_fitted

from .evaluation.metrics import scores_from_proba
from .preprocessing import BagStandardizer
from .utils import rank_candidates
from .validation import (base_seed, check_bags, check_int, check_labels, check_named_bags, derived_seed, fits_fresh,
                         frames_in_model_order, fresh_fit)

#: scikit-learn's convention: an int, None (a fresh seed each fit) or a numpy generator (its next draw).
RandomState = Union[int, np.random.RandomState, np.random.Generator, None]

__all__ = ["StandardizedMIL", "SeedEnsemble", "InnerCVSelection", "with_random_state", "member_seeds", "proba_in",
           "copy_input_attributes", "rank_candidates"]


def member_seeds(seed: int, k: int) -> list[int]:
    """Seeds of a k-member ensemble; member 0 is the single model's seed."""
    return [derived_seed(int(seed) + 10_000 * j) for j in range(k)]


def copy_input_attributes(wrapper, fitted) -> None:
    """``n_features_in_`` and ``feature_names_in_`` of a fitted inner model on its wrapper, as
    scikit-learn's searches expose their best estimator's (absent there, absent here)."""
    for name in ("n_features_in_", "feature_names_in_"):
        if hasattr(fitted, name):
            setattr(wrapper, name, getattr(fitted, name))


def with_random_state(estimator: BaseEstimator, seed: int) -> BaseEstimator:
    """An unfitted clone with every ``random_state`` parameter (nested ones too) set to ``seed``."""
    est = clone(estimator)
    keys = [k for k in est.get_params(deep=True) if k == "random_state" or k.endswith("__random_state")]
    return est.set_params(**{k: int(seed) for k in keys})


def proba_in(est, bags, classes: np.ndarray) -> np.ndarray:
    """``est.predict_proba(bags)`` with columns in the order of ``classes``."""
    proba = np.asarray(est.predict_proba(bags), dtype=np.float64)
    own = list(np.asarray(est.classes_).tolist())
    full = np.zeros((len(bags), len(classes)))
    for j, c in enumerate(classes.tolist()):
        if c in own:
            full[:, j] = proba[:, own.index(c)]
    return full


def _fit_all(estimators: Sequence[BaseEstimator], train_sets, n_jobs: int) -> list:
    """Fit each estimator on its own (bags, y); wrappers and baselines train together where they can."""
    if not estimators:
        return []
    first = estimators[0]
    # Copies of one class train together through its fit_many hook (the baselines' is batched_fit.fit_many,
    # which clones its template per set, the per-model settings travelling as params); a mix, one by one.
    if hasattr(first, "fit_many") and all(type(e) is type(first) for e in estimators):
        return first.fit_many(train_sets, None, estimators=estimators, n_jobs=n_jobs)
    return [e.fit(bags, y) for e, (bags, y) in zip(estimators, train_sets)]


class _Wrapper(ClassifierMixin, BaseEstimator):
    """Prediction methods shared by the wrappers: everything goes through ``predict_proba``."""

    def predict(self, bags) -> np.ndarray:
        """The class of largest probability, in the labels given to ``fit``."""
        proba = self.predict_proba(bags)  # first: an unfitted wrapper says so, rather than lacking classes_
        return self.classes_[np.argmax(proba, axis=1)]

    def decision_function(self, bags) -> np.ndarray:
        """Two classes: the log-odds of ``classes_[1]``, shape (n_bags,). More classes: the log
        class probabilities, shape (n_bags, n_classes), as scikit-learn's multi-class scores.

        Computed from the inner models' own scores where they have them (the log-odds of their mean
        probability, in log space): through probabilities it would stop at about +-28, and bags the
        inner models rank apart would tie for a ranking metric."""
        scores = self._member_scores(bags) if len(getattr(self, "classes_", ())) == 2 else None
        if scores is not None:
            d = np.asarray(scores, dtype=np.float64)  # (members, bags): each member's log-odds
            return logsumexp(-np.logaddexp(0, -d), axis=0) - logsumexp(-np.logaddexp(0, d), axis=0)
        proba = np.clip(self.predict_proba(bags), 1e-12, 1 - 1e-12)
        if proba.shape[1] > 2:
            return np.log(proba)
        return np.log(proba[:, 1]) - np.log1p(-proba[:, 1])

    def _member_scores(self, bags, members=None) -> list | None:
        """Each averaged member's log-odds of ``classes_[1]``, or None when one lacks them."""
        members = getattr(self, "estimators_", None) if members is None else members
        if not members or not all(hasattr(m, "decision_function") and np.array_equal(m.classes_, self.classes_)
                                  for m in members):
            return None
        return [np.asarray(m.decision_function(bags), dtype=np.float64).reshape(-1) for m in members]

    def fit_many(self, train_sets, random_states=None, *, estimators=None, n_jobs: int = 1) -> list:
        """Fit one copy per ``(bags, y)`` in ``train_sets``; same models as fitting them one by one.

        ``random_states`` seeds the copies (:func:`with_random_state`); ``estimators``
        (unfitted copies of this one) may be given instead.
        """
        if estimators is None:
            if random_states is None or len(random_states) != len(train_sets):
                raise ValueError("fit_many needs one random state per training set.")
            estimators = [with_random_state(self, s) for s in random_states]
        estimators = list(estimators)
        with fresh_fit(estimators):  # a failed fit leaves them unfitted, not half new, half old
            return self._fit_many(estimators, list(train_sets), n_jobs)

    def _fit_many(self, estimators, train_sets, n_jobs):  # pragma: no cover - overridden
        return [e.fit(bags, y) for e, (bags, y) in zip(estimators, train_sets)]


class StandardizedMIL(_Wrapper):
    """Per-fold feature standardisation, then a bag classifier: fit on raw bags as the tables do.

    Parameters
    ----------
    estimator : a bag classifier (``fit(bags, y)``, ``predict_proba``, ``classes_``)
    standardization : {"feature", "instance", "none"}, default="feature"
        See :class:`~minitorch_proto.preprocessing.BagStandardizer`; fitted on the
        bags given to :meth:`fit` only.

    Attributes
    ----------
    standardizer_ : BagStandardizer
    estimator_ : the fitted copy of ``estimator``
    classes_ : ndarray, the labels given to ``fit``
    n_features_in_ : int
    """

    def __init__(self, estimator: BaseEstimator, standardization: str = "feature") -> None:
        self.estimator = estimator
        self.standardization = standardization

    def _prepare(self, bags):
        bags, names = check_named_bags(bags)  # DataFrame bags: by column name, here and at predict
        self.standardizer_ = BagStandardizer(self.standardization).fit(bags)
        self.n_features_in_ = int(bags[0].shape[1])
        if names is not None:
            self.feature_names_in_ = np.asarray(names, dtype=object)
        return self.standardizer_.transform(bags)

    @fits_fresh
    def fit(self, bags, y) -> "StandardizedMIL":
        """Fit the standardiser on ``bags``, then a clone of ``estimator`` on the standardised bags."""
        self.estimator_ = clone(self.estimator).fit(self._prepare(bags), y)
        self.classes_ = np.asarray(self.estimator_.classes_)
        return self

    def _fit_many(self, estimators, train_sets, n_jobs):
        inner = [clone(e.estimator) for e in estimators]
        prepared = [(e._prepare(bags), y) for e, (bags, y) in zip(estimators, train_sets)]
        for e, fitted in zip(estimators, _fit_all(inner, prepared, n_jobs)):
            e.estimator_ = fitted
            e.classes_ = np.asarray(fitted.classes_)
        return estimators

    def _standardised(self, bags):
        check_is_fitted(self, "estimator_")
        bags = frames_in_model_order(bags, getattr(self, "feature_names_in_", None))
        bags = check_bags(bags, n_features=self.n_features_in_)  # before the standardiser: a one-line message
        return self.standardizer_.transform(bags)

    def predict_proba(self, bags) -> np.ndarray:
        """Class probabilities of the standardised bags, columns ordered as ``classes_``."""
        std = self._standardised(bags)  # first: an unfitted wrapper says so (NotFittedError)
        return np.asarray(self.estimator_.predict_proba(std))

    def _member_scores(self, bags, members=None) -> list | None:
        std = self._standardised(bags)
        return super()._member_scores(std, [self.estimator_])


class SeedEnsemble(_Wrapper):
    """``n_seeds`` copies of an estimator, seeded apart, with their class probabilities averaged.

    Member j is ``estimator`` with every ``random_state`` set to
    ``random_state + 10_000 j`` (:func:`member_seeds`), so member 0 is the single model
    (``random_state=None`` draws a fresh seed each fit, a numpy generator its next draw).

    Parameters
    ----------
    estimator : estimator
        The model to repeat (cloned for each member).
    n_seeds : int, default=5
        Number of members.
    random_state : int, RandomState, Generator or None, default=0
        Member 0's seed.

    Attributes
    ----------
    estimators_ : list of fitted members
    classes_ : ndarray
    """

    def __init__(self, estimator: BaseEstimator, n_seeds: int = 5, random_state: RandomState = 0) -> None:
        self.estimator = estimator
        self.n_seeds = n_seeds
        self.random_state = random_state

    def _members(self):
        k = int(self.n_seeds)
        if k < 1 or k != self.n_seeds:
            raise ValueError(f"n_seeds must be a positive integer, got {self.n_seeds!r}.")
        return [with_random_state(self.estimator, s) for s in member_seeds(base_seed(self.random_state), k)]

    def fit(self, bags, y) -> "SeedEnsemble":
        """Fit every member on the same bags."""
        return self.fit_many([(bags, y)], estimators=[self])[0]

    def _fit_many(self, estimators, train_sets, n_jobs):
        members = [e._members() for e in estimators]
        flat = [m for ms in members for m in ms]
        sets = [s for e, s, ms in zip(estimators, train_sets, members) for _ in ms]
        fitted = iter(_fit_all(flat, sets, n_jobs))
        for e, ms in zip(estimators, members):
            e.estimators_ = [next(fitted) for _ in ms]
            e.classes_ = np.asarray(e.estimators_[0].classes_)
            copy_input_attributes(e, e.estimators_[0])
        return estimators

    def predict_proba(self, bags) -> np.ndarray:
        """The members' mean class probabilities."""
        check_is_fitted(self, "estimators_")
        return np.mean([proba_in(m, bags, self.classes_) for m in self.estimators_], axis=0)


class InnerCVSelection(_Wrapper):
    """Choose among fixed candidate settings on inner splits of the training bags, then refit.

    For each candidate (a dict of ``set_params`` arguments) a copy is fitted on each of
    ``inner_folds`` stratified splits of the bags given to :meth:`fit` (shuffled with
    ``random_state``; split s's copy, s = 1, 2, ..., seeded ``10 random_state + s``) and scored on that
    split's held-out bags. With ``scoring="accuracy"`` the candidate with the best mean
    inner accuracy wins (ties: mean inner AUC, then grid order); with ``scoring="auc"``
    the best mean inner AUC (a split whose AUC is undefined counts its accuracy; ties:
    grid order). The winner is refitted on all the bags, as a seed ensemble of
    ``n_seeds`` members. Nothing outside the bags given to ``fit`` is seen.

    With ``top_k > 1`` nothing is picked: the ``top_k`` best candidates (in the same
    order) are each refitted as the winner would be, and their class probabilities
    averaged. Picking one of many candidates on a few inner folds of small bag sets
    rewards the luckiest split (Cawley & Talbot, JMLR 2010); an average of the best few
    is less sensitive to which candidate the noise put first.

    Parameters
    ----------
    estimator : estimator
        The model whose settings are chosen (cloned, never fitted itself).
    grid : list of dict, or dict of lists, default=()
        The candidates, fixed before any data are seen: ``set_params`` arguments, or a dict of
        lists expanded to every combination (scikit-learn's ``param_grid``); empty: the estimator as given.
    inner_folds : int, default=3
        Stratified inner splits of the training bags.
    n_seeds : int, default=1
        Members of the seed ensemble each selected candidate is refitted as (1: the single model).
    random_state : int, RandomState, Generator or None, default=0
        Seeds the inner splits and the copies; None draws a fresh seed on each fit.
    scoring : {"accuracy", "auc"}, default="accuracy"
        The inner score that ranks the candidates.
    top_k : int, default=1
        How many of the best candidates are refitted and averaged.

    Attributes
    ----------
    best_params_ : dict, the best candidate
    selected_params_ : list of dict, the ``top_k`` candidates averaged, best first
    inner_scores_ : ndarray (n_candidates, 2), mean inner accuracy and AUC
    best_score_ : float, the best candidate's mean inner score under ``scoring``
    estimators_ : the refitted selected candidates, best first (each a :class:`SeedEnsemble`
        or the single model)
    best_estimator_ : ``estimators_[0]``
    """

    def __init__(self, estimator: BaseEstimator, grid: Sequence[Mapping[str, Any]] = (), inner_folds: int = 3,
                 n_seeds: int = 1, random_state: RandomState = 0, scoring: str = "accuracy", top_k: int = 1) -> None:
        self.estimator = estimator
        self.grid = grid
        self.inner_folds = inner_folds
        self.n_seeds = n_seeds
        self.random_state = random_state
        self.scoring = scoring
        self.top_k = top_k

    def fit(self, bags, y) -> "InnerCVSelection":
        """Score every candidate on inner splits of ``bags``, then refit the best on all of them."""
        return self.fit_many([(bags, y)], estimators=[self])[0]

    def _inner_splits(self, y, seed: int) -> list[tuple[np.ndarray, np.ndarray, int]]:
        # As many splits as the smaller class allows (a class of 2 bags: 2 splits); none below 2.
        n_splits = min(int(self.inner_folds), int(np.bincount(y).min()))
        if n_splits < 2:
            return []
        skf = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=seed)
        return [(tr, va, derived_seed(seed * 10 + s + 1)) for s, (tr, va) in enumerate(skf.split(np.zeros(len(y)), y))]

    def _fit_many(self, estimators, train_sets, n_jobs):
        if self.scoring not in ("accuracy", "auc"):
            raise ValueError(f"scoring must be 'accuracy' or 'auc', got {self.scoring!r}.")
        grid = _candidates(self.grid)
        for e in estimators:
            check_int("n_seeds", e.n_seeds)
            check_int("inner_folds", e.inner_folds, 2)
        top_k = self.top_k
        if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or not 1 <= top_k <= len(grid):
            raise ValueError(f"top_k must be an integer from 1 to the number of candidates ({len(grid)}), "
                             f"got {top_k!r}.")
        work, sets, where, n_splits = [], [], [], []
        seeds = [base_seed(e.random_state) for e in estimators]  # drawn once per fit: splits and refits share it
        for e_i, (e, (bags, y)) in enumerate(zip(estimators, train_sets)):
            check_bags(bags)  # the bags' problems first, in the words every estimator uses
            y_enc, _ = check_labels(y, len(bags))
            splits = e._inner_splits(y_enc, seeds[e_i])
            n_splits.append(len(splits))
            if not splits:
                warnings.warn(f"{type(e).__name__}: the smaller class has {int(np.bincount(y_enc).min())} bag(s), "
                              "fewer than the 2 inner cross-validation needs; the estimator keeps its own settings.",
                              RuntimeWarning, stacklevel=3)
            for g, cand in enumerate(grid):
                for tr, va, seed in splits:
                    work.append(with_random_state(clone(e.estimator).set_params(**cand), seed))
                    # The labels as given: a class_weight dict names them, as in the refit below.
                    sets.append(([bags[i] for i in tr], np.asarray(y)[tr]))
                    where.append((e_i, g, va))
        # Fitted in the order made (training set, candidate, split): the batched trainers group copies that
        # share settings themselves. A grid-major order put each candidate's copies side by side and left one
        # of two cores idle for a quarter of the tuned rates' run (Fox, 1 x 10: 38.1 s against 29.4 s).
        fitted = _fit_all(work, sets, n_jobs)
        finals = []
        for e_i, (e, (bags, y)) in enumerate(zip(estimators, train_sets)):
            y_enc, classes = check_labels(y, len(bags))
            scores = np.zeros((len(grid), 2))
            by_auc = np.zeros(len(grid))
            for k in range(len(work)):
                if where[k][0] != e_i:
                    continue
                _, g, va = where[k]
                est = fitted[k]
                proba = proba_in(est, [bags[i] for i in va], classes)  # columns in y_enc's order
                acc, auc = scores_from_proba(y_enc[va], proba)
                scores[g] += (acc, 0.5 if np.isnan(auc) else auc)
                by_auc[g] += (acc if np.isnan(auc) else auc) / n_splits[e_i]
            scores /= max(n_splits[e_i], 1)
            if not n_splits[e_i]:  # nothing to choose on: the estimator as given, every candidate unscored
                e.inner_scores_, e.best_score_, e.best_params_ = np.full((len(grid), 2), np.nan), np.nan, {}
                e.selected_params_ = [{}]  # one refit: top_k copies of one setting would be the same model
                finals.append(SeedEnsemble(clone(e.estimator), int(e.n_seeds), seeds[e_i]) if int(e.n_seeds) > 1
                              else with_random_state(clone(e.estimator), seeds[e_i]))
                continue
            ranked = rank_candidates(scores, by_auc, e.scoring)
            e.best_score_ = float(by_auc[ranked[0]] if e.scoring == "auc" else scores[ranked[0], 0])
            selected = ranked[: int(e.top_k)]
            e.inner_scores_, e.best_params_ = scores, grid[selected[0]]
            e.selected_params_ = [grid[g] for g in selected]
            for g in selected:
                chosen = clone(e.estimator).set_params(**grid[g])
                finals.append(SeedEnsemble(chosen, int(e.n_seeds), seeds[e_i]) if int(e.n_seeds) > 1
                              else with_random_state(chosen, seeds[e_i]))
        final_sets = [s for e, s in zip(estimators, train_sets) for _ in e.selected_params_]
        refitted = iter(_fit_all(finals, final_sets, n_jobs) if len({type(f) for f in finals}) == 1 else
                        [f.fit(b, y) for f, (b, y) in zip(finals, final_sets)])
        for e in estimators:
            e.estimators_ = [next(refitted) for _ in e.selected_params_]
            e.best_estimator_ = e.estimators_[0]
            e.classes_ = np.asarray(e.best_estimator_.classes_)
            copy_input_attributes(e, e.best_estimator_)
        return estimators

    def predict_proba(self, bags) -> np.ndarray:
        """Class probabilities of the refitted best candidate (the mean over the ``top_k`` best)."""
        check_is_fitted(self, "estimators_")
        return np.mean([proba_in(m, bags, self.classes_) for m in self.estimators_], axis=0)


def _candidates(grid) -> list[dict]:
    """The grid as a list of candidate settings: a list of dicts as given, or a dict of lists
    (scikit-learn's ``param_grid``) expanded to every combination."""
    listed = lambda v: isinstance(v, (Sequence, np.ndarray)) and not isinstance(v, str)  # noqa: E731 - as ParameterGrid
    if isinstance(grid, Mapping) and all(listed(v) for v in grid.values()):
        return list(ParameterGrid(grid)) or [{}]
    if isinstance(grid, Mapping):
        raise ValueError("grid is a list of candidate settings ([{'C': 0.1}, {'C': 1.0}]) or a dict of lists "
                         f"({{'C': [0.1, 1.0]}}); got a dict whose values are not all lists: {dict(grid)!r}.")
    candidates = []
    for c in grid:
        if not isinstance(c, Mapping):
            raise ValueError(f"each candidate of grid is a dict of settings, got {c!r}.")
        candidates.append(dict(c))
    return candidates or [{}]
