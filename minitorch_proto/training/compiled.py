"""The whole training step of a prototype MIL model, compiled (numba), for many models on the CPU.

Why this exists: with batch size 1, one step of the paper's model is a few
thousand multiply-adds (Musk1) to a few hundred thousand (Musk2's large bags).
Expressed as tensor operations, every step pays the fixed cost of some hundred
framework calls (forward, autograd, Adam), which is 10-100x the arithmetic.
Here one compiled loop does a model's whole epoch: distances, pooling, layer
norm, the classifier, every loss term, their gradients (written out by hand) and
Adam, with no per-step overhead. Models are independent, so they run in
parallel over the CPU cores.

The arithmetic is the model's (``minitorch_proto.model``) term for term, and
Adam is ``torch.optim.Adam``'s; ``tests/test_training.py`` checks that this
backend, the batched tensor backend and the sequential reference trainer
end with the same parameters (float64, 1e-9). One harmless difference: when
two instances tie for a bag's minimum (or maximum), the first takes the whole
gradient; autograd splits it. Both are valid subgradients, and identical
instances give identical gradients either way.

Four details make the loops fast, and are easy to lose in an edit:
``error_model="numpy"`` (Python's model checks every division for zero, which
stops the compiler vectorising them: Adam was 11x slower), fastmath
re-association (vectorised sums), the blocked products in ``compiled_distances.blocked_dots``,
and mean pooling's backward pass for the cosine and squared Euclidean distances going
through the bag's (unit) instance sum instead of every (instance, prototype) pair
(the recommended model's whole 5 x 10 went from 935 s to 394 s).

Gradients of the non-smooth points follow torch: ``|x|`` has slope 0 at 0, and
a distance or norm of exactly 0 passes no gradient (``safe_sqrt``).
"""
from __future__ import annotations

import contextlib
import os

import numpy as np

from ..bags import POOLINGS
from ..distances import DISTANCES
from .compiled_distances import _FASTMATH, AVAILABLE, _add_distance_grad, _distances, _jit, _norm, numba

if AVAILABLE:
    from numba import njit, prange

__all__ = [
    "AVAILABLE", "DISTANCE_CODES", "POOLING_CODES", "EpochState", "train_epoch", "predict_logits", "threads",
]

# The kernels branch on integer codes in these orders. The names come from the model's own
# tables, so an option added to the model but not to the kernels fails at import time instead
# of silently training with another distance or pooling.
_KERNEL_DISTANCES = ("euclidean", "sqeuclidean", "manhattan", "cosine", "pseudo")
_KERNEL_POOLINGS = ("min", "max", "mean")
DISTANCE_CODES = {name: _KERNEL_DISTANCES.index(name) for name in DISTANCES}
POOLING_CODES = {name: _KERNEL_POOLINGS.index(name) for name in POOLINGS}


@contextlib.contextmanager
def threads(n: int | None):
    """Use ``n`` threads for the parallel loop over models (None: every core), restoring the count after."""
    if not AVAILABLE:  # pragma: no cover
        yield
        return
    previous = numba.get_num_threads()
    limit = numba.config.NUMBA_NUM_THREADS
    numba.set_num_threads(limit if n is None else max(1, min(int(n), limit)))
    try:
        yield
    finally:
        numba.set_num_threads(previous)


