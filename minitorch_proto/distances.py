"""Distances between instances and prototypes.

Every function takes instances ``X`` of shape (..., N, L) and prototypes ``P`` of
shape (..., D, L) and returns (..., N, D); leading dimensions broadcast, so the
same code serves one model (``P`` of shape (D, L)) and many models trained
together (``P`` of shape (M, D, L) with ``X`` of shape (M, K, L)).

Euclidean distances are computed as ``sqrt(|x|^2 + |p|^2 - 2 x.p)`` because the
matrix product is far cheaper than materialising every difference vector
(N x D x L numbers); the squared distance is clamped at zero against rounding.
"""
from __future__ import annotations

import torch

__all__ = ["DISTANCES", "pairwise_distance", "safe_sqrt"]

DISTANCES = ("euclidean", "sqeuclidean", "manhattan", "cosine", "pseudo")


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
    raise ValueError(f"Unknown distance {metric!r}; choose from {DISTANCES}.")
