"""The numba loops behind :mod:`minitorch_proto.baselines.compiled_loops` (read that module first).

One call of :func:`_epoch_all` runs one epoch of every model, a model per parallel
iteration; :func:`_model_epoch` is one model's epoch: per bag, the forward pass, the loss, the
backward pass written out by hand and the optimiser step. Parameters live in one flat vector
per model, each tensor in torch's layout at the offsets the driver computed.
"""
from __future__ import annotations

import numpy as np

from ..training.compiled_distances import AVAILABLE, blocked_dots
from .minet import _EPS

if AVAILABLE:
    from numba import njit, prange

# Kernel codes (the driver translates the networks and optimisers into these).
_HEADS = {"attention": 0, "gated": 1, "MI-Net": 2, "mi-Net": 3}
_POOLS = {"max": 0, "mean": 1, "lse": 2}
_SGD, _ADAM = 0, 1


# Up to this many instances a layer's products run in the loops here, which beat BLAS on such
# thin matrices (1.5-3x at five instances); above it BLAS does (Musk2 has bags of 1,044).
SMALL_BAG = 12


def _jit(fn):
    # No re-association: the element-wise passes keep torch's order of operations.
    if not AVAILABLE:  # pragma: no cover
        return fn
    return njit(cache=True, nogil=True, error_model="numpy")(fn)


def _jit_sums(fn):
    # re-association and FMA let the compiler vectorise the sums of the small products
    if not AVAILABLE:  # pragma: no cover
        return fn
    return njit(cache=True, nogil=True, error_model="numpy", fastmath={"reassoc", "contract", "nsz", "arcp"})(fn)


# ----------------------------------------------------------------------- kernels
@_jit_sums
def _linear(x, w, out):
    """``out = x @ w.T`` (``w`` is (out, in), torch's layout)."""
    if x.shape[0] > SMALL_BAG:
        np.dot(x, w.T, out)
    else:
        blocked_dots(x, 0, x.shape[0], w, out)


@_jit_sums
def _weight_grad(dz, x, gw):
    """``gw = dz.T @ x``. Four instances per pass over a gradient row: one load and store of
    the row per four multiply-adds (1.6x the one-instance loop)."""
    K, O = dz.shape
    if K > SMALL_BAG:
        np.dot(dz.T, x, gw)
        return
    for o in range(O):
        row = gw[o]
        k = K % 4
        if k == 0:
            row[:] = 0.0
        elif k == 1:
            c0, x0 = dz[0, o], x[0]
            for i in range(row.shape[0]):
                row[i] = c0 * x0[i]
        elif k == 2:
            c0, c1, x0, x1 = dz[0, o], dz[1, o], x[0], x[1]
            for i in range(row.shape[0]):
                row[i] = c0 * x0[i] + c1 * x1[i]
        else:
            c0, c1, c2, x0, x1, x2 = dz[0, o], dz[1, o], dz[2, o], x[0], x[1], x[2]
            for i in range(row.shape[0]):
                row[i] = c0 * x0[i] + c1 * x1[i] + c2 * x2[i]
        while k < K:
            c0, c1, c2, c3 = dz[k, o], dz[k + 1, o], dz[k + 2, o], dz[k + 3, o]
            x0, x1, x2, x3 = x[k], x[k + 1], x[k + 2], x[k + 3]
            for i in range(row.shape[0]):
                row[i] += c0 * x0[i] + c1 * x1[i] + c2 * x2[i] + c3 * x3[i]
            k += 4


@_jit_sums
def _input_grad(dz, w, da):
    """``da = dz @ w``, four weight rows per pass over an instance's gradient row."""
    K, O = dz.shape
    if K > SMALL_BAG:
        np.dot(dz, w, da)
        return
    I = w.shape[1]
    da[:] = 0.0
    o = O % 4
    for q in range(o):
        row = w[q]
        for k in range(K):
            c, dk = dz[k, q], da[k]
            for i in range(I):
                dk[i] += c * row[i]
    while o < O:
        w0, w1, w2, w3 = w[o], w[o + 1], w[o + 2], w[o + 3]
        for k in range(K):
            c0, c1, c2, c3 = dz[k, o], dz[k, o + 1], dz[k, o + 2], dz[k, o + 3]
            dk = da[k]
            for i in range(I):
                dk[i] += c0 * w0[i] + c1 * w1[i] + c2 * w2[i] + c3 * w3[i]
        o += 4