@_jit
def _forward(X, r0, K, Pm, Wm, bm, pools, code, pen_min, layer_norm, ln_eps, has_bias, eps, psq,
             dist, xnorms, phi, z, logits, arg_min, arg_max):
    """One bag through the model: fills ``dist`` (K, D), ``phi``, ``z`` and ``logits``.

    ``phi`` holds the pooled blocks in the configured order, then a min block when
    the distance penalty needs one that the pooling does not provide. Returns
    (number of blocks, index of the min block or -1, layer-norm sigma, penalised sum).
    """
    D = Pm.shape[0]
    O = Wm.shape[0]
    n_pool = pools.shape[0]
    F = D * n_pool
    _distances(X, r0, K, Pm, code, psq, eps, dist, xnorms)
    has_min = False
    for j in range(n_pool):
        if pools[j] == 0:
            has_min = True
    n_blocks = n_pool if (has_min or not pen_min) else n_pool + 1
    min_block = -1
    for j in range(n_blocks):
        how = pools[j] if j < n_pool else 0
        o = j * D
        if how == 0:
            min_block = j
            for d in range(D):
                phi[o + d] = np.inf
            for k in range(K):  # instances outer, prototypes inner: contiguous rows
                for d in range(D):
                    if dist[k, d] < phi[o + d]:
                        phi[o + d] = dist[k, d]
                        arg_min[d] = k
        elif how == 1:
            for d in range(D):
                phi[o + d] = -np.inf
            for k in range(K):
                for d in range(D):
                    if dist[k, d] > phi[o + d]:
                        phi[o + d] = dist[k, d]
                        arg_max[d] = k
        else:
            for d in range(D):
                phi[o + d] = 0.0
            for k in range(K):
                for d in range(D):
                    phi[o + d] += dist[k, d]
            for d in range(D):
                phi[o + d] /= K
    pen = 0.0
    if pen_min:
        for d in range(D):
            pen += phi[min_block * D + d]
    else:
        for f in range(F):
            pen += phi[f]
    sigma = 1.0
    if layer_norm:  # Eq. 4, population variance
        mu = 0.0
        for f in range(F):
            mu += phi[f]
        mu /= F
        var = 0.0
        for f in range(F):
            var += (phi[f] - mu) ** 2
        sigma = np.sqrt(var / F + ln_eps)
        for f in range(F):
            z[f] = (phi[f] - mu) / sigma
    else:
        for f in range(F):
            z[f] = phi[f]
    for o in range(O):
        acc = bm[o] if has_bias else 0.0
        for f in range(F):
            acc += Wm[o, f] * z[f]
        logits[o] = acc
    return n_blocks, min_block, sigma, pen


