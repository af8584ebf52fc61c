"""Fitting helpers shared by the experiments: a per-epoch callback and the training objective."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch

from ..estimator import PrototypeMILClassifier
from ..model import PrototypeMIL
from ..preprocessing import BagStandardizer
from ..validation import check_bags

__all__ = ["fit_with_callback", "training_objective"]

def fit_with_callback(
    clf: PrototypeMILClassifier,
    bags: Sequence[np.ndarray],
    y,
    on_epoch_end: Callable[[int, PrototypeMIL, BagStandardizer], None] | None = None,
) -> PrototypeMILClassifier:
    """Fit ``clf`` exactly as :meth:`PrototypeMILClassifier.fit` does, calling back after each epoch.

    Parameters
    ----------
    clf : PrototypeMILClassifier
        Unfitted estimator (its parameters are used as they are).
    bags, y : training bags and labels.
    on_epoch_end : callable(epoch, model, standardizer), optional
        Called once with epoch 0 before training (initial parameters), then after every
        epoch (1-based), with the torch module being trained and the fitted standardiser.

    Returns
    -------
    PrototypeMILClassifier
        ``clf``, fitted (``model_`` on the CPU, ``standardizer_``, ``history_``, ``classes_``).
    """
    if on_epoch_end is None:
        return clf.fit(bags, y)
    # The standardiser is fitted before the first call, so the hook can read it.
    return clf.fit(bags, y, on_epoch_end=lambda epoch, model: on_epoch_end(epoch, model, clf.standardizer_))


def training_objective(clf: PrototypeMILClassifier, bags: Sequence[np.ndarray], y) -> float:
    """Eq. 1 of a fitted model on labelled bags: mean cross-entropy plus the three penalties.

    The data terms are averaged over the bags, the parameter penalties added once (the
    per-bag form the trainer minimises).
    """
    from ..bags import BagBatch

    y_enc = np.searchsorted(clf.classes_, np.asarray(y).reshape(-1))
    batch = BagBatch.from_bags(clf.standardizer_.transform(check_bags(bags, clf.n_features_in_)))
    with torch.no_grad():
        terms = clf.model_.loss_terms(batch, torch.as_tensor(y_enc))
    return float(terms["total"])
