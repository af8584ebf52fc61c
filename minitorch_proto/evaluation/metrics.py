"""Scores of predictions against true labels: the one place accuracy and AUC are computed."""
from __future__ import annotations

import numpy as np
from sklearn.metrics import roc_auc_score

__all__ = ["binary_auc", "scores_from_proba"]


def binary_auc(y_true, scores) -> float:
    """ROC AUC of a score for the positive class; NaN when ``y_true`` holds one class.

    Parameters
    ----------
    y_true : array-like of bool or {0, 1}
        True when the bag is positive.
    scores : array-like of float
        Larger means more positive (a probability, a logit, a negative distance).
    """
    y = np.asarray(y_true).reshape(-1).astype(bool)
    if y.all() or not y.any():
        return float("nan")
    return float(roc_auc_score(y, np.asarray(scores, dtype=np.float64).reshape(-1)))


def scores_from_proba(y_true: np.ndarray, proba: np.ndarray) -> tuple[float, float]:
    """Accuracy of the arg-max class and ROC AUC (one-vs-rest for more than two classes).

    Parameters
    ----------
    y_true : ndarray of int, shape (n_bags,)
        Encoded labels, 0 .. n_classes - 1 (column positions of ``proba``).
    proba : ndarray, shape (n_bags, n_classes)

    Returns
    -------
    (accuracy, auc) : tuple of float
        The AUC is NaN when the true labels hold a single class.
    """
    y_true = np.asarray(y_true).reshape(-1)
    acc = float(np.mean(np.argmax(proba, axis=1) == y_true))
    if len(np.unique(y_true)) < 2:
        return acc, float("nan")
    if proba.shape[1] == 2:
        return acc, binary_auc(y_true == 1, proba[:, 1])
    return acc, float(roc_auc_score(y_true, proba, multi_class="ovr", labels=np.arange(proba.shape[1])))
