"""Projection: every prototype replaced by its nearest real training instance, and what that costs.

The push the recommended model does during fitting (``push=True``) for a model already fitted:
a copy whose prototypes are training instances, optionally with its head refitted, and a report
of the accuracy before and after. One model at a time (a seed ensemble: ``clf.member(j)``).
"""
from __future__ import annotations

import copy
from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch

from ..bags import BagBatch
from ..model import cross_entropy, penalty_terms
from .explain import _check_fitted, _distances, _one_model, _standardised
from .metrics import binary_auc

__all__ = ["project_prototypes"]


def _scores(clf: Any, bags: Sequence[np.ndarray], y) -> tuple[float, float]:
    """Accuracy and (two classes) ROC AUC of ``clf`` on labelled bags."""
    y_arr = np.asarray(y).reshape(-1)
    acc = float(np.mean(clf.predict(bags) == y_arr))
    auc = float("nan")
    if len(clf.classes_) == 2:
        auc = binary_auc(y_arr == clf.classes_[1], clf.decision_function(bags))
    return acc, auc


def _refit_head(clf: Any, bags: Sequence[np.ndarray], y, steps: int, lr: float) -> None:
    """Re-optimise the classifier (weights, bias) with the prototypes frozen.

    Full-batch Adam on the mean cross-entropy plus the model's weight penalty, starting from
    the current head. The distance and prototype penalties do not depend on the head.
    """
    model = clf.model_
    y_enc = np.searchsorted(clf.classes_, np.asarray(y).reshape(-1))
    batch = BagBatch.from_bags(_standardised(clf, bags))
    with torch.no_grad():
        feats = model.features(batch).detach()
    params = [model.weight] + ([model.bias] if model.bias is not None else [])
    model.prototypes.requires_grad_(False)
    try:
        opt = torch.optim.Adam(params, lr=lr)
        target = torch.as_tensor(y_enc)
        for _ in range(int(steps)):
            opt.zero_grad()
            logits = feats @ model.weight.T + (model.bias if model.bias is not None else 0.0)
            loss = cross_entropy(logits, target).mean()
            loss = loss + penalty_terms(model.weight, model.prototypes, model.config)["weight_penalty"]
            loss.backward()
            opt.step()
    finally:
        model.prototypes.requires_grad_(True)
        model.eval()


def project_prototypes(
    clf: Any,
    bags: Sequence[np.ndarray],
    y: Sequence | np.ndarray | None = None,
    X_test: Sequence[np.ndarray] | None = None,
    y_test: Sequence | np.ndarray | None = None,
    *,
    refit_head: bool = False,
    refit_steps: int = 300,
    refit_lr: float = 0.05,
) -> tuple[Any, dict]:
    """Replace every prototype by its nearest real training instance, on a copy.

    The projection is done in the standardised space the model works in, with the model's
    distance: afterwards each prototype IS a standardised training instance (cast to the
    model's float32), so it can be shown as a real example.

    Parameters
    ----------
    clf : PrototypeMILClassifier
        Fitted; left unchanged.
    bags : sequence of ndarray
        Training bags in raw units (the candidates).
    y : array-like, optional
        Their labels: the report then gives the training accuracy before and after.
    X_test, y_test : optional
        Test bags and labels: the report then gives the test accuracy before and after.
    refit_head : bool, default=False
        Re-optimise the classifier weights and bias on ``bags``/``y`` with the projected
        prototypes frozen (full-batch Adam on cross-entropy + weight penalty). Off by default,
        so the report shows the raw cost of projecting.
    refit_steps, refit_lr : int, float
        Adam steps and learning rate of the head refit.

    Returns
    -------
    projected : PrototypeMILClassifier
        A deep copy of ``clf`` with projected prototypes.
    report : dict
        ``assignments`` (DataFrame: prototype, bag, instance, distance from the old prototype
        to the instance), ``refit_head``, and when labels were given
        ``train_accuracy_before``/``_after``, ``train_auc_before``/``_after`` and the same for
        ``test_``. AUCs are NaN for more than two classes.
    """
    _check_fitted(clf)
    _one_model(clf, "project_prototypes")
    if refit_head and y is None:
        raise ValueError("refit_head=True needs the training labels y.")
    std = _standardised(clf, bags)
    flat = np.concatenate(std, axis=0)
    bag_of = np.concatenate([np.full(len(b), i) for i, b in enumerate(std)])
    inst_of = np.concatenate([np.arange(len(b)) for b in std])
    dist = _distances(clf, flat)  # (N, D)
    nearest = np.argmin(dist, axis=0)

    projected = copy.deepcopy(clf)
    with torch.no_grad():
        proto = projected.model_.prototypes
        for d, n in enumerate(nearest):
            proto[d] = torch.as_tensor(flat[n], dtype=proto.dtype)
    if refit_head:
        _refit_head(projected, bags, y, refit_steps, refit_lr)

    report: dict[str, Any] = {
        "assignments": pd.DataFrame(
            {
                "prototype": np.arange(len(nearest)),
                "bag": bag_of[nearest].astype(int),
                "instance": inst_of[nearest].astype(int),
                "distance_moved": dist[nearest, np.arange(len(nearest))],
            }
        ),
        "refit_head": bool(refit_head),
    }
    for split, Xs, ys in (("train", bags, y), ("test", X_test, y_test)):
        if Xs is None or ys is None:
            continue
        report[f"{split}_accuracy_before"], report[f"{split}_auc_before"] = _scores(clf, Xs, ys)
        report[f"{split}_accuracy_after"], report[f"{split}_auc_after"] = _scores(projected, Xs, ys)
    return projected, report
