"""Scores of predictions against true labels: the one place accuracy and AUC are computed."""
from __future__ import annotations

import numpy as np
from scipy.integrate import trapezoid
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
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if len(s) != len(y):
        raise ValueError(f"Found {len(y)} labels but {len(s)} scores.")
    if not np.isfinite(s).all():
        raise ValueError("scores hold NaN or infinity.")
    # scikit-learn's roc_curve + auc step by step, without its input checks, which cost
    # 100x the arithmetic here (the nested search scores thousands of small validation folds).
    # Same points, same divisions, same trapezoid: the same float, bit for bit (tests/test_tuning.py).
    order = np.argsort(s, kind="stable")[::-1]
    s, y = s[order], y[order]
    last = np.r_[np.nonzero(np.diff(s))[0], len(s) - 1]  # last bag of each distinct score
    tps = np.cumsum(y, dtype=np.float64)[last]
    fps = 1.0 + last - tps
    if len(fps) > 2:  # roc_curve's drop_intermediate: collinear points go
        keep = np.r_[True, np.logical_or(np.diff(fps, 2), np.diff(tps, 2)), True]
        fps, tps = fps[keep], tps[keep]
    fpr = np.r_[0.0, fps] / fps[-1]
    tpr = np.r_[0.0, tps] / tps[-1]
    return float(trapezoid(tpr, fpr))


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