@_jit
def _column_sums(dz, out):
    """A bias gradient: ``out = dz.sum(axis=0)``."""
    out[:] = dz[0]
    for k in range(1, dz.shape[0]):
        row = dz[k]
        for j in range(out.shape[0]):
            out[j] += row[j]


@_jit
def _linear_backward(dz, x, w, gw, gb, dx):
    """A linear layer's backward pass: weight and bias gradients, and ``dx = dz @ w``."""
    _weight_grad(dz, x, gw)
    _column_sums(dz, gb)
    _input_grad(dz, w, dx)


@_jit
def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


@_jit
def _attention_head(h, p, g, hoff, d, gated, buf, vec, dh, tmp):
    """Logit of one bag under the attention head; writes the head's gradients (per unit logit) into
    ``g`` and d logit / d h into ``dh``. ``buf`` holds 4 (K, d) blocks, ``vec`` 4 K- and 2 width-vectors."""
    K, H = h.shape
    vw = p[hoff[0]: hoff[0] + d * H].reshape((d, H))
    av = buf[0: K * d].reshape((K, d))
    _linear(h, vw, av)
    for k in range(K):
        for j in range(d):
            av[k, j] = np.tanh(av[k, j] + p[hoff[1] + j])
    au = buf[K * d: 2 * K * d].reshape((K, d))
    if gated:
        uw = p[hoff[2]: hoff[2] + d * H].reshape((d, H))
        _linear(h, uw, au)
        for k in range(K):
            for j in range(d):
                au[k, j] = _sigmoid(au[k, j] + p[hoff[3] + j])
    s, a, da = vec[0:K], vec[K: 2 * K], vec[2 * K: 3 * K]
    z, dz = vec[4 * K: 4 * K + H], vec[4 * K + H: 4 * K + 2 * H]
    top = -np.inf
    for k in range(K):
        acc = 0.0
        for j in range(d):
            gk = av[k, j] * au[k, j] if gated else av[k, j]
            acc += gk * p[hoff[4] + j]
        s[k] = acc + p[hoff[5]]
        top = max(top, s[k])
    total = 0.0
    for k in range(K):
        a[k] = np.exp(s[k] - top)
        total += a[k]
    for k in range(K):
        a[k] /= total
    logit = p[hoff[7]]
    for j in range(H):
        acc = 0.0
        for k in range(K):
            acc += a[k] * h[k, j]
        z[j] = acc
        logit += acc * p[hoff[6] + j]
    # backward, per unit d loss / d logit (the caller scales)
    for j in range(H):
        g[hoff[6] + j] = z[j]
        dz[j] = p[hoff[6] + j]
    g[hoff[7]] = 1.0
    inner = 0.0
    for k in range(K):
        acc = 0.0
        for j in range(H):
            acc += h[k, j] * dz[j]
        da[k] = acc
        inner += a[k] * acc
    ds = s  # scores are no longer needed
    gwb = 0.0
    for k in range(K):
        ds[k] = a[k] * (da[k] - inner)
        gwb += ds[k]
    g[hoff[5]] = gwb
    dav = buf[2 * K * d: 3 * K * d].reshape((K, d))
    dau = buf[3 * K * d: 4 * K * d].reshape((K, d))
    for j in range(d):
        acc = 0.0
        for k in range(K):
            gk = av[k, j] * au[k, j] if gated else av[k, j]
            acc += ds[k] * gk
        g[hoff[4] + j] = acc
    for k in range(K):
        for j in range(d):
            dg = ds[k] * p[hoff[4] + j]
            if gated:
                dau[k, j] = dg * av[k, j] * (au[k, j] * (1.0 - au[k, j]))
                dg = dg * au[k, j]
            dav[k, j] = dg * (1.0 - av[k, j] * av[k, j])
    _linear_backward(dav, h, vw, g[hoff[0]: hoff[0] + d * H].reshape((d, H)), g[hoff[1]: hoff[1] + d], dh)
    if gated:
        _linear_backward(dau, h, uw, g[hoff[2]: hoff[2] + d * H].reshape((d, H)), g[hoff[3]: hoff[3] + d], tmp)
        for k in range(K):
            for j in range(H):
                dh[k, j] += tmp[k, j]
    for k in range(K):
        for j in range(H):
            dh[k, j] += a[k] * dz[j]
    return logit


