"""The tensor engine: M models advance together as batched torch operations.

At every tick each model takes one step on its own next minibatch; the framework
overhead is paid once per tick instead of once per model. Bags of very different
sizes are not all padded to the largest: a tick's bags are sorted by size and cut
into at most three groups (:func:`~minitorch_proto.training.setup.size_groups`),
each one batched matrix product. This is the engine for CUDA, and for CPUs
without numba.
"""
from __future__ import annotations

import time

import numpy as np
import torch

from ..distances import pairwise_distance
from ..model import (
    LOSS_TERMS,
    class_probabilities,
    cross_entropy,
    head_logits,
    normalize_features,
    penalty_terms,
    pooled_from_distances,
    project_monotone_,
)
from ..utils import progress_bar
from .config import epoch_batches
from .setup import BatchedFit, Setup, size_groups

__all__ = ["fit_tensor"]


def _masked_pool(dist: torch.Tensor, mask: torch.Tensor, sizes: torch.Tensor, how: str) -> torch.Tensor:
    """Pool (G, K, D) distances over the K axis, ignoring padded rows."""
    m = mask.unsqueeze(-1)
    if how == "min":
        return dist.masked_fill(~m, float("inf")).amin(1)
    if how == "max":
        return dist.masked_fill(~m, float("-inf")).amax(1)
    return (dist * m).sum(1) / sizes.unsqueeze(-1).to(dist.dtype)


class _MinEuclidean(torch.autograd.Function):
    """Min over a bag's instances of the Euclidean distance to each prototype.

    The paper's default (min pooling, Euclidean distance) has a sparse gradient:
    each (bag, prototype) pair depends on one instance, its nearest. Doing the
    backward pass by hand with that instance alone skips a batched matrix product
    and a dozen elementwise operations per group and tick. Ties between identical
    instances give the same gradient as autograd's even split.
    """

    @staticmethod
    def forward(ctx, X, P, mask):  # X (G, K, L) no grad, P (G, D, L), mask (G, K)
        sq = (X * X).sum(-1).unsqueeze(-1) + (P * P).sum(-1).unsqueeze(-2) - 2.0 * (X @ P.transpose(-1, -2))
        sq = sq.clamp_min_(0.0).masked_fill_(~mask.unsqueeze(-1), float("inf"))
        best, arg = sq.min(dim=1)  # (G, D)
        dist = best.sqrt()
        ctx.save_for_backward(X, P, arg, dist)
        return dist

    @staticmethod
    def backward(ctx, grad):
        X, P, arg, dist = ctx.saved_tensors
        nearest = torch.gather(X, 1, arg.unsqueeze(-1).expand(-1, -1, X.shape[-1]))  # (G, D, L)
        scale = torch.where(dist > 0, grad / torch.where(dist > 0, dist, torch.ones_like(dist)), torch.zeros_like(dist))
        return None, (P - nearest) * scale.unsqueeze(-1), None