@_jit
def _bag_gradients(X, r0, K, Pm, Wm, bm, label, pools, code, pen_min, layer_norm, ln_eps, has_bias,
                   lam_d, scale, eps, psq, dist, xnorms, phi, z, logits, gl, gz, gphi, arg_min, arg_max, gP, gW, gb,
                   xsum):
    """Forward one bag, add its gradients (weighted by ``scale`` = 1/batch size); return (ce, pen)."""
    D = Pm.shape[0]
    O = Wm.shape[0]
    F = D * pools.shape[0]
    n_blocks, min_block, sigma, pen = _forward(X, r0, K, Pm, Wm, bm, pools, code, pen_min, layer_norm, ln_eps,
                                               has_bias, eps, psq, dist, xnorms, phi, z, logits, arg_min, arg_max)
    # cross-entropy; gl = d CE / d logits
    if O == 1:
        t = logits[0]
        ce = max(t, 0.0) - t * label + np.log1p(np.exp(-abs(t)))
        gl[0] = 1.0 / (1.0 + np.exp(-t)) - label
    else:
        top = logits[:O].max()
        total = 0.0
        for o in range(O):
            total += np.exp(logits[o] - top)
        lse = top + np.log(total)
        ce = lse - logits[label]
        for o in range(O):
            gl[o] = np.exp(logits[o] - lse) - (1.0 if o == label else 0.0)
    # classifier
    for f in range(F):
        gz[f] = 0.0
    for o in range(O):
        g = gl[o] * scale
        if has_bias:
            gb[o] += g
        for f in range(F):
            gW[o, f] += g * z[f]
            gz[f] += g * Wm[o, f]
    # layer norm
    if layer_norm:
        mg, mgz = 0.0, 0.0
        for f in range(F):
            mg += gz[f]
            mgz += gz[f] * z[f]
        mg /= F
        mgz /= F
        for f in range(F):
            gphi[f] = (gz[f] - mg - z[f] * mgz) / sigma
    else:
        for f in range(F):
            gphi[f] = gz[f]
    for f in range(F, n_blocks * D):
        gphi[f] = 0.0
    # distance penalty
    gd = lam_d * scale
    if pen_min:
        for d in range(D):
            gphi[min_block * D + d] += gd
    else:
        for f in range(F):
            gphi[f] += gd
    # pooling and distances: min and max touch one instance per prototype
    n_pool = pools.shape[0]
    have_sum = False  # ``xsum`` holds the bag's (unit) instance sum once a shortcut below needs it
    for j in range(n_blocks):
        how = pools[j] if j < n_pool else 0
        for d in range(D):
            g = gphi[j * D + d]
            if g == 0.0:
                continue
            pn = np.sqrt(psq[d])
            if how == 0 or how == 1:
                k = arg_min[d] if how == 0 else arg_max[d]
                _add_distance_grad(X[r0 + k], Pm[d], code, dist[k, d], g, xnorms[k], pn, eps, gP[d])
            else:
                g /= K
                if code == 0:
                    # _add_distance_grad's Euclidean case written out (the same operations): as a
                    # call per instance it made mean pooling's backward pass 2-3x slower.
                    Pd, Gd = Pm[d], gP[d]
                    for k in range(K):
                        dk = dist[k, d]
                        if dk > 0:
                            s = g / dk
                            for l in range(Pd.shape[0]):
                                Gd[l] += s * (Pd[l] - X[r0 + k, l])
                elif code == 1:
                    # Squared Euclidean: sum_k 2 (p - x_k) = 2 (K p - sum_k x_k), O(L) per prototype.
                    if not have_sum:
                        _bag_sum(X, r0, K, xnorms, eps, False, xsum)
                        have_sum = True
                    Pd, Gd = Pm[d], gP[d]
                    s = 2.0 * g
                    for l in range(Pd.shape[0]):
                        Gd[l] += s * (K * Pd[l] - xsum[l])
                elif code == 3:
                    # Cosine: d(1 - cos)/dp = -(x/|x| - cos p/|p|)/|p|, so the sum over the bag needs only
                    # the bag's sum of unit instances (into ``xsum``, once per bag) and sum of cosines
                    # (K - K * mean distance): O(L) per prototype instead of O(K L), which was most
                    # of the recommended model's training time at D = 1,024.
                    if not have_sum:
                        _bag_sum(X, r0, K, xnorms, eps, True, xsum)
                        have_sum = True
                    Pd, Gd = Pm[d], gP[d]
                    if pn > eps:
                        s = g / pn
                        c = K * (1.0 - phi[j * D + d]) / pn  # phi's block j holds the mean distances
                        for l in range(Pd.shape[0]):
                            Gd[l] -= s * (xsum[l] - c * Pd[l])
                    else:
                        s = g / eps
                        for l in range(Pd.shape[0]):
                            Gd[l] -= s * xsum[l]
                else:
                    for k in range(K):
                        _add_distance_grad(X[r0 + k], Pm[d], code, dist[k, d], g, xnorms[k], pn, eps, gP[d])
    return ce, pen


@_jit
def _bag_sum(X, r0, K, xnorms, eps, unit, out):
    """``out = sum_k X[r0 + k]``, or with ``unit`` the sum of ``X[r0 + k] / max(|X[r0 + k]|, eps)``."""
    L = out.shape[0]
    for l in range(L):
        out[l] = 0.0
    for k in range(K):
        s = 1.0 / max(xnorms[k], eps) if unit else 1.0
        for l in range(L):
            out[l] += X[r0 + k, l] * s


@_jit
def _squared_norms(Pm, psq):
    D, L = Pm.shape
    for d in range(D):
        acc = 0.0
        for l in range(L):
            acc += Pm[d, l] * Pm[d, l]
        psq[d] = acc


