"""Standardisation of instance features, fitted on training bags only."""
from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["BagStandardizer", "STANDARDIZATIONS"]

STANDARDIZATIONS = ("feature", "instance", "none")


def _scale(std: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """``std``, with 1 where the spread is only rounding (a constant feature stays constant).

    Rounding is relative: a column of 12345.678 has a computed spread near 1e-11, not 0, and an absolute
    1e-12 cut gave it that scale, so a test value 0.001 away standardised to 4e7.
    """
    return np.where(std > 1e-12 * np.maximum(1.0, np.abs(mean)), std, 1.0)


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
    Constant features (106 to 120 of the 230 columns of Tiger, Fox and Elephant, more in some
    training folds) get scale 1, so they stay constant instead of turning into NaN.

    Collections too large to concatenate are fitted in one streaming pass with
    :meth:`partial_fit` (bag by bag or chunk by chunk) and :meth:`merge` (one
    process's shard into another's); the statistics equal :meth:`fit`'s to rounding.
    """

    def __init__(self, mode: str = "feature") -> None:
        if mode not in STANDARDIZATIONS:
            raise ValueError(f"Unknown standardisation {mode!r}; choose from {STANDARDIZATIONS}.")
        self.mode = mode
        self.mean_: np.ndarray | None = None
        self.scale_: np.ndarray | None = None

    def fit(self, bags: Sequence[np.ndarray]) -> "BagStandardizer":
        """Learn each feature's mean and standard deviation over all instances of ``bags`` ("feature" mode).

        Parameters
        ----------
        bags : sequence of ndarray, each of shape (n_instances_i, n_features)
            Training bags, all with the same number of features; read in ``"feature"`` mode only.

        Returns
        -------
        self : BagStandardizer
            With ``mean_`` and ``scale_`` set (in ``"feature"`` mode; otherwise unchanged).
        """
        if self.mode == "feature":
            X = np.concatenate(bags, axis=0, dtype=np.float64)
            self.mean_ = X.mean(axis=0)
            # X.std(axis=0)'s own steps (centre, square, sum, divide, root), in place on this copy: the
            # same values bit for bit, without a second array the size of the data (the peak of a fit).
            X -= self.mean_
            np.multiply(X, X, out=X)
            m2 = np.add.reduce(X, axis=0)
            self.scale_ = _scale(np.sqrt(m2 / len(X)), self.mean_)
            # The running statistics too: partial_fit or merge after fit go on from these instances (they had
            # gone on from whatever an earlier partial_fit had seen, or from nothing).
            self.n_seen_, self._mean, self._m2 = len(X), self.mean_.copy(), m2
        return self

    def partial_fit(self, X: np.ndarray) -> "BagStandardizer":
        """Add instances (a bag, or a chunk of one) to the running feature statistics.

        Counts, means and sums of squared deviations are merged with Chan et al.'s
        pairwise update, so fitting bag by bag (or chunk by chunk, or shard by shard
        then :meth:`merge`) gives the statistics of :meth:`fit` on all the instances
        at once, to rounding, in one pass and without holding them together.

        Parameters
        ----------
        X : ndarray of shape (n_instances, n_features) or (n_features,)
            Instances to add (a 1-D array is one instance; an array of no rows adds nothing). Ignored
            unless the mode is ``"feature"``.

        Returns
        -------
        self : BagStandardizer

        Raises
        ------
        ValueError
            If ``X`` has another number of features than the instances added before.
        """
        if self.mode != "feature":
            return self
        X = np.asarray(X, dtype=np.float64)
        if X.ndim == 1:
            X = X.reshape(1, -1)
        if len(X) == 0:
            return self
        mean = X.mean(axis=0)
        return self._combine(len(X), mean, ((X - mean) ** 2).sum(axis=0))

    def merge(self, other: "BagStandardizer") -> "BagStandardizer":
        """Fold another standardiser's running statistics (e.g. another process's shard) into this one.

        Parameters
        ----------
        other : BagStandardizer
            Fitted with :meth:`fit` or fed with :meth:`partial_fit` (or restored by
            :meth:`from_partial_state`); its running statistics are merged.

        Returns
        -------
        self : BagStandardizer

        Raises
        ------
        ValueError
            If the two have seen instances with different numbers of features.
        """
        if self.mode == "feature" and getattr(other, "n_seen_", 0):
            self._combine(other.n_seen_, other._mean, other._m2)
        return self

    def _combine(self, n_b: int, mean_b: np.ndarray, m2_b: np.ndarray) -> "BagStandardizer":
        n_a = getattr(self, "n_seen_", 0)
        if n_a == 0:
            self._mean, self._m2 = mean_b.copy(), m2_b.copy()
        else:
            if mean_b.shape != self._mean.shape:
                raise ValueError(f"Instances have {mean_b.shape[0]} features; earlier ones had {self._mean.shape[0]}.")
            n = n_a + n_b
            delta = mean_b - self._mean
            self._mean = self._mean + delta * (n_b / n)
            self._m2 = self._m2 + m2_b + delta**2 * (n_a * n_b / n)
        self.n_seen_ = n_a + int(n_b)
        std = np.sqrt(self._m2 / self.n_seen_)
        self.mean_ = self._mean.copy()
        self.scale_ = _scale(std, self.mean_)
        return self

    def get_partial_state(self) -> dict:
        """Running statistics for :meth:`from_partial_state` (plain arrays; picklable across processes)."""
        n = getattr(self, "n_seen_", 0)
        return {"mode": self.mode, "n": n, "mean": self._mean if n else None, "m2": self._m2 if n else None}

    @classmethod
    def from_partial_state(cls, state: dict) -> "BagStandardizer":
        """A standardiser with the running statistics of :meth:`get_partial_state`'s ``state``.

        It can go on with :meth:`partial_fit` or :meth:`merge`; ``mean_`` and ``scale_`` are set
        when ``state`` has seen instances. An unknown ``mode`` raises ValueError.
        """
        obj = cls(state["mode"])
        if state["n"]:
            obj._combine(int(state["n"]), np.asarray(state["mean"]), np.asarray(state["m2"]))
        return obj

    def transform_instances(self, X: np.ndarray) -> np.ndarray:
        """Standardise a 2-D array of instances."""
        X = np.asarray(X, dtype=np.float64)
        if self.mode == "none":
            return X
        if self.mode == "instance":
            mu = X.mean(axis=1, keepdims=True)
            sd = X.std(axis=1, keepdims=True)
            return (X - mu) / _scale(sd, mu)
        if self.mean_ is None:
            raise RuntimeError("BagStandardizer(mode='feature') must be fitted before transform.")
        return (X - self.mean_) / self.scale_

    def to_input_units(self, points: np.ndarray) -> tuple[np.ndarray, str]:
        """Map points of the standardised space (e.g. prototypes, (D, L)) back to input units.

        Returns
        -------
        points : ndarray
            ``points * scale + mean`` for ``"feature"``; unchanged for ``"none"``; and,
            for ``"instance"`` (a per-instance z-score that cannot be inverted), unchanged.
        units : str
            ``"input"`` or ``"instance-standardised"``.
        """
        points = np.array(points, dtype=np.float64)
        if self.mode == "feature":
            return points * self.scale_ + self.mean_, "input"
        if self.mode == "none":
            return points, "input"
        return points, "instance-standardised"

    def transform(self, bags: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Standardise every bag (float64 arrays of the same shapes).

        Parameters
        ----------
        bags : sequence of ndarray, each of shape (n_instances_i, n_features)

        Returns
        -------
        list of ndarray
            One float64 array per bag, in the order of ``bags``.

        Raises
        ------
        RuntimeError
            If the mode is ``"feature"`` and the standardiser has not been fitted.
        """
        return [self.transform_instances(b) for b in bags]

    def transform_stacked(self, bags: Sequence[np.ndarray]) -> np.ndarray:
        """:meth:`transform` of the bags as one (n_instances, n_features) float64 array, bag after bag.

        The same values as ``np.concatenate(self.transform(bags))``, built in one array: the
        per-bag list and its temporaries would double the peak memory on large collections.
        """
        if self.mode != "feature":
            return np.concatenate(self.transform(bags), axis=0)
        if self.mean_ is None:
            raise RuntimeError("BagStandardizer(mode='feature') must be fitted before transform.")
        X = np.concatenate(bags, axis=0, dtype=np.float64)
        X -= self.mean_  # in place: the same arithmetic as (X - mean) / scale, element by element
        X /= self.scale_
        return X

    def fit_transform(self, bags: Sequence[np.ndarray]) -> list[np.ndarray]:
        """:meth:`fit` on ``bags``, then :meth:`transform` of the same bags.

        Parameters
        ----------
        bags : sequence of ndarray, each of shape (n_instances_i, n_features)

        Returns
        -------
        list of ndarray
            One float64 array per bag, in the order of ``bags``.
        """
        return self.fit(bags).transform(bags)

    def get_state(self) -> dict:
        """``mode``, ``mean`` and ``scale`` (None when not fitted), for :meth:`from_state`."""
        return {"mode": self.mode, "mean": self.mean_, "scale": self.scale_}

    @classmethod
    def from_state(cls, state: dict) -> "BagStandardizer":
        """The standardiser :meth:`get_state` describes (running statistics are not restored).

        Parameters
        ----------
        state : dict
            Keys ``mode``, ``mean`` and ``scale``, as :meth:`get_state` returns them.

        Returns
        -------
        BagStandardizer

        Raises
        ------
        ValueError
            If ``mode`` is unknown.
        """
        obj = cls(state["mode"])
        obj.mean_ = None if state["mean"] is None else np.asarray(state["mean"])
        obj.scale_ = None if state["scale"] is None else np.asarray(state["scale"])
        return obj
