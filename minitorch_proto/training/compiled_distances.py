"""Distances between a bag's instances and the prototypes, and their gradients, compiled (numba).

The geometric core of :mod:`minitorch_proto.training.compiled` (the whole training step
lives there; read it first), kept apart because the baselines' compiled trainers share
the blocked products (:func:`blocked_dots`). The formulas are ``minitorch_proto.distances``'s,
checked against it through the trainers' equivalence tests in ``tests/test_training.py``.
"""
from __future__ import annotations

import numpy as np

try:  # numba is a dependency, but the tensor backend works without it.
    import numba
    from numba import njit

    AVAILABLE = True
except ImportError:  # pragma: no cover - exercised only where numba is missing
    numba = None
    AVAILABLE = False

__all__ = ["AVAILABLE"]

# Re-association lets the compiler vectorise the sums over features. No
# "nnan"/"ninf": +-inf is the starting value of the min and max pooling.
_FASTMATH = {"reassoc", "contract", "nsz", "arcp"}


def _jit(fn):
    if not AVAILABLE:  # pragma: no cover
        return fn
    return njit(fastmath=_FASTMATH, cache=True, nogil=True, error_model="numpy")(fn)


@_jit
def _norm(v):
    acc = 0.0
    for i in range(v.shape[0]):
        acc += v[i] * v[i]
    return np.sqrt(acc)


@_jit
def blocked_dots(X, r0, K, P, out):
    """``out[k, d] = X[r0 + k] . P[d]``, two instances by four prototypes at a time.

    The blocking keeps eight running sums in registers and reuses every loaded
    number four (or two) times: about 2.5x the throughput of one pair at a time.
    """
    D, L = P.shape
    zero = X[r0, 0] - X[r0, 0]  # zero of the arrays' dtype, so float32 sums stay float32
    k = 0
    while k + 2 <= K:
        x, w = X[r0 + k], X[r0 + k + 1]
        d = 0
        while d + 4 <= D:
            p0, p1, p2, p3 = P[d], P[d + 1], P[d + 2], P[d + 3]
            a0 = a1 = a2 = a3 = b0 = b1 = b2 = b3 = zero
            for l in range(L):
                xl, wl = x[l], w[l]
                q0, q1, q2, q3 = p0[l], p1[l], p2[l], p3[l]
                a0 += xl * q0
                a1 += xl * q1
                a2 += xl * q2
                a3 += xl * q3
                b0 += wl * q0
                b1 += wl * q1
                b2 += wl * q2
                b3 += wl * q3
            out[k, d], out[k, d + 1], out[k, d + 2], out[k, d + 3] = a0, a1, a2, a3
            out[k + 1, d], out[k + 1, d + 1], out[k + 1, d + 2], out[k + 1, d + 3] = b0, b1, b2, b3
            d += 4
        while d < D:
            a = b = zero
            for l in range(L):
                a += x[l] * P[d, l]
                b += w[l] * P[d, l]
            out[k, d], out[k + 1, d] = a, b
            d += 1
        k += 2
    if k < K:
        x = X[r0 + k]
        for d in range(D):
            a = zero
            for l in range(L):
                a += x[l] * P[d, l]
            out[k, d] = a


@_jit
def _distances(X, r0, K, P, code, psq, eps, out, xnorms):
    """Distances (K, D) of a bag's instances to the prototypes (see ``distances.pairwise_distance``).

    ``psq`` holds the prototypes' squared norms. Like the tensor code, Euclidean
    distances use ``|x|^2 + |p|^2 - 2 x.p`` (clamped at 0), so the cost is one
    matrix product. The instances' norms go to ``xnorms`` (K,) for the backward
    pass of the cosine and pseudo distances (0 for Manhattan, which needs none).
    """
    D, L = P.shape
    if code == 2:  # manhattan
        for k in range(K):
            x = X[r0 + k]
            for d in range(D):
                acc = x[0] - x[0]
                for l in range(L):
                    acc += abs(x[l] - P[d, l])
                out[k, d] = acc
            xnorms[k] = 0.0
        return
    blocked_dots(X, r0, K, P, out)
    for k in range(K):
        x = X[r0 + k]
        xsq = 0.0
        for l in range(L):
            xsq += x[l] * x[l]
        xnorms[k] = np.sqrt(xsq)
        for d in range(D):
            dot = out[k, d]
            if code <= 1:
                sq = max(xsq + psq[d] - 2.0 * dot, 0.0)
                out[k, d] = np.sqrt(sq) if code == 0 else sq
            elif code == 3:
                out[k, d] = 1.0 - dot / (max(xnorms[k], eps) * max(np.sqrt(psq[d]), eps))
            else:
                out[k, d] = max(xnorms[k] + np.sqrt(psq[d]) - 2.0 * dot, 0.0)


@_jit
def _add_distance_grad(x, p, code, dist, g, xnorm, pnorm, eps, out):
    """``out += g * d distance(x, p) / d p``."""
    L = x.shape[0]
    if code == 0:
        if dist > 0:
            s = g / dist
            for l in range(L):
                out[l] += s * (p[l] - x[l])
    elif code == 1:
        s = 2.0 * g
        for l in range(L):
            out[l] += s * (p[l] - x[l])
    elif code == 2:
        # A select, not an if/elif: the signs of p - x are random, so a branch mispredicts about
        # half the time (this loop was most of a Manhattan model's step). Adding -g, 0 or g is the
        # same number as subtracting g or leaving ``out`` alone.
        ng = -g
        for l in range(L):
            t = p[l] - x[l]
            out[l] += g if t > 0 else (ng if t < 0 else 0.0)
    elif code == 3:
        nx = max(xnorm, eps)
        if pnorm > eps:
            dot = 0.0
            for l in range(L):
                dot += x[l] * p[l]
            c = dot / (nx * pnorm * pnorm)
            for l in range(L):
                out[l] -= g * (x[l] / nx - c * p[l]) / pnorm
        else:
            for l in range(L):
                out[l] -= g * x[l] / (nx * eps)
    else:
        passes = dist > 0  # clamp_min passes the gradient where not clamped, v >= 0
        if not passes:  # rare: only then is the unclamped value v needed
            dot = 0.0
            for l in range(L):
                dot += x[l] * p[l]
            passes = xnorm + pnorm - 2.0 * dot >= 0
        if passes:
            inv = 1.0 / pnorm if pnorm > 0 else 0.0
            for l in range(L):
                out[l] += g * (p[l] * inv - 2.0 * x[l])