@_jit
def _penalties(Pm, Wm, gP, gW, lam_w, lam_p, w_l1, p_norm, coef, psq):
    """Add the parameter penalties' gradients; return their weighted values.

    ``coef`` is a (D, D) scratch table in the parameters' dtype for the pairwise penalty; ``psq`` the
    prototypes' squared norms.
    """
    D, L = Pm.shape
    O, F = Wm.shape
    w_pen = 0.0
    if w_l1:
        for o in range(O):
            for f in range(F):
                w = Wm[o, f]
                w_pen += abs(w)
                if w > 0:
                    gW[o, f] += lam_w
                elif w < 0:
                    gW[o, f] -= lam_w
    else:
        sq = 0.0
        for o in range(O):
            for f in range(F):
                sq += Wm[o, f] * Wm[o, f]
        w_pen = np.sqrt(sq + 1e-12)
        for o in range(O):
            for f in range(F):
                gW[o, f] += lam_w * Wm[o, f] / w_pen
    p_pen = 0.0
    if p_norm:
        for d in range(D):
            n = _norm(Pm[d])
            p_pen += n
            if n > 0:
                for l in range(L):
                    gP[d, l] += lam_p * Pm[d, l] / n
    else:  # the published code's: sum over all D x D pairs (diagonal too) of max(|P_a| + |P_c| - 2 P_a.P_c, 0)
        # With m_ac = 1 where a pair's value is not clamped (>= 0, as torch's clamp passes it), each ordered
        # pair appearing twice: d/dP_a = lam_p (2 (sum_c m_ac) P_a / |P_a| - 4 sum_c m_ac P_c), read off
        # coef. ``psq`` holds the squared norms of these prototypes.
        for a in range(D):
            for c in range(a, D):
                coef[a, c] = 0.0
                dot = coef[a, c]  # a zero of the parameters' dtype: the sum stays in it
                for l in range(L):
                    dot += Pm[a, l] * Pm[c, l]
                v = np.sqrt(psq[a]) + np.sqrt(psq[c]) - 2.0 * dot
                if v >= 0:
                    p_pen += v if a == c else 2.0 * v
                    coef[a, c] = 1.0
                coef[c, a] = coef[a, c]
        pull = 4.0 * lam_p
        for a in range(D):
            n = np.sqrt(psq[a])
            total = 0.0
            for c in range(D):
                total += coef[a, c]
            if n > 0:
                own = 2.0 * lam_p * total
                for l in range(L):
                    gP[a, l] += own * Pm[a, l] / n
            for c in range(D):
                if coef[a, c] > 0:
                    for l in range(L):
                        gP[a, l] -= pull * Pm[c, l]
    return lam_w * w_pen, lam_p * p_pen


@_jit
def _adam_constants(c, lr, step, beta1, beta2, eps):
    """Fill ``c`` (an array of the parameters' dtype, so the update runs in that precision)."""
    c[0] = 1.0 - beta1
    c[1] = beta2
    c[2] = 1.0 - beta2
    c[3] = lr / (1.0 - beta1**step)
    c[4] = np.sqrt(1.0 - beta2**step)
    c[5] = eps


@_jit
def _adam(param, grad, m1, m2, c):
    """``torch.optim.Adam``'s update (single-tensor path), in place; ``c`` from ``_adam_constants``."""
    one_minus_beta1, beta2, one_minus_beta2, step_size, bc2_sqrt, eps = c[0], c[1], c[2], c[3], c[4], c[5]
    p, g, a, b = param.ravel(), grad.ravel(), m1.ravel(), m2.ravel()
    for i in range(p.shape[0]):
        gi = g[i]
        a[i] += one_minus_beta1 * (gi - a[i])
        b[i] = b[i] * beta2 + one_minus_beta2 * gi * gi
        p[i] -= step_size * a[i] / (np.sqrt(b[i]) / bc2_sqrt + eps)


