"""The own-data page's inputs: a user's CSV and the bags held out from it, checked before any training.

The page (``notebooks/07_your_own_data.ipynb``) takes a CSV path and column names as papermill
parameters. Whatever is wrong with them should fail in its first cells, with a line that names
the parameter to change, not after sections of training; and the held-out bags must reach the
model with the training file's features in the training file's order, whatever their column order.
"""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np
import pandas as pd

from ..data import BagDataset, load_bags_csv
from ..evaluation.cv import stratified_folds
from .params import is_whole

__all__ = ["HELD_OUT_FOLDS", "load_own_bags", "paired_fold_sentence", "loss_spikes"]

#: With no held-out file, one fold of this many (a stratified quarter of the bags) is set aside.
HELD_OUT_FOLDS = 4


def _column(value, header: bool, name: str):
    """A column as ``load_bags_csv`` takes it: by name, or by position in a file without a header row."""
    if header:
        return value
    if is_whole(value) or (isinstance(value, str) and value.strip().isdigit()):
        return int(value)
    raise ValueError(f"parameter {name} must be a column number (0 is the first) when header is False; "
                     f"got {value!r}.")


def load_own_bags(csv_path: str | os.PathLike, new_csv_path: str | os.PathLike | None = None, *,
                  bag_col="bag", label_col="label", feature_cols: Sequence | None = None, header: bool = True,
                  seed: int = 0, folds: int | None = None) -> tuple[BagDataset, BagDataset]:
    """The page's training bags and held-out bags, both read with the training file's features.

    Parameters
    ----------
    csv_path : str or PathLike
        The user's CSV: one instance per row, a bag column, a label column and numeric features.
    new_csv_path : str or PathLike, optional
        Labelled bags to score the final model on. Its feature columns are read by the names of
        the training file's, in their order (a file with its columns in another order is read
        right). None: a stratified quarter of ``csv_path``'s bags (one fold of
        :data:`HELD_OUT_FOLDS`, seeded by ``seed``) is set aside instead.
    bag_col, label_col : str, or int when ``header`` is False
    feature_cols : sequence, optional
        The feature columns; None: every column but the bag and label columns.
    header : bool, default=True
        False: the files have no header row (the benchmarks' layout, ``label, bag, features...``);
        columns are then named by number, e.g. ``bag_col=1, label_col=0``.
    seed : int, default=0
    folds : int, optional
        The page's cross-validation fold count: the training bags (what is left once a quarter is
        set aside) must have at least this many bags of each class.

    Returns
    -------
    train, held_out : BagDataset

    Raises
    ------
    ValueError
        One line naming the parameter to change: a column given by name in a file without a
        header, labels that are not two classes, too few bags of a class to set a quarter aside,
        held-out labels the training file does not have, or fewer training bags of a class than ``folds``.
    """
    bag_col, label_col = _column(bag_col, header, "bag_col"), _column(label_col, header, "label_col")
    if feature_cols is not None:
        feature_cols = [_column(c, header, "feature_cols") for c in feature_cols]
    options = {} if header else {"header": None}
    ds = load_bags_csv(csv_path, bag_col=bag_col, label_col=label_col, feature_cols=feature_cols, **options)
    classes, counts = np.unique(ds.y, return_counts=True)
    if len(classes) != 2:
        raise ValueError(f"{csv_path}: label column {label_col!r} holds {len(classes)} class(es) "
                         f"({', '.join(map(repr, classes.tolist()[:5]))}); this page compares two-class models.")
    if new_csv_path is None:
        if counts.min() < HELD_OUT_FOLDS:
            raise ValueError(f"{csv_path}: class {classes[counts.argmin()].item()!r} has {counts.min()} bag(s); "
                             f"setting a quarter aside needs {HELD_OUT_FOLDS} of each class: give new_csv_path.")
        kept = stratified_folds(ds.y, n_repeats=1, n_folds=HELD_OUT_FOLDS, random_state=seed)[0]
        train, held_out = ds.subset(kept.train), ds.subset(kept.test)
        _check_folds(train, folds, f"{csv_path}, once a quarter of its bags is set aside,")
        return train, held_out
    # By name: the model sees the training file's columns in the training file's order.
    features = list(ds.feature_names) if header else [int(n) for n in ds.feature_names]  # "5": column 5
    new = load_bags_csv(new_csv_path, bag_col=bag_col, label_col=label_col, feature_cols=features, **options)
    unknown = sorted(set(np.unique(new.y).tolist()) - set(classes.tolist()), key=str)
    if unknown:
        raise ValueError(f"{new_csv_path}: label(s) {unknown[:5]} of new_csv_path are not among {csv_path}'s "
                         f"classes {classes.tolist()}.")
    _check_folds(ds, folds, str(csv_path))
    return ds, new


def _check_folds(train: BagDataset, folds: int | None, what: str) -> None:
    """The cross-validation's folds need ``folds`` training bags of every class: say so before any training."""
    if folds is None:
        return
    classes, counts = np.unique(train.y, return_counts=True)
    if counts.min() < folds:
        raise ValueError(f"{what} has {counts.min()} training bag(s) of class {classes[counts.argmin()].item()!r}, "
                         f"fewer than folds={folds}: lower folds.")


def paired_fold_sentence(results: pd.DataFrame, method: str, baseline: str, names: dict | None = None) -> str:
    """Where ``method`` stands against ``baseline`` fold by fold, from ``cross_validate`` rows of both
    on the same folds: the two mean accuracies, the mean paired difference and its standard
    deviation over folds, and on how many folds each is ahead."""
    acc = results.pivot_table(index=["repeat", "fold"], columns="method", values="accuracy")
    if acc[[method, baseline]].isna().any().any():
        raise ValueError(f"{method!r} and {baseline!r} were not run on the same folds.")
    diff = acc[method] - acc[baseline]
    name = (names or {}).get(baseline, baseline)
    spread = f"standard deviation over folds {diff.std(ddof=1):.3f}" if len(diff) > 1 else "one fold"
    return (f"On this data the {(names or {}).get(method, method)}'s mean accuracy is {acc[method].mean():.3f} "
            f"against {acc[baseline].mean():.3f} for {name}: a paired difference of {diff.mean():+.3f} ({spread}); "
            f"it is ahead on {int((diff > 0).sum())}, level on {int((diff == 0).sum())} and behind on "
            f"{int((diff < 0).sum())} of {len(diff)} folds.")


def loss_spikes(history: Sequence[dict], factor: float = 2.0) -> int:
    """Epochs whose mean cross-entropy is more than ``factor`` times the epoch before's (a fit's
    ``history_``): the isolated upward jumps page 07 counts."""
    ce = np.array([row["cross_entropy"] for row in history], dtype=np.float64)
    return int((ce[1:] > factor * ce[:-1]).sum())
