"""Page 04's live run: registered methods cross-validated on the same folds of each benchmark.

The page's ``epochs`` and ``device`` reach the rows the command line's model flags reach
(:data:`~minitorch_proto.evaluation.reproduction.FLAGGED_METHODS`: the paper's model and its
variants); the baselines and the recommended model keep their own recipes, as in
``minitorch-proto reproduce``.
"""
from __future__ import annotations

import os
from typing import Mapping, Sequence

import pandas as pd

from ..evaluation.cv import cross_validate, stratified_folds
from ..evaluation.reproduction import FLAGGED_METHODS
from ..methods import get, make

__all__ = ["run_methods_on_benchmarks"]


def run_methods_on_benchmarks(data: Mapping[str, object], methods: Sequence[str], *, repeats: int, folds: int,
                              seed: int = 0, epochs: int | None = None, device: str = "auto") -> pd.DataFrame:
    """Per-fold rows of every method on every data set (``cross_validate``'s columns), the same folds
    for every method of a data set.

    Parameters
    ----------
    data : mapping
        Benchmark name -> data set with ``bags`` and ``y``.
    methods : sequence of str
        Registered method keys (``book.method_keys`` expands ``"all"`` and comma lists).
    repeats, folds, seed : int
        Stratified ``repeats`` x ``folds``-fold CV, seeded by ``seed``.
    epochs : int, optional
        Epochs of the paper-model rows (None: each recipe's own).
    device : str, default="auto"
        Device of the paper-model rows.
    """
    # Every data set's folds first: ``folds`` too large for one of them fails before any training.
    all_folds = {name: stratified_folds(d.y, n_repeats=repeats, n_folds=folds, random_state=seed)
                 for name, d in data.items()}
    runs = []
    for name, d in data.items():
        cv_folds = all_folds[name]
        for key in methods:
            method = get(key)
            flagged = method.label in FLAGGED_METHODS
            overrides = {"device": device, **({"epochs": epochs} if epochs is not None else {})} if flagged else {}
            # All folds of a method train together (compiled loops for the neural nets); the others use every core.
            est = make(method.key, dataset=name, **overrides)
            runs.append(cross_validate(est, d.bags, d.y, cv_folds, dataset=name, method=method.key,
                                       n_jobs=os.cpu_count() or 1))
    return pd.concat(runs, ignore_index=True)