if AVAILABLE:

    @njit(parallel=True, cache=True, fastmath=_FASTMATH, error_model="numpy")
    def _run_epoch(X, start, sizes, y, plan, n_batches, P, W, b, mP, vP, mW, vW, mb, vb, aP, aW, ab, step,
                   lr_p, lr_w, factor, pools, code, pen_min, layer_norm, ln_eps, has_bias, lam_w, lam_p, lam_d,
                   w_l1, p_norm, accumulate, beta1, beta2, adam_eps, kmax, sums, eps, monotone):
        """One epoch of every model (one model per parallel iteration); see ``train_epoch``."""
        M, D, L = P.shape
        O, F = W.shape[1], W.shape[2]
        B = plan.shape[2]
        for m in prange(M):
            dist = np.empty((kmax, D), dtype=X.dtype)
            xnorms = np.empty(kmax)
            phi = np.empty(F + D)
            z = np.empty(F)
            logits = np.empty(O)
            gl = np.empty(O)
            gz = np.empty(F)
            gphi = np.empty(F + D)
            arg_min = np.zeros(D, dtype=np.int64)
            arg_max = np.zeros(D, dtype=np.int64)
            psq = np.zeros(D)
            cp = np.empty(6, dtype=P.dtype)
            cw = np.empty(6, dtype=P.dtype)
            gP = np.zeros((D, L), dtype=P.dtype)
            coef = np.zeros((D, D), dtype=P.dtype)
            gW = np.zeros((O, F), dtype=W.dtype)
            gb = np.zeros(O, dtype=b.dtype)
            xsum = np.empty(L)
            Pm, Wm, bm = P[m], W[m], b[m]
            for t in range(n_batches[m]):
                gP[:] = 0.0
                gW[:] = 0.0
                gb[:] = 0.0
                n_in = 0
                for j in range(B):
                    if plan[m, t, j] >= 0:
                        n_in += 1
                scale = 1.0 / n_in
                _squared_norms(Pm, psq)
                ce_sum, pen_sum = 0.0, 0.0
                for j in range(B):
                    bag = plan[m, t, j]
                    if bag < 0:
                        continue
                    ce, pen = _bag_gradients(X, start[m, bag], sizes[bag], Pm, Wm, bm, y[bag], pools, code,
                                             pen_min, layer_norm, ln_eps, has_bias, lam_d, scale, eps, psq,
                                             dist, xnorms, phi, z, logits, gl, gz, gphi, arg_min, arg_max,
                                             gP, gW, gb, xsum)
                    ce_sum += ce
                    pen_sum += pen
                w_pen, p_pen = _penalties(Pm, Wm, gP, gW, lam_w, lam_p, w_l1, p_norm, coef, psq)
                sums[m, 0] += ce_sum * scale
                sums[m, 1] += w_pen
                sums[m, 2] += p_pen
                sums[m, 3] += lam_d * pen_sum * scale
                step[m] += 1
                if accumulate:  # the published code never zeroes gradients: each step uses their running sum
                    aP[m] += gP
                    aW[m] += gW
                    ab[m] += gb
                    gP[:] = aP[m]
                    gW[:] = aW[m]
                    gb[:] = ab[m]
                _adam_constants(cp, lr_p[m] * factor, step[m], beta1, beta2, adam_eps)
                _adam_constants(cw, lr_w[m] * factor, step[m], beta1, beta2, adam_eps)
                _adam(Pm, gP, mP[m], vP[m], cp)
                _adam(Wm, gW, mW[m], vW[m], cw)
                if monotone:  # projected Adam: the classifier weights stay <= 0
                    for o in range(O):
                        for f in range(F):
                            if Wm[o, f] > 0.0:
                                Wm[o, f] = 0.0
                if has_bias:
                    _adam(bm, gb, mb[m], vb[m], cw)

    @njit(parallel=True, cache=True, fastmath=_FASTMATH, error_model="numpy")
    def _predict_slots(X, start, sizes, slot_model, slot_bag, P, W, b, pools, code, pen_min, layer_norm, ln_eps,
                       has_bias, eps, kmax, out):
        """Logits of each (model, bag) slot into ``out``; see ``predict_logits``."""
        M, D, L = P.shape
        O, F = W.shape[1], W.shape[2]
        for s in prange(slot_model.shape[0]):
            m, bag = slot_model[s], slot_bag[s]
            dist = np.empty((kmax, D), dtype=X.dtype)
            xnorms = np.empty(kmax)
            phi = np.empty(F + D)
            z = np.empty(F)
            logits = np.empty(O)
            arg = np.zeros(D, dtype=np.int64)
            psq = np.empty(D)
            _squared_norms(P[m], psq)
            _forward(X, start[m, bag], sizes[bag], P[m], W[m], b[m], pools, code, pen_min, layer_norm, ln_eps,
                     has_bias, eps, psq, dist, xnorms, phi, z, logits, arg, arg)
            out[s, :] = logits


