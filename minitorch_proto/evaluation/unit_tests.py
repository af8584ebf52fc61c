"""Algorithmic unit tests for MIL models (Raff & Holt, 2023), run on any estimator.

The generators live in :mod:`minitorch_proto.data.synthetic`; this module fits a
model on each test's training bags and scores it on the test bags, where the
training shortcut is reversed.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

import numpy as np

from ..data.synthetic import MIL_UNIT_TESTS, SyntheticBags
from .metrics import binary_auc

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["run_mil_unit_tests"]


def _positive_scores(estimator: Any, bags: list[np.ndarray]) -> np.ndarray | None:
    if hasattr(estimator, "predict_proba"):
        proba = np.asarray(estimator.predict_proba(bags), dtype=np.float64)
        if proba.ndim == 2:
            classes = getattr(estimator, "classes_", None)
            col = proba.shape[1] - 1
            if classes is not None and 1 in list(classes):
                col = list(classes).index(1)
            proba = proba[:, col]
        return proba.reshape(-1)
    if hasattr(estimator, "decision_function"):
        return np.asarray(estimator.decision_function(bags), dtype=np.float64).reshape(-1)
    return None


def run_mil_unit_tests(
    make_estimator: Callable[[], Any],
    tests: Iterable[str] | Mapping[str, Callable[..., tuple[SyntheticBags, SyntheticBags]]] | None = None,
    random_state: int | np.random.Generator | None = 0,
    threshold: float = 0.75,
    generator_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
) -> "pd.DataFrame":
    """Fit a fresh estimator on each unit test's training set and score it on its test set.

    Pass criterion: a test is ``passed`` when the test-set **accuracy is at least**
    ``threshold`` (default 0.75). With balanced test sets a constant or random model scores
    about 0.5, and a model that relies on the planted shortcut (poison, distractor frequency,
    single concept where all are needed) scores about 0.5 or less, so 0.75 separates "follows the
    label rule" from "learned the shortcut" with room for ordinary estimation error.

    Parameters
    ----------
    make_estimator : callable
        Called with no arguments, once per test; must return an object with
        ``fit(bags, y)`` and ``predict(bags)`` (labels 0/1). When it also has
        ``predict_proba(bags)`` (or else ``decision_function``), the AUC is reported.
    tests : iterable of str or mapping, optional
        Names from :data:`MIL_UNIT_TESTS` (default: all of them), or a mapping of names to
        generators with the same call signature.
    random_state : int, Generator or None, default=0
        Passed to every generator (an ``int`` gives each test the same seed).
    threshold : float, default=0.75
        Minimum test accuracy for ``passed``.
    generator_kwargs : mapping, optional
        Extra keyword arguments per test name, e.g. ``{"single_concept": {"n_features": 5}}``.

    Returns
    -------
    pandas.DataFrame
        One row per test with columns ``test``, ``accuracy``, ``auc`` (NaN when the estimator
        gives no scores), ``passed`` and ``threshold``.
    """
    import pandas as pd

    if tests is None:
        selected: Mapping[str, Callable[..., Any]] = MIL_UNIT_TESTS
    elif isinstance(tests, Mapping):
        selected = tests
    else:
        names = [tests] if isinstance(tests, str) else list(tests)
        unknown = [t for t in names if t not in MIL_UNIT_TESTS]
        if unknown:
            raise ValueError(f"Unknown MIL unit test(s) {unknown}; choose from {sorted(MIL_UNIT_TESTS)}.")
        selected = {t: MIL_UNIT_TESTS[t] for t in names}
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must lie in [0, 1]; got {threshold}.")
    generator_kwargs = dict(generator_kwargs or {})
    rows = []
    for name, generator in selected.items():
        train, test = generator(random_state=random_state, **dict(generator_kwargs.get(name, {})))
        estimator = make_estimator()
        estimator.fit(train.bags, train.y)
        pred = np.asarray(estimator.predict(test.bags)).reshape(-1)
        if len(pred) != len(test.y):
            raise ValueError(f"{name}: predict returned {len(pred)} labels for {len(test.y)} bags.")
        accuracy = float(np.mean(pred.astype(np.int64) == test.y))
        scores = _positive_scores(estimator, test.bags)
        auc = binary_auc(test.y == 1, scores) if scores is not None else float("nan")
        rows.append(
            {"test": name, "accuracy": accuracy, "auc": auc, "passed": bool(accuracy >= threshold), "threshold": float(threshold)}
        )
    return pd.DataFrame(rows, columns=["test", "accuracy", "auc", "passed", "threshold"])
