"""Distances between instances and prototypes.

Every function takes instances ``X`` of shape (..., N, L) and prototypes ``P`` of
shape (..., D, L) and returns (..., N, D); leading dimensions broadcast, so the
same code serves one model (``P`` of shape (D, L)) and many models trained
together (``P`` of shape (M, D, L) with ``X`` of shape (M, K, L)).

Euclidean distances are computed as ``sqrt(|x|^2 + |p|^2 - 2 x.p)`` because the
matrix product is far cheaper than materialising every difference vector
(N x D x L numbers); the squared distance is clamped at zero against rounding.

A new distance is written once, as a torch function of ``(X, P)``, and registered
with :func:`register_distance`: the model, the step-by-step trainer, the tensor
engine and the streaming/distributed trainer all compute distances through
:func:`pairwise_distance`, so they pick it up (autograd gives its gradient). The
compiled CPU engine has hand-written kernels for the built-in distances only; for
any other, ``backend="auto"`` trains with the tensor engine instead.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from sklearn.utils import check_random_state

__all__ = ["DISTANCES", "available_distances", "pairwise_distance", "register_distance", "safe_sqrt",
           "median_pairwise_distance"]

#: The built-in distances (each also has a compiled kernel in ``training/compiled_distances.py``).
DISTANCES = ("euclidean", "sqeuclidean", "manhattan", "cosine", "pseudo")
_REGISTERED: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {}


def register_distance(name: str, fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Add a distance, ``fn(X (..., N, L), P (..., D, L)) -> (..., N, D)``, differentiable in ``P``.

    It becomes a valid ``PrototypeMILConfig(distance=name)`` for every torch engine; a
    built-in name cannot be replaced.
    """
    if name in DISTANCES:
        raise ValueError(f"{name!r} is a built-in distance and cannot be replaced.")
    if not callable(fn):
        raise ValueError(f"register_distance needs a callable for {name!r}.")
    _REGISTERED[name] = fn


def available_distances() -> tuple[str, ...]:
    """The built-in distances, then the registered ones."""
    return DISTANCES + tuple(_REGISTERED)


def safe_sqrt(x: torch.Tensor) -> torch.Tensor:
    """Square root whose gradient is 0 (not inf/NaN) where ``x == 0``.

    An instance that coincides with a prototype is a normal event (prototypes are
    pulled onto instances by the distance penalty), so it must not poison training.
    """
    positive = x > 0
    safe = torch.where(positive, x, torch.ones_like(x))
    return torch.where(positive, torch.sqrt(safe), torch.zeros_like(x))


def _sq_norm(t: torch.Tensor) -> torch.Tensor:
    return (t * t).sum(-1)


def _squared_euclidean(X: torch.Tensor, P: torch.Tensor) -> torch.Tensor:
    cross = X @ P.transpose(-1, -2)
    sq = _sq_norm(X).unsqueeze(-1) + _sq_norm(P).unsqueeze(-2) - 2.0 * cross
    return sq.clamp_min(0.0)


def pairwise_distance(X: torch.Tensor, P: torch.Tensor, metric: str = "euclidean") -> torch.Tensor:
    """Distance of every instance to every prototype.

    Parameters
    ----------
    X : Tensor of shape (..., N, L)
        Instances.
    P : Tensor of shape (..., D, L)
        Prototypes.
    metric : {"euclidean", "sqeuclidean", "manhattan", "cosine", "pseudo"}
        ``"pseudo"`` is the published code's ``|x| + |p| - 2 x.p`` (norms not
        squared) clamped at 0. It is not a metric; it exists only for the
        compatibility mode.

    Returns
    -------
    Tensor of shape (..., N, D)
    """
    if metric == "euclidean":
        return safe_sqrt(_squared_euclidean(X, P))
    if metric == "sqeuclidean":
        return _squared_euclidean(X, P)
    if metric == "manhattan":
        return (X.unsqueeze(-2) - P.unsqueeze(-3)).abs().sum(-1)
    if metric == "cosine":
        eps = torch.finfo(X.dtype).eps
        xn = X / safe_sqrt(_sq_norm(X)).clamp_min(eps).unsqueeze(-1)
        pn = P / safe_sqrt(_sq_norm(P)).clamp_min(eps).unsqueeze(-1)
        return 1.0 - xn @ pn.transpose(-1, -2)
    if metric == "pseudo":
        cross = X @ P.transpose(-1, -2)
        value = safe_sqrt(_sq_norm(X)).unsqueeze(-1) + safe_sqrt(_sq_norm(P)).unsqueeze(-2) - 2.0 * cross
        return value.clamp_min(0.0)
    if metric in _REGISTERED:
        return _REGISTERED[metric](X, P)
    raise ValueError(f"Unknown distance {metric!r}; choose from {available_distances()}.")


def median_pairwise_distance(X: np.ndarray, max_samples: int = 1000, random_state=0) -> float:
    """Median Euclidean distance between distinct rows of ``X`` (up to ``max_samples`` rows, sampled).

    MILES's kernel width (Chen, Bi & Wang 2006) and the prototype model's similarity
    features (``head_similarity=True``) both scale by it. ``X`` may also be a row source with
    ``len()`` and indexing by an integer array (bags read lazily): only the sampled rows are read.
    """
    rng = check_random_state(random_state)
    n = len(X)
    if n > max_samples:
        X = X[np.sort(rng.choice(n, size=max_samples, replace=False))]
    elif not isinstance(X, np.ndarray):
        X = X[np.arange(n)]
    X = np.asarray(X)
    if X.shape[0] < 2:
        return 1.0
    sq = np.sum(X * X, axis=1)
    d2 = sq[:, None] + sq[None, :] - 2.0 * (X @ X.T)
    iu = np.triu_indices(X.shape[0], k=1)
    med = float(np.sqrt(max(np.median(np.maximum(d2[iu], 0.0)), 0.0)))
    return med if med > 0 else 1.0