class EpochState:
    """Parameters, Adam moments and step counts of M models, as NumPy arrays the kernel updates in place."""

    def __init__(self, P: np.ndarray, W: np.ndarray, b: np.ndarray | None, accumulate: bool) -> None:
        self.P, self.W = P, W
        self.has_bias = b is not None
        self.b = b if b is not None else np.zeros(W.shape[:2], dtype=W.dtype)
        self.moments = [np.zeros_like(a) for a in (self.P, self.P, self.W, self.W, self.b, self.b)]
        shape = (lambda a: a.shape) if accumulate else (lambda a: (0,) * a.ndim)
        self.accumulated = [np.zeros(shape(a), dtype=a.dtype) for a in (self.P, self.W, self.b)]
        self.step = np.zeros(P.shape[0], dtype=np.int64)


def first_compile(kernel=None) -> bool:
    """Whether numba's on-disk cache lacks the epoch kernel, so the next training compiles it (about half a
    minute on two cores, with the progress bar still at 0 %): the first run on a machine, or after this file
    changed. Read from numba's cache index (``kernel``: another cached dispatcher); False when it cannot tell,
    since it only decides whether to print a note."""
    try:
        index = (kernel if kernel is not None else _run_epoch)._cache._cache_file._index_path
    except (AttributeError, NameError):  # numba absent, or its cache laid out otherwise
        return False
    return not os.path.exists(index)


def train_epoch(state: EpochState, X, start, sizes, y, plan, n_batches, lr_p, lr_w, factor, model_config,
                train_config, kmax: int) -> np.ndarray:
    """One epoch of every model; returns the (M, 4) sums of the loss terms over its steps.

    ``X`` holds each model's standardised training bags, ``start[m, bag]`` the row of
    ``bag``'s first instance in model ``m``'s copy, ``plan[m, t]`` the bags of model
    ``m``'s step ``t`` (-1 pads a short minibatch), ``n_batches[m]`` its number of steps.
    """
    c = model_config
    sums = np.zeros((state.P.shape[0], 4))
    pools, code, pen_min, layer_norm, ln_eps = _codes(c)
    eps = float(np.finfo(X.dtype).eps)
    # Models differ in cost (Musk1 and Musk2 folds train together in the CV runner):
    # hand them to threads one at a time rather than in two fixed halves.
    previous = numba.set_parallel_chunksize(1)
    try:
        _run_epoch(
            X, start, sizes, y, plan, n_batches, state.P, state.W, state.b, *state.moments, *state.accumulated,
            state.step, lr_p, lr_w, float(factor), pools, code, pen_min, layer_norm, ln_eps, state.has_bias,
            float(c.lambda_w), float(c.lambda_p), float(c.lambda_d), c.weight_penalty == "l1",
            c.prototype_penalty == "norm", bool(train_config.accumulate_gradients), float(train_config.betas[0]),
            float(train_config.betas[1]), float(train_config.eps), int(kmax), sums, eps, bool(c.monotone),
        )
    finally:
        numba.set_parallel_chunksize(previous)
    return sums


def _codes(c):
    pools = np.array([POOLING_CODES[p] for p in c.pooling], dtype=np.int64)
    return pools, DISTANCE_CODES[c.distance], c.distance_penalty == "min", bool(c.layer_norm), float(c.layer_norm_eps)


def predict_logits(state: EpochState, X, start, sizes, slot_model, slot_bag, model_config, kmax: int) -> np.ndarray:
    """Logits (S, O) of bag ``slot_bag[s]`` under model ``slot_model[s]``; bags laid out as for :func:`train_epoch`."""
    out = np.empty((len(slot_model), state.W.shape[1]))
    eps = float(np.finfo(X.dtype).eps)
    _predict_slots(X, start, sizes, np.asarray(slot_model, np.int64), np.asarray(slot_bag, np.int64), state.P,
                   state.W, state.b, *_codes(model_config), state.has_bias, eps, int(kmax), out)
    return out