@_jit
def _minet_head(h, p, g, hoff, pool, vec, arg, dh):
    """MI-Net: pool the instance representations, one logistic unit (see ``_attention_head``)."""
    K, H = h.shape
    z = vec[0:H]
    logit = p[hoff[7]]
    for j in range(H):
        top, at = h[0, j], 0
        for k in range(1, K):
            if h[k, j] > top:
                top, at = h[k, j], k
        arg[j] = at
        if pool == 0:
            z[j] = top
        elif pool == 1:
            acc = 0.0
            for k in range(K):
                acc += h[k, j]
            z[j] = acc / K
        else:
            acc = 0.0
            for k in range(K):
                acc += np.exp(h[k, j] - top)
            vec[H + j] = acc
            z[j] = top + np.log(acc / K)
        logit += z[j] * p[hoff[6] + j]
    for j in range(H):
        g[hoff[6] + j] = z[j]
        dzj = p[hoff[6] + j]
        for k in range(K):
            if pool == 0:
                dh[k, j] = dzj if k == arg[j] else 0.0
            elif pool == 1:
                dh[k, j] = dzj / K
            else:
                dh[k, j] = dzj * np.exp(h[k, j] - h[arg[j], j]) / vec[H + j]
    g[hoff[7]] = 1.0
    return logit


@_jit
def _minet_instance_head(h, p, g, hoff, pool, vec, dh):
    """mi-Net: one logistic unit per instance, pool the probabilities (see ``_attention_head``)."""
    K, H = h.shape
    s, sg = vec[0:K], vec[K: 2 * K]
    top, at = -np.inf, 0
    for k in range(K):
        acc = 0.0
        for j in range(H):
            acc += h[k, j] * p[hoff[6] + j]
        s[k] = acc + p[hoff[7]]
        if s[k] > top:
            top, at = s[k], k
    if pool == 0:  # logit(max sigmoid) == max logit
        logit = top
        for k in range(K):
            s[k] = 1.0 if k == at else 0.0
    else:
        stop = -np.inf
        for k in range(K):
            sg[k] = _sigmoid(s[k])
            stop = max(stop, sg[k])
        acc = 0.0
        for k in range(K):
            acc += sg[k] if pool == 1 else np.exp(sg[k] - stop)
        prob = acc / K if pool == 1 else stop + np.log(acc / K)
        inside = _EPS <= prob <= 1.0 - _EPS
        q = min(max(prob, _EPS), 1.0 - _EPS)
        logit = np.log(q / (1.0 - q))
        dprob = 1.0 / (q * (1.0 - q)) if inside else 0.0
        for k in range(K):
            w = 1.0 / K if pool == 1 else np.exp(sg[k] - stop) / acc
            s[k] = dprob * w * (sg[k] * (1.0 - sg[k]))
    gb = 0.0
    for j in range(H):
        acc = 0.0
        for k in range(K):
            acc += s[k] * h[k, j]
        g[hoff[6] + j] = acc
    for k in range(K):
        gb += s[k]
        for j in range(H):
            dh[k, j] = s[k] * p[hoff[6] + j]
    g[hoff[7]] = gb
    return logit


