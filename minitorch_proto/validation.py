"""Input checks shared by every estimator, loader and trainer.

Each check raises ``ValueError`` (or ``TypeError``) with a message that names the
offending bag or label, so a user can find the problem in their own data.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["check_bags", "check_labels", "check_same_length"]


def check_bags(
    bags: Sequence[np.ndarray],
    n_features: int | None = None,
    *,
    dtype: type = np.float64,
    name: str = "bags",
) -> list[np.ndarray]:
    """Validate a collection of bags and return them as 2-D float arrays.

    Parameters
    ----------
    bags : sequence of array-like, each of shape (n_instances, n_features)
        One entry per bag. A 1-D entry is read as a bag with a single instance.
    n_features : int, optional
        Required number of features (for example the number seen in ``fit``).
    dtype : numpy dtype
        dtype of the returned arrays.
    name : str
        Name used in error messages.

    Returns
    -------
    list of ndarray
        Contiguous arrays of shape (n_instances_i, n_features).

    Raises
    ------
    ValueError
        If there are no bags, a bag is empty, bags disagree on the number of
        features, or a value is NaN or infinite.
    """
    if isinstance(bags, np.ndarray) and bags.dtype != object:
        if bags.ndim != 3:
            raise ValueError(
                f"{name} must be a sequence of 2-D arrays (instances x features); "
                f"got a single array of shape {bags.shape}. Pass a list of bags."
            )
        bags = list(bags)
    try:
        n_bags = len(bags)
    except TypeError as exc:
        raise TypeError(f"{name} must be a sequence of 2-D arrays, got {type(bags).__name__}") from exc
    if n_bags == 0:
        raise ValueError(f"{name} is empty: at least one bag is needed.")
    out: list[np.ndarray] = []
    expected = n_features
    for i, bag in enumerate(bags):
        try:
            arr = np.asarray(bag, dtype=dtype)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{name}[{i}] could not be converted to a float array: {exc}") from exc
        if arr.ndim == 1:
            arr = arr.reshape(1, -1)
        if arr.ndim != 2:
            raise ValueError(
                f"{name}[{i}] must be 2-D (instances x features); got shape {arr.shape}."
            )
        if arr.shape[0] == 0:
            raise ValueError(f"{name}[{i}] is empty: every bag needs at least one instance.")
        if arr.shape[1] == 0:
            raise ValueError(f"{name}[{i}] has no features.")
        if expected is None:
            expected = arr.shape[1]
        elif arr.shape[1] != expected:
            raise ValueError(
                f"{name}[{i}] has {arr.shape[1]} features but "
                f"{'the model was fitted with' if n_features is not None else 'earlier bags have'} "
                f"{expected}."
            )
        if not np.all(np.isfinite(arr)):
            bad = np.argwhere(~np.isfinite(arr))[0]
            raise ValueError(
                f"{name}[{i}] contains NaN or infinite values "
                f"(first at instance {bad[0]}, feature {bad[1]})."
            )
        out.append(np.ascontiguousarray(arr))
    return out


def check_labels(y, n_bags: int | None = None, *, min_classes: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Validate bag labels and encode them as 0..C-1.

    Parameters
    ----------
    y : array-like of shape (n_bags,)
        One label per bag (any hashable, sortable values).
    n_bags : int, optional
        Number of bags the labels must match.
    min_classes : int
        Fewest distinct classes allowed (2 for fitting a classifier).

    Returns
    -------
    y_encoded : ndarray of int64
    classes : ndarray
        The sorted distinct labels; ``classes[y_encoded]`` recovers ``y``.
    """
    y_arr = np.asarray(y)
    if y_arr.ndim != 1:
        y_arr = y_arr.reshape(-1) if y_arr.ndim == 2 and 1 in y_arr.shape else y_arr
    if y_arr.ndim != 1:
        raise ValueError(f"y must be 1-D (one label per bag); got shape {np.asarray(y).shape}.")
    if n_bags is not None and len(y_arr) != n_bags:
        raise ValueError(f"Found {n_bags} bags but {len(y_arr)} labels: they must match.")
    if y_arr.dtype.kind == "f" and not np.all(np.isfinite(y_arr)):
        raise ValueError("y contains NaN or infinite labels.")
    if y_arr.dtype == object:
        # v != v is the NaN test that works for any object.
        missing = [i for i, v in enumerate(y_arr) if v is None or v != v]
        if missing:
            raise ValueError(f"y holds a missing label (None or NaN) at position {missing[0]}; every bag needs a label.")
    if y_arr.dtype.kind == "f" and np.any(y_arr != np.round(y_arr)):
        raise ValueError("y must hold class labels, not continuous values.")
    try:
        classes, encoded = np.unique(y_arr, return_inverse=True)
    except TypeError:
        kinds = sorted({type(v).__name__ for v in y_arr})
        raise ValueError(f"y mixes label types {kinds} that cannot be sorted; use one type.") from None
    if len(classes) < min_classes:
        raise ValueError(
            f"y has {len(classes)} distinct class(es) {classes.tolist()}; "
            f"at least {min_classes} are needed to fit a classifier."
        )
    return encoded.astype(np.int64), classes


def check_same_length(**arrays) -> int:
    """Check that named sequences have the same length and return it."""
    lengths = {k: len(v) for k, v in arrays.items()}
    if len(set(lengths.values())) > 1:
        desc = ", ".join(f"{k}={n}" for k, n in lengths.items())
        raise ValueError(f"Lengths differ: {desc}.")
    return next(iter(lengths.values()))
