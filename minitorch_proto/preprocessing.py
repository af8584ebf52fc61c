"""Standardisation of instance features, fitted on training bags only."""
from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["BagStandardizer", "STANDARDIZATIONS"]

STANDARDIZATIONS = ("feature", "instance", "none")


class BagStandardizer:
    """Z-score the features of bags.

    Parameters
    ----------
    mode : {"feature", "instance", "none"}
        ``"feature"`` (default): each feature to zero mean and unit variance over
        all instances of the bags passed to :meth:`fit`. ``"instance"``: each
        instance to zero mean and unit variance across its own features (what the
        published code does; needs no fitting). ``"none"``: unchanged.

    Notes
    -----
    Constant features (about 90 of the 230 columns of Fox, Tiger and Elephant)
    get scale 1, so they stay constant instead of turning into NaN.
    """

    def __init__(self, mode: str = "feature") -> None:
        if mode not in STANDARDIZATIONS:
            raise ValueError(f"Unknown standardisation {mode!r}; choose from {STANDARDIZATIONS}.")
        self.mode = mode
        self.mean_: np.ndarray | None = None
        self.scale_: np.ndarray | None = None

    def fit(self, bags: Sequence[np.ndarray]) -> "BagStandardizer":
        if self.mode == "feature":
            X = np.concatenate([np.asarray(b, dtype=np.float64) for b in bags], axis=0)
            self.mean_ = X.mean(axis=0)
            std = X.std(axis=0)
            self.scale_ = np.where(std > 1e-12, std, 1.0)
        return self

    def transform_instances(self, X: np.ndarray) -> np.ndarray:
        """Standardise a 2-D array of instances."""
        X = np.asarray(X, dtype=np.float64)
        if self.mode == "none":
            return X
        if self.mode == "instance":
            mu = X.mean(axis=1, keepdims=True)
            sd = X.std(axis=1, keepdims=True)
            return (X - mu) / np.where(sd > 1e-12, sd, 1.0)
        if self.mean_ is None:
            raise RuntimeError("BagStandardizer(mode='feature') must be fitted before transform.")
        return (X - self.mean_) / self.scale_

    def transform(self, bags: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [self.transform_instances(b) for b in bags]

    def fit_transform(self, bags: Sequence[np.ndarray]) -> list[np.ndarray]:
        return self.fit(bags).transform(bags)

    def get_state(self) -> dict:
        return {"mode": self.mode, "mean": self.mean_, "scale": self.scale_}

    @classmethod
    def from_state(cls, state: dict) -> "BagStandardizer":
        obj = cls(state["mode"])
        obj.mean_ = None if state["mean"] is None else np.asarray(state["mean"])
        obj.scale_ = None if state["scale"] is None else np.asarray(state["scale"])
        return obj