@_jit
def _model_epoch(p, s1, s2, g, seg, seg_wd, lrs, step0, X, rows, sizes, ys, n, mask, mrow, dims, woff, boff, head,
                 pool, hoff, d, opt, hp, act, d1, d2, abuf, vec, arg):
    """One epoch of one model: ``n`` steps, each one bag; returns the summed loss."""
    L = dims.shape[0] - 1
    W_last = dims[L]
    mom, nesterov, beta1c, beta2, beta2c, eps, keep = hp[0], hp[1] > 0, hp[2], hp[3], hp[4], hp[5], hp[6]
    loss_sum = 0.0
    mpos = mrow
    for i in range(n):
        K, r0, y = sizes[i], rows[i], ys[i]
        xb = X[r0: r0 + K]
        # --- forward: Linear-ReLU layers, dropout after the last
        c = 0
        for l in range(L):
            fin, fout = dims[l], dims[l + 1]
            w = p[woff[l]: woff[l] + fout * fin].reshape((fout, fin))
            out = act[c: c + K * fout].reshape((K, fout))
            if l == 0:
                _linear(xb, w, out)
            else:
                _linear(act[c - K * fin: c].reshape((K, fin)), w, out)
            bias = p[boff[l]: boff[l] + fout]
            for k in range(K):
                row = out[k]
                for j in range(fout):
                    v = row[j] + bias[j]
                    row[j] = v if v > 0.0 else 0.0
            c += K * fout
        h = act[c - K * W_last: c].reshape((K, W_last))
        if keep < 1.0:
            for k in range(K):
                for j in range(W_last):
                    h[k, j] = h[k, j] * mask[mpos + k, j] / keep
        dh = d1[0: K * W_last].reshape((K, W_last))
        if head <= 1:
            logit = _attention_head(h, p, g, hoff, d, head == 1, abuf, vec, dh, d2[0: K * W_last].reshape((K, W_last)))
        elif head == 2:
            logit = _minet_head(h, p, g, hoff, pool, vec, arg, dh)
        else:
            logit = _minet_instance_head(h, p, g, hoff, pool, vec, dh)
        # binary cross-entropy with logits, and its derivative sigmoid(x) - y
        loss_sum += max(logit, 0.0) - logit * y + np.log1p(np.exp(-abs(logit)))
        dl = _sigmoid(logit) - y
        _scale_head(g, hoff, d, W_last, head, dl)
        # --- backward through dropout and the ReLU layers
        for k in range(K):
            for j in range(W_last):
                if h[k, j] > 0.0:
                    v = dh[k, j] * dl
                    dh[k, j] = v / keep * mask[mpos + k, j] if keep < 1.0 else v
                else:
                    dh[k, j] = 0.0
        dz, other = d1, d2
        for l in range(L - 1, -1, -1):
            fin, fout = dims[l], dims[l + 1]
            c -= K * fout
            dzl = dz[0: K * fout].reshape((K, fout))
            gw = g[woff[l]: woff[l] + fout * fin].reshape((fout, fin))
            if l == 0:
                _weight_grad(dzl, xb, gw)
            else:
                _weight_grad(dzl, act[c - K * fin: c].reshape((K, fin)), gw)
            _column_sums(dzl, g[boff[l]: boff[l] + fout])
            if l > 0:
                w = p[woff[l]: woff[l] + fout * fin].reshape((fout, fin))
                da = other[0: K * fin].reshape((K, fin))
                _input_grad(dzl, w, da)
                prev = act[c - K * fin: c].reshape((K, fin))
                for k in range(K):
                    for j in range(fin):
                        if prev[k, j] <= 0.0:
                            da[k, j] = 0.0
                dz, other = other, dz
        mpos += K
        # --- the optimiser (torch.optim's single-tensor arithmetic), one tensor at a time
        t = step0 + i
        if opt == 0:
            _sgd(p, g, s1, seg, seg_wd, lrs[0, t], mom, nesterov, t == 0)
        else:
            _adam(p, g, s1, s2, seg, seg_wd, lrs[1, t], lrs[2, t], beta1c, beta2, beta2c, eps)
    return loss_sum


