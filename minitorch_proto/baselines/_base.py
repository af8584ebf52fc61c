"""Shared machinery for the baseline MIL classifiers.

Everything here is private to :mod:`minitorch_proto.baselines`:

* :class:`BaseMILClassifier` - the scikit-learn contract (validation, ``classes_``,
  ``predict``/``predict_proba`` derived from ``decision_function``).
* :func:`select_by_inner_cv` - hyper-parameter selection on stratified inner splits of
  the *training* bags only.
* :func:`stack_bags` / :func:`segment_max_numpy` - flat (instances x features) view of a
  list of bags and per-bag reductions on it.
"""
from __future__ import annotations

import warnings
from typing import Any, Mapping, Sequence

import numpy as np
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import ParameterGrid, StratifiedKFold
from sklearn.utils.validation import check_is_fitted

from ..utils import rank_candidates
from ..validation import check_bags, check_int, check_labels, check_named_bags, frames_in_model_order

SOURCE_PAPER = "paper"
SOURCE_DEFAULT = "default"
SOURCE_TUNED = "tuned (inner CV)"


def stack_bags(bags: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Stack bags into one (n_instances, n_features) array.

    Returns the stacked array and ``offsets`` of length ``n_bags + 1``: bag ``i`` is
    rows ``offsets[i]:offsets[i + 1]``.
    """
    sizes = np.fromiter((b.shape[0] for b in bags), dtype=np.int64, count=len(bags))
    offsets = np.zeros(len(bags) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return np.vstack(bags), offsets


def segment_max_numpy(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Maximum of ``values`` (1-D or 2-D, rows = instances) within each bag."""
    return np.maximum.reduceat(values, offsets[:-1], axis=0)


class BaseMILClassifier(ClassifierMixin, BaseEstimator):
    """Binary bag classifier: subclasses implement ``fit`` and ``decision_function``.

    ``decision_function`` returns one real score per bag, larger meaning more likely
    ``classes_[1]`` (the label that sorts last, the "positive" class of the instance-level methods). ``predict_proba`` is ``sigmoid(decision_function)``; ``predict`` is
    ``classes_[decision_function > 0]``, so it always agrees with
    ``predict_proba(...)[:, 1] > 0.5``.
    """

    #: Where the default hyper-parameters come from (overridden per class).
    hyperparameter_source: str = SOURCE_DEFAULT

    # -- validation -------------------------------------------------------------------
    def _validate_fit_data(self, bags, y) -> tuple[list[np.ndarray], np.ndarray]:
        bags, names = check_named_bags(bags)  # DataFrame bags: by column name, here and at predict
        if names is not None:
            self.feature_names_in_ = np.asarray(names, dtype=object)
        y_enc, classes = check_labels(y, len(bags))
        if len(classes) != 2:
            raise ValueError(
                f"{type(self).__name__} supports binary problems only; y has "
                f"{len(classes)} classes {classes.tolist()}."
            )
        self.classes_ = classes
        self.n_features_in_ = int(bags[0].shape[1])
        return bags, y_enc

    def _class_weight_for(self, codes: tuple = (0, 1)):
        """``class_weight`` keyed as the fitted scikit-learn model sees the classes.

        A dict names the labels given to ``fit`` (as in scikit-learn); the model inside is fitted on
        their codes (0/1, or -1/+1 for mi-SVM), so the keys are translated, and a key that is not a
        label of ``y`` is a one-line error (it had weighted the other class, or failed in scikit-learn).
        """
        from ..convex_head import check_class_weight

        weights = check_class_weight(self.class_weight, self.classes_)
        return {codes[k]: w for k, w in weights.items()} if isinstance(weights, dict) else weights

    def _validate_predict_data(self, bags) -> list[np.ndarray]:
        check_is_fitted(self, "classes_")
        return check_bags(frames_in_model_order(bags, getattr(self, "feature_names_in_", None)),
                          n_features=self.n_features_in_)

    def fit_many(self, train_sets, random_states=None, *, estimators=None, n_jobs: int = 1) -> list:
        """Fit one copy per ``(bags, y)`` in ``train_sets``; the neural baselines' copies train together.

        Each returned estimator is the model ``clone(self).set_params(random_state=s).fit(bags, y)``
        gives (:func:`~minitorch_proto.baselines.batched_fit.fit_many`): equal in float64 (tested);
        in float32, the default, equal up to rounding, which can tip a neural fit to another
        outcome. :func:`~minitorch_proto.evaluation.cross_validate` batches a bare baseline's folds
        as it does the registry's wrapped ones (Musk1, 1 x 10: attention 83.2 s -> 6.1 s, MI-Net
        47.4 s -> 2.5 s on two cores).

        Parameters
        ----------
        train_sets : sequence of (bags, y)
        random_states : sequence of int, optional
            One seed per training set; needed unless ``estimators`` is given.
        estimators : sequence of unfitted copies of this estimator, optional
            Their settings and seeds are used; fitted copies of them are returned.
        n_jobs : int, default=1
            Parallel workers (threads of the compiled loops; processes for the non-neural ones).

        Returns
        -------
        list of fitted estimators, in the order of ``train_sets``.
        """
        from sklearn.base import clone

        from .batched_fit import fit_many

        train_sets = list(train_sets)
        if estimators is None:
            if random_states is None or len(random_states) != len(train_sets):
                raise ValueError("fit_many needs one random state per training set.")
            estimators = [clone(self).set_params(random_state=int(s)) for s in random_states]
        params = [e.get_params(deep=False) for e in estimators]
        seeds = [p.pop("random_state") for p in params]
        return fit_many(self, train_sets, seeds, params=params, n_jobs=n_jobs)

    # -- derived predictions ---------------------------------------------------------
    def decision_function(self, bags) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def predict_proba(self, bags) -> np.ndarray:
        """Class probabilities, shape (n_bags, 2), columns ordered as ``classes_``."""
        p1 = expit(np.asarray(self.decision_function(bags), dtype=np.float64))
        return np.column_stack([1.0 - p1, p1])

    def predict(self, bags) -> np.ndarray:
        """Predicted label of each bag (values from ``classes_``)."""
        scores = np.asarray(self.decision_function(bags))
        return self.classes_[(scores > 0).astype(np.int64)]


def _inner_score(estimator, bags_val, y_val) -> tuple[float, float]:
    scores = estimator.decision_function(bags_val)
    acc = float(np.mean((scores > 0).astype(np.int64) == y_val))
    try:
        auc = float(roc_auc_score(y_val, scores)) if len(np.unique(y_val)) == 2 else 0.5
    except ValueError:
        auc = 0.5
    return acc, auc


def select_by_inner_cv(
    estimator: BaseMILClassifier,
    bags: list[np.ndarray],
    y_enc: np.ndarray,
    param_grid: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Sequence[Any]]],
    n_splits: int,
    random_state: int | None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Pick hyper-parameters by stratified K-fold over the given (training) bags.

    Every candidate is ``clone(estimator).set_params(tune=False, **params)``, fitted on
    the inner-training bags and scored on the inner-validation bags, which are all drawn
    from ``bags`` - the estimator never sees anything else. The score is mean inner
    accuracy; ties are broken by mean inner AUC, then by grid order. Convergence warnings
    of the candidate fits are silenced.

    Returns the best parameter dict and one record per candidate.
    """
    counts = np.bincount(y_enc, minlength=2)
    k = min(check_int("inner_cv", n_splits, 2), int(counts.min()))
    grid = list(ParameterGrid(param_grid))
    if k < 2 or len(grid) == 0:
        warnings.warn(
            f"Cannot tune {type(estimator).__name__}: the smaller class has {counts.min()} "
            "bag(s), fewer than 2 needed for inner cross-validation; using the given "
            "hyper-parameters.",
            RuntimeWarning,
            stacklevel=3,
        )
        return {}, []
    splitter = StratifiedKFold(n_splits=k, shuffle=True, random_state=random_state)
    splits = list(splitter.split(np.zeros(len(bags)), y_enc))
    results: list[dict[str, Any]] = []
    for params in grid:
        accs, aucs = [], []
        for train_idx, val_idx in splits:
            est = clone(estimator).set_params(tune=False, **params)
            with warnings.catch_warnings():
                # extreme grid corners may not converge; that only lowers their inner score
                warnings.simplefilter("ignore", ConvergenceWarning)
                # The labels as given: a class_weight dict names the user's classes, not the codes 0/1.
                est.fit([bags[i] for i in train_idx], estimator.classes_[y_enc[train_idx]])
            acc, auc = _inner_score(est, [bags[i] for i in val_idx], y_enc[val_idx])
            accs.append(acc)
            aucs.append(auc)
        results.append(
            {"params": dict(params), "mean_accuracy": float(np.mean(accs)), "mean_auc": float(np.mean(aucs))}
        )
    # Equal scores summed in another order may differ in the last bit: the same tie rule as the common budget's.
    table = np.array([[r["mean_accuracy"], r["mean_auc"]] for r in results])
    best = rank_candidates(table, table[:, 1], "accuracy")[0]
    return dict(results[best]["params"]), results