class _Stack:
    """The stacked parameters of M models and their forward pass over (model, bag) slots."""

    def __init__(self, P, W, b, config, pool, means, scales, dtype, table_limit_bytes):
        self.P, self.W, self.b = P, W, b
        self.config, self.pool, self.dtype = config, pool, dtype
        self.means, self.scales = means, scales  # (M, L) float64, standardisation per model
        M, (N, L) = means.shape[0], pool.instances.shape
        self.table = None
        if M * N * L * torch.finfo(dtype).bits // 8 <= table_limit_bytes:
            # Every model's standardised copy of the pool, made once: the hot loop then
            # gathers ready rows instead of standardising the same rows on every tick.
            self.table = torch.empty((M, N, L), dtype=dtype, device=pool.device)
            for m in range(M):
                self.table[m] = ((pool.instances - means[m]) / scales[m]).to(dtype)
        c = config
        self._min_euclidean = c.pooling == ("min",) and c.distance == "euclidean" and c.distance_penalty == "min"
        self.autocast_dtype: torch.dtype | None = None

    def pooled(self, slot_model: np.ndarray, slot_bag: np.ndarray):
        """Pooled features (S, F) and penalised distances (S, D') of each slot."""
        sizes = self.pool.sizes[slot_bag]
        phis, pens, order = [], [], []
        for g in size_groups(sizes):
            rows, mask, gsizes = self.pool.padded_rows(slot_bag[g])
            mt = torch.as_tensor(slot_model[g], device=self.pool.device)
            if self.table is not None:
                X = self.table[mt.unsqueeze(1), rows]
            else:
                X = self.pool.instances[rows]
                X = ((X - self.means[mt].unsqueeze(1)) / self.scales[mt].unsqueeze(1)).to(self.dtype)
            # Under autocast only the matrix products drop to bf16 (autocast's op lists);
            # norms, clamping, square roots and the pooled values stay in self.dtype.
            with torch.autocast(self.pool.device.type, dtype=self.autocast_dtype or torch.bfloat16,
                                enabled=self.autocast_dtype is not None):
                if self._min_euclidean:
                    phi = _MinEuclidean.apply(X, self.P[mt], mask).to(self.dtype)
                else:
                    dist = pairwise_distance(X, self.P[mt], self.config.distance).to(self.dtype)
            if self._min_euclidean:
                pen = phi
            else:
                phi, pen = pooled_from_distances(
                    dist, lambda d, how: _masked_pool(d, mask, gsizes, how), self.config
                )
            phis.append(phi)
            pens.append(pen)
            order.append(g)
        inverse = torch.as_tensor(np.argsort(np.concatenate(order)), device=self.pool.device)
        return torch.cat(phis)[inverse], torch.cat(pens)[inverse]

    def logits(self, phi: torch.Tensor, slot_model: np.ndarray) -> torch.Tensor:
        mt = torch.as_tensor(slot_model, device=self.pool.device)
        z = normalize_features(phi, self.config).unsqueeze(1)  # (S, 1, F)
        bias = None if self.b is None else self.b[mt]
        return head_logits(z, self.W[mt], bias).squeeze(1)  # (S, O)

    @torch.no_grad()
    def predict_proba(self, slot_model: np.ndarray, slot_bag: np.ndarray, chunk: int = 4096) -> np.ndarray:
        out = []
        for s in range(0, len(slot_bag), chunk):
            sm, sb = slot_model[s : s + chunk], slot_bag[s : s + chunk]
            out.append(class_probabilities(self.logits(self.pooled(sm, sb)[0], sm)))
        return torch.cat(out).double().cpu().numpy()


def _adam_update(param, grad, exp_avg, exp_avg_sq, lr, active, all_active, step, betas, eps, buffers):
    """Adam as ``torch.optim.Adam`` (single-tensor path), per model.

    ``lr``, ``active`` and ``step`` have one entry per model. On ticks where every
    model steps (nearly all of them) the update is done in place in a few passes;
    otherwise the models sitting out keep their parameters and moments.
    ``buffers`` are two scratch tensors shaped like ``param``: fresh multi-megabyte
    temporaries on every tick cost more than the arithmetic.
    """
    shape = (-1,) + (1,) * (param.dim() - 1)
    beta1, beta2 = betas
    stepf = step.to(param.dtype).clamp_min(1)
    step_size = (lr / (1 - beta1**stepf)).view(shape)
    bc2_sqrt = torch.sqrt(1 - beta2**stepf).view(shape)
    if all_active:
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom, scaled = buffers
        torch.sqrt(exp_avg_sq, out=denom)
        denom.div_(bc2_sqrt).add_(eps)
        torch.mul(exp_avg, step_size, out=scaled)
        param.addcdiv_(scaled, denom, value=-1.0)
        return
    a = active.view(shape)
    exp_avg.copy_(torch.where(a, exp_avg.lerp(grad, 1 - beta1), exp_avg))
    exp_avg_sq.copy_(torch.where(a, exp_avg_sq * beta2 + (1 - beta2) * grad * grad, exp_avg_sq))
    denom = exp_avg_sq.sqrt() / bc2_sqrt + eps
    param.sub_(torch.where(a, step_size * exp_avg / denom, torch.zeros_like(param)))


