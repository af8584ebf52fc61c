"""Bag-statistics baseline: summarise each bag by per-feature statistics, then logistic regression.

A bag of shape (n_i, L) becomes the concatenation of the requested statistics over its
instances (default mean, min and max: a vector of length 3L). This is the simple
"set-to-vector" embedding used as a sanity baseline in the MIL literature (Gartner et al.
2002's statistics kernel uses the per-feature min and max; the mean is added here). Defaults
(``C=1.0``, lbfgs, ``max_iter=5000``) are **our choices**.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from numpy.typing import ArrayLike
from sklearn.linear_model import LogisticRegression

from ..validation import check_number, fits_fresh
from ._base import SOURCE_DEFAULT, BaseMILClassifier

__all__ = ["BagStatistics", "bag_statistics"]

_STATS = {
    "mean": lambda b: b.mean(axis=0),
    "min": lambda b: b.min(axis=0),
    "max": lambda b: b.max(axis=0),
    "std": lambda b: b.std(axis=0),
    "median": lambda b: np.median(b, axis=0),
}


def _check_statistics(statistics) -> tuple[str, ...]:
    if isinstance(statistics, str):
        statistics = (statistics,)
    stats = tuple(statistics)
    if not stats:
        raise ValueError("statistics must name at least one statistic.")
    unknown = [s for s in stats if s not in _STATS]
    if unknown:
        raise ValueError(f"Unknown statistic(s) {unknown}; choose from {sorted(_STATS)}.")
    return stats


def bag_statistics(bags: Sequence[np.ndarray], statistics=("mean", "min", "max")) -> np.ndarray:
    """(n_bags, len(statistics) * n_features) matrix of per-bag feature statistics."""
    stats = _check_statistics(statistics)
    return np.vstack([np.concatenate([_STATS[s](b) for s in stats]) for b in bags])


class BagStatistics(BaseMILClassifier):
    """Per-bag feature statistics followed by L2 logistic regression.

    Parameters
    ----------
    statistics : tuple of {"mean", "min", "max", "std", "median"}
    C : float
        Inverse L2 regularisation strength of ``LogisticRegression``.
    max_iter : int
        lbfgs iterations.
    class_weight : None, "balanced" or dict
        A dict is keyed by the labels given to ``fit`` (``{"tumour": 3}``), as in scikit-learn.
    random_state : int, RandomState or None
        Passed to ``LogisticRegression`` (lbfgs itself is deterministic).
    """

    hyperparameter_source = SOURCE_DEFAULT + " (C=1, lbfgs, max_iter=5000)"

    def __init__(
        self,
        statistics: Sequence[str] = ("mean", "min", "max"),
        C: float = 1.0,
        max_iter: int = 5000,
        class_weight: dict | str | None = None,
        random_state: int | np.random.RandomState | None = None,
    ):
        self.statistics = statistics
        self.C = C
        self.max_iter = max_iter
        self.class_weight = class_weight
        self.random_state = random_state

    @fits_fresh  # a failed fit leaves it unfitted, not half new labels, half old model
    def fit(self, bags: Sequence[np.ndarray], y: ArrayLike) -> "BagStatistics":
        """Fit the logistic regression on the training bags' statistics."""
        bags, y_enc = self._validate_fit_data(bags, y)
        stats = _check_statistics(self.statistics)
        check_number("C", self.C)
        self.classifier_ = LogisticRegression(
            C=float(self.C), solver="lbfgs", max_iter=int(self.max_iter),
            class_weight=self._class_weight_for(), random_state=self.random_state,
        ).fit(bag_statistics(bags, stats), y_enc)
        self.hyperparameter_source_ = SOURCE_DEFAULT
        return self

    def transform(self, bags) -> np.ndarray:
        """The statistics embedding of ``bags``."""
        return bag_statistics(self._validate_predict_data(bags), self.statistics)

    def decision_function(self, bags: Sequence[np.ndarray]) -> np.ndarray:
        """Log-odds of ``classes_[1]``, shape (n_bags,)."""
        emb = self.transform(bags)
        return np.asarray(self.classifier_.decision_function(emb), dtype=np.float64)

    def predict_proba(self, bags: Sequence[np.ndarray]) -> np.ndarray:
        """Logistic-regression probabilities, shape (n_bags, 2)."""
        emb = self.transform(bags)
        return self.classifier_.predict_proba(emb)
