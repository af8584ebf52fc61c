"""Training snapshots on two-feature toy bags, for the formulation page."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..estimator import PrototypeMILClassifier
from ..model import PrototypeMIL
from ..preprocessing import BagStandardizer
from ..data.synthetic import SyntheticBags, make_toy_bags
from .fitting import fit_with_callback

__all__ = ["toy_training_snapshots"]

def toy_training_snapshots(
    data: SyntheticBags | None = None,
    *,
    n_bags: int = 40,
    instances_per_bag: int = 3,
    n_prototypes: int = 2,
    pooling: Sequence[str] = ("min",),
    epochs: int = 60,
    every: int = 1,
    random_state: int = 0,
    **clf_kwargs,
) -> dict:
    """Train the prototype model on Figure-1 toy bags, recording the prototypes' positions.

    Parameters
    ----------
    data : SyntheticBags, optional
        Two-feature bags; default ``make_toy_bags(n_bags, instances_per_bag, random_state)``.
    n_bags, instances_per_bag : int, default=40 and 3
    n_prototypes : int, default=2
    pooling : tuple of str, default=("min",)
    epochs : int, default=60
    every : int, default=1
        Record every ``every``-th epoch (the last epoch is always recorded).
    random_state : int, default=0
    **clf_kwargs
        Estimator arguments. Defaults here: ``standardization="none"`` (so the positions are
        in the units of the bags), ``layer_norm=False`` (with D = 2 and min pooling the layer
        norm reduces the two features to the sign of their difference), ``init="normal"``
        (the paper's), ``lr_prototypes=lr_classifier=0.05``, ``device="cpu"``.

    Returns
    -------
    dict
        ``data``, ``clf`` (fitted), ``snapshots`` (list of (D, 2) arrays in input units; the
        first is the initial position), ``epochs`` (the epoch of each snapshot, 0 first),
        ``history``, ``train_accuracy``.
    """
    if data is None:
        data = make_toy_bags(n_bags=n_bags, instances_per_bag=instances_per_bag, random_state=random_state)
    if data.n_features != 2:
        raise ValueError(f"toy_training_snapshots needs 2-feature bags; got {data.n_features}.")
    params: dict[str, Any] = dict(
        standardization="none", layer_norm=False, init="normal",
        lr_prototypes=0.05, lr_classifier=0.05, device="cpu",
    )
    params.update(n_prototypes=n_prototypes, pooling=tuple(pooling), epochs=epochs, random_state=random_state)
    params.update(clf_kwargs)
    clf = PrototypeMILClassifier(**params)
    snapshots: list[np.ndarray] = []
    recorded: list[int] = []

    def record(epoch: int, model: PrototypeMIL, std: BagStandardizer) -> None:
        if epoch == 0 or epoch % max(int(every), 1) == 0 or epoch == int(epochs):
            snapshots.append(std.to_input_units(model.prototypes.detach().cpu().numpy())[0])
            recorded.append(epoch)

    fit_with_callback(clf, data.bags, data.y, record)
    return {
        "data": data,
        "clf": clf,
        "snapshots": snapshots,
        "epochs": recorded,
        "history": clf.history_,
        "train_accuracy": float(np.mean(clf.predict(data.bags) == data.y)),
    }