@_jit
def _sgd_tensor(p, g, buf, c, lr, mom, nesterov, first):
    # Loops over whole slices (``range(len)``), each case its own loop: with bounds read from
    # an array, or a branch inside, the compiler does not vectorise them (7x slower).
    if mom == 0.0:
        for q in range(p.shape[0]):
            p[q] = p[q] - lr * (g[q] + c * p[q])
    elif first:  # the momentum buffer starts as the first gradient
        for q in range(p.shape[0]):
            gq = g[q] + c * p[q]
            buf[q] = gq
            p[q] = p[q] - lr * (gq + gq * mom if nesterov else gq)
    elif nesterov:
        for q in range(p.shape[0]):
            gq = g[q] + c * p[q]
            v = buf[q] * mom + gq
            buf[q] = v
            p[q] = p[q] - lr * (gq + v * mom)
    else:
        for q in range(p.shape[0]):
            v = buf[q] * mom + (g[q] + c * p[q])
            buf[q] = v
            p[q] = p[q] - lr * v


@_jit
def _sgd(p, g, buf, seg, seg_wd, lr, mom, nesterov, first):
    """torch.optim.SGD's step, tensor by tensor; scalars in the parameters' dtype, as in torch."""
    for s in range(seg.shape[0]):
        lo, hi = seg[s, 0], seg[s, 1]
        _sgd_tensor(p[lo:hi], g[lo:hi], buf[lo:hi], seg_wd[s], lr, mom, nesterov, first)


@_jit
def _adam_tensor(p, g, m1, m2, c, step_size, bc2_sqrt, one_minus_beta1, beta2, one_minus_beta2, eps):
    for q in range(p.shape[0]):
        gq = g[q] + c * p[q]
        a = m1[q] + one_minus_beta1 * (gq - m1[q])
        v = m2[q] * beta2 + one_minus_beta2 * (gq * gq)
        m1[q] = a
        m2[q] = v
        p[q] = p[q] - step_size * (a / (np.sqrt(v) / bc2_sqrt + eps))


@_jit
def _adam(p, g, m1, m2, seg, seg_wd, step_size, bc2_sqrt, one_minus_beta1, beta2, one_minus_beta2, eps):
    """torch.optim.Adam's step (L2 weight decay added to the gradient), tensor by tensor."""
    for s in range(seg.shape[0]):
        lo, hi = seg[s, 0], seg[s, 1]
        _adam_tensor(p[lo:hi], g[lo:hi], m1[lo:hi], m2[lo:hi], seg_wd[s], step_size, bc2_sqrt, one_minus_beta1,
                     beta2, one_minus_beta2, eps)


@_jit
def _scale_head(g, hoff, d, H, head, dl):
    """The heads write gradients per unit logit; scale them by d loss / d logit."""
    sizes = (d * H, d, d * H, d, d, 1, H, 1)
    for q in range(8):
        if hoff[q] >= 0:
            part = g[hoff[q]: hoff[q] + sizes[q]]
            for i in range(part.shape[0]):
                part[i] *= dl


_epoch_all = None
if AVAILABLE:

    @njit(parallel=True, cache=True, error_model="numpy")
    def _epoch_all(theta, s1, s2, seg, seg_wd, lrs, step0, X, rows, sizes, ys, n_bags, mask, mrow, kmax, dims, woff, boff,
                   head, pool, hoff, d, opt, hp, losses):
        """One epoch of every model, one model per parallel iteration."""
        M, P = theta.shape
        widths = 0
        wmax = 0
        for l in range(1, dims.shape[0]):
            widths += dims[l]
            wmax = max(wmax, dims[l])
        for m in prange(M):
            km = kmax[m]
            g = np.empty(P, dtype=theta.dtype)
            act = np.empty(km * widths, dtype=theta.dtype)
            d1 = np.empty(km * wmax, dtype=theta.dtype)
            d2 = np.empty(km * wmax, dtype=theta.dtype)
            abuf = np.empty(4 * km * max(d, 1), dtype=theta.dtype)
            vec = np.empty(4 * km + 2 * wmax, dtype=theta.dtype)
            arg = np.empty(wmax, dtype=np.int64)
            losses[m] = _model_epoch(theta[m], s1[m], s2[m], g, seg, seg_wd, lrs, step0[m], X, rows[m], sizes[m], ys[m],
                                     n_bags[m], mask, mrow[m], dims, woff, boff, head, pool, hoff, d, opt, hp,
                                     act, d1, d2, abuf, vec, arg)