def fit_tensor(s: Setup) -> BatchedFit:
    """The M models advance together, one batched tensor step per tick (CPU or CUDA)."""
    M, model_config, train_config = s.n_models, s.model_config, s.train_config
    dev, dtype, modules, train_sets = s.dev, s.dtype, s.modules, s.train_sets
    y = s.y
    P = torch.stack([mod.prototypes.detach() for mod in modules]).to(dev, dtype).requires_grad_(True)
    W = torch.stack([mod.weight.detach() for mod in modules]).to(dev, dtype).requires_grad_(True)
    b = None
    if model_config.bias:
        b = torch.stack([mod.bias.detach() for mod in modules]).to(dev, dtype).requires_grad_(True)
    params = [P, W] + ([b] if b is not None else [])
    stack = _Stack(P, W, b, model_config, s.pool, s.means, s.scales, dtype, s.table_limit_bytes)
    stack.autocast_dtype = s.autocast
    lr_p, lr_w = (torch.as_tensor(v, dtype=dtype, device=dev) for v in s.learning_rates())
    lrs = [lr_p, lr_w] + ([lr_w] if b is not None else [])
    exp_avg = [torch.zeros_like(p) for p in params]
    exp_avg_sq = [torch.zeros_like(p) for p in params]
    scratch = [(torch.empty_like(p), torch.empty_like(p)) for p in params]
    accumulated = [torch.zeros_like(p) for p in params] if train_config.accumulate_gradients else None
    step = torch.zeros(M, dtype=torch.long, device=dev)
    rngs = [np.random.default_rng(int(seed)) for seed in s.seeds]
    y_t = torch.as_tensor(y, device=dev)
    model_ids = np.arange(M)

    fit = BatchedFit(P, W, b, model_config, s.standardizers, s.n_classes, history=[[] for _ in range(M)])
    s.start(fit)
    for epoch in progress_bar(range(int(train_config.epochs)), s.progress, f"epochs ({M} models)"):
        t0 = time.perf_counter()
        factor = train_config.lr_factor(epoch)
        schedule = [epoch_batches(len(train_sets[m]), train_config, rngs[m]) for m in range(M)]
        n_ticks = max(len(sch) for sch in schedule)
        sums = torch.zeros(len(LOSS_TERMS), M, dtype=torch.float64, device=dev)
        n_steps = torch.zeros(M, dtype=torch.float64, device=dev)
        for tick in range(n_ticks):
            active_np = np.array([tick < len(schedule[m]) for m in range(M)])
            act_models = model_ids[active_np]
            batches = [train_sets[m][schedule[m][tick]] for m in act_models]
            slot_model = np.concatenate([np.full(len(bt), m) for m, bt in zip(act_models, batches)])
            slot_bag = np.concatenate(batches)
            slot_model_t = torch.as_tensor(slot_model, device=dev)

            phi, pen = stack.pooled(slot_model, slot_bag)
            logits = stack.logits(phi, slot_model)
            counts = torch.zeros(M, dtype=dtype, device=dev).index_add_(
                0, slot_model_t, torch.ones(len(slot_model), dtype=dtype, device=dev)
            )
            per_model_mean = lambda v: torch.zeros(M, dtype=dtype, device=dev).index_add_(  # noqa: E731
                0, slot_model_t, v
            ) / counts.clamp_min(1)
            ce = per_model_mean(cross_entropy(logits, y_t[slot_bag]))
            d_pen = model_config.lambda_d * per_model_mean(pen.sum(-1))
            pens = penalty_terms(W, P, model_config)
            active = torch.as_tensor(active_np, device=dev)
            terms = torch.stack([ce, pens["weight_penalty"], pens["prototype_penalty"], d_pen])
            terms = terms * active.to(dtype)
            for p in params:
                p.grad = None
            terms.sum().backward()

            step += active.long()
            all_active = bool(active_np.all())
            with torch.no_grad():
                for i, p in enumerate(params):
                    g = p.grad
                    if accumulated is not None:
                        # Gradients of models sitting out this tick are exactly 0 (their terms are masked).
                        accumulated[i] += g
                        g = accumulated[i]
                    _adam_update(p, g, exp_avg[i], exp_avg_sq[i], lrs[i] * factor, active, all_active, step,
                                 train_config.betas, train_config.eps, scratch[i])
                if model_config.monotone:
                    # Models sitting out this tick already have W <= 0: projecting them is a no-op.
                    project_monotone_(W)
                sums += terms.detach().double()
                n_steps += active.double()
        means_ep = (sums / n_steps.clamp_min(1)).cpu().numpy()
        s.end_of_epoch(fit, stack.predict_proba, epoch, means_ep, time.perf_counter() - t0)
    for p in params:
        p.requires_grad_(False)
    return s.finish(fit, stack, stack.predict_proba)
