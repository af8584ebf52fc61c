"""Train many independent prototype MIL models as one tensor program.

The paper's protocol (batch size 1, 100 epochs, 5 x 10-fold CV on five data sets)
is 250 small models; trained one after another, almost all of the time goes to
per-step framework overhead, not arithmetic. Here M models advance together:
at every tick each model takes one step on its own next minibatch, so the
framework overhead is paid once per tick instead of once per model.

Each model keeps exactly the semantics of ``trainer.train_model``: its own
training bags in its own order (from its own seed), its own initialisation,
its own Adam state and learning rates, its own feature standardisation.
Models that have fewer training bags than others sit out the last ticks of an
epoch (their parameters and Adam state do not move).

Bags of very different sizes (Musk2: 1 to 1,044 instances) are not all padded to
the largest: the tick's bags are sorted by size and cut into at most three groups
(cut where padding would cost more than another batched product), and each group
is one batched matrix product.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import torch

from .distances import pairwise_distance
from .model import (
    LOSS_TERMS,
    PrototypeMIL,
    PrototypeMILConfig,
    cross_entropy,
    head_logits,
    normalize_features,
    penalty_terms,
    pooled_from_distances,
)
from .preprocessing import BagStandardizer
from .trainer import TrainConfig, _progress, epoch_batches, resolve_device

__all__ = ["BagPool", "BatchedFit", "train_batched", "size_groups"]


def size_groups(sizes: np.ndarray, group_cost: float = 400.0, max_groups: int = 3) -> list[np.ndarray]:
    """Split positions into at most ``max_groups`` groups of similar size (sorted ascending).

    Each group is padded to its largest bag, so a split trades padded rows against
    the fixed cost of one more batched product (forward and backward), which is
    worth about ``group_cost`` padded rows on a CPU. The cut points minimise
    ``padded rows + group_cost * number of groups`` exactly (all cuts are tried).
    """
    order = np.argsort(sizes, kind="stable")
    s = sizes[order].astype(np.float64)
    n = len(s)
    best_cost, best_cuts = n * s[-1] + group_cost, ()
    if n > 1 and max_groups >= 2:
        c = np.arange(1, n)  # first group [0, c), second [c, n)
        two = c * s[c - 1] + (n - c) * s[-1] + 2 * group_cost
        k = int(np.argmin(two))
        if two[k] < best_cost:
            best_cost, best_cuts = two[k], (int(c[k]),)
    if n > 2 and max_groups >= 3:
        c1, c2 = np.meshgrid(np.arange(1, n), np.arange(1, n), indexing="ij")
        valid = c1 < c2
        three = c1 * s[c1 - 1] + (c2 - c1) * s[c2 - 1] + (n - c2) * s[-1] + 3 * group_cost
        three = np.where(valid, three, np.inf)
        k = np.unravel_index(int(np.argmin(three)), three.shape)
        if three[k] < best_cost:
            best_cuts = (int(c1[k]), int(c2[k]))
    return np.split(order, best_cuts)


class BagPool:
    """All bags of a data set in one flat float64 array, for fast gathering."""

    def __init__(self, bags: Sequence[np.ndarray], device: torch.device) -> None:
        sizes = np.array([len(b) for b in bags], dtype=np.int64)
        self.sizes = sizes
        self.offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        self.instances = torch.as_tensor(np.concatenate(bags, axis=0), dtype=torch.float64, device=device)
        self.device = device
        self.n_features = self.instances.shape[1]

    def padded_rows(self, bag_ids: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(G, Kmax) pool row of each instance slot, (G, Kmax) mask and (G,) sizes of the given bags."""
        sizes = self.sizes[bag_ids]
        kmax = int(sizes.max())
        ar = np.arange(kmax)
        mask = ar[None, :] < sizes[:, None]
        rows = np.where(mask, self.offsets[bag_ids][:, None] + ar[None, :], self.offsets[bag_ids][:, None])
        return (
            torch.as_tensor(rows, device=self.device),
            torch.as_tensor(mask, device=self.device),
            torch.as_tensor(sizes, device=self.device),
        )


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


@dataclass
class BatchedFit:
    """The result of :func:`train_batched`.

    Attributes
    ----------
    prototypes : Tensor (M, D, L)
    weight : Tensor (M, O, F)
    bias : Tensor (M, O) or None
    config : PrototypeMILConfig
    standardizers : list of BagStandardizer, one per model
    n_classes : int
    history : list (one per model) of lists of per-epoch dicts of loss terms
    evaluations : dict epoch -> list of (n_eval_bags_m, n_classes) probability arrays
    seconds : float, wall time of training
    """

    prototypes: torch.Tensor
    weight: torch.Tensor
    bias: torch.Tensor | None
    config: PrototypeMILConfig
    standardizers: list[BagStandardizer]
    n_classes: int
    history: list[list[dict]] = field(default_factory=list)
    evaluations: dict[int, list[np.ndarray]] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def n_models(self) -> int:
        return int(self.prototypes.shape[0])

    def module(self, m: int) -> PrototypeMIL:
        """Model ``m`` as an ordinary :class:`PrototypeMIL` on the CPU."""
        mod = PrototypeMIL(self.prototypes.shape[2], self.n_classes, self.config)
        with torch.no_grad():
            mod.prototypes.copy_(self.prototypes[m].detach().cpu().float())
            mod.weight.copy_(self.weight[m].detach().cpu().float())
            if mod.bias is not None and self.bias is not None:
                mod.bias.copy_(self.bias[m].detach().cpu().float())
        return mod


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
            if self._min_euclidean:
                phi = _MinEuclidean.apply(X, self.P[mt], mask)
                pen = phi
            else:
                dist = pairwise_distance(X, self.P[mt], self.config.distance)
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
            logits = self.logits(self.pooled(sm, sb)[0], sm)
            if logits.shape[1] == 1:
                p1 = torch.sigmoid(logits[:, 0])
                out.append(torch.stack([1 - p1, p1], 1))
            else:
                out.append(torch.softmax(logits, 1))
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


def _limit_threads(fn):
    """Run ``fn`` with ``torch.set_num_threads(num_threads)``, restoring the old value after."""

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        n = kwargs.get("num_threads", 1)
        previous = torch.get_num_threads()
        if n is not None:
            torch.set_num_threads(int(n))
        try:
            return fn(*args, **kwargs)
        finally:
            torch.set_num_threads(previous)

    return wrapped


@_limit_threads
def train_batched(
    bags: Sequence[np.ndarray],
    y: np.ndarray,
    train_sets: Sequence[np.ndarray],
    seeds: Sequence[int],
    model_config: PrototypeMILConfig | None = None,
    train_config: TrainConfig | None = None,
    *,
    n_classes: int | None = None,
    standardization: str = "feature",
    lr_prototypes: Sequence[float] | None = None,
    lr_classifier: Sequence[float] | None = None,
    eval_sets: Sequence[np.ndarray] | None = None,
    eval_every: int | None = None,
    device: str | torch.device | None = "auto",
    dtype: torch.dtype = torch.float32,
    progress: bool = False,
    num_threads: int | None = 1,
    table_limit_bytes: int = 1 << 30,
    on_epoch_end: Callable[[int, "BatchedFit"], None] | None = None,
) -> BatchedFit:
    """Fit M = len(train_sets) models at once.

    Parameters
    ----------
    bags : sequence of ndarray (n_instances_i, n_features)
        Every bag any model trains or is evaluated on (raw, unstandardised).
    y : ndarray of int, shape (n_bags,)
        Encoded labels 0..C-1.
    train_sets : sequence of int arrays
        Bag indices each model trains on.
    seeds : sequence of int
        One per model; the same seed as ``PrototypeMILClassifier(random_state=seed)``
        gives the same model.
    model_config, train_config :
        Shared by all models.
    standardization : {"feature", "instance", "none"}
        Fitted on each model's own training bags.
    lr_prototypes, lr_classifier : sequence of float, optional
        Per-model learning rates (a grid); default ``train_config``'s.
    eval_sets : sequence of int arrays, optional
        Bags to score for each model after training, and every ``eval_every``
        epochs if given (the published code's test-fold monitoring; use it only
        for clearly labelled reporting, never for selection).
    device : "auto", "cpu", "cuda" or torch.device
    dtype : torch dtype of the arithmetic (float32 default; float64 for exact checks)
    num_threads : int or None
        CPU threads for the duration of the call (restored afterwards). The
        default 1 is fastest here: each tick is many tiny operations, for which
        thread hand-offs cost more than they save. None leaves torch's setting.
    table_limit_bytes : int
        Keep a standardised copy of the pool per model when it fits in this many
        bytes (default 1 GiB; faster), else standardise gathered rows on the fly.

    Returns
    -------
    BatchedFit
    """
    model_config = model_config or PrototypeMILConfig()
    train_config = train_config or TrainConfig()
    M = len(train_sets)
    if M == 0:
        raise ValueError("train_sets is empty: nothing to train.")
    if len(seeds) != M:
        raise ValueError(f"Got {M} train sets but {len(seeds)} seeds.")
    y = np.asarray(y, dtype=np.int64)
    if len(y) != len(bags):
        raise ValueError(f"Found {len(bags)} bags but {len(y)} labels.")
    train_sets = [np.asarray(t, dtype=np.int64) for t in train_sets]
    for m, t in enumerate(train_sets):
        if len(t) == 0:
            raise ValueError(f"Training set of model {m} is empty.")
        if len(np.unique(y[t])) < 2:
            raise ValueError(f"Training set of model {m} holds a single class.")
    n_classes = int(n_classes or (y.max() + 1))
    dev = resolve_device(device)
    t_start = time.perf_counter()

    pool = BagPool(bags, dev)
    L = pool.n_features
    standardizers, modules = [], []
    for m in range(M):
        std = BagStandardizer(standardization).fit([bags[i] for i in train_sets[m]])
        standardizers.append(std)
        init_instances = None
        if model_config.init != "normal":
            init_instances = np.concatenate(std.transform([bags[i] for i in train_sets[m]]))
        gen = torch.Generator().manual_seed(int(seeds[m]))
        modules.append(PrototypeMIL(L, n_classes, model_config, generator=gen, init_instances=init_instances))

    if standardization == "instance":
        # Per-instance z-scoring needs no fitting: do it once on the pool.
        pool.instances = torch.as_tensor(
            np.concatenate([standardizers[0].transform_instances(b) for b in bags]), dtype=torch.float64, device=dev
        )
    means = torch.zeros(M, L, dtype=torch.float64, device=dev)
    scales = torch.ones(M, L, dtype=torch.float64, device=dev)
    if standardization == "feature":
        means = torch.as_tensor(np.stack([s.mean_ for s in standardizers]), device=dev)
        scales = torch.as_tensor(np.stack([s.scale_ for s in standardizers]), device=dev)

    P = torch.stack([mod.prototypes.detach() for mod in modules]).to(dev, dtype).requires_grad_(True)
    W = torch.stack([mod.weight.detach() for mod in modules]).to(dev, dtype).requires_grad_(True)
    b = None
    if model_config.bias:
        b = torch.stack([mod.bias.detach() for mod in modules]).to(dev, dtype).requires_grad_(True)
    params = [P, W] + ([b] if b is not None else [])
    stack = _Stack(P, W, b, model_config, pool, means, scales, dtype, table_limit_bytes)

    lr_p = torch.as_tensor(
        lr_prototypes if lr_prototypes is not None else [train_config.lr_prototypes] * M, dtype=dtype, device=dev
    )
    lr_w = torch.as_tensor(
        lr_classifier if lr_classifier is not None else [train_config.lr_classifier] * M, dtype=dtype, device=dev
    )
    if lr_p.shape != (M,) or lr_w.shape != (M,):
        raise ValueError("lr_prototypes and lr_classifier need one value per model.")
    lrs = [lr_p, lr_w] + ([lr_w] if b is not None else [])
    exp_avg = [torch.zeros_like(p) for p in params]
    exp_avg_sq = [torch.zeros_like(p) for p in params]
    scratch = [(torch.empty_like(p), torch.empty_like(p)) for p in params]
    accumulated = [torch.zeros_like(p) for p in params] if train_config.accumulate_gradients else None
    step = torch.zeros(M, dtype=torch.long, device=dev)
    rngs = [np.random.default_rng(int(s)) for s in seeds]
    y_t = torch.as_tensor(y, device=dev)
    model_ids = np.arange(M)

    fit = BatchedFit(P, W, b, model_config, standardizers, n_classes, history=[[] for _ in range(M)])

    def evaluate(epoch: int) -> None:
        sm = np.concatenate([np.full(len(e), m) for m, e in enumerate(eval_sets)])
        sb = np.concatenate([np.asarray(e, dtype=np.int64) for e in eval_sets])
        proba = stack.predict_proba(sm, sb)
        fit.evaluations[epoch] = np.split(proba, np.cumsum([len(e) for e in eval_sets])[:-1])

    for epoch in _progress(range(int(train_config.epochs)), progress, f"epochs ({M} models)"):
        t0 = time.perf_counter()
        factor = train_config.lr_factor(epoch)
        schedule = [epoch_batches(len(train_sets[m]), train_config, rngs[m]) for m in range(M)]
        n_ticks = max(len(s) for s in schedule)
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
                sums += terms.detach().double()
                n_steps += active.double()
        means_ep = (sums / n_steps.clamp_min(1)).cpu().numpy()
        seconds = time.perf_counter() - t0
        for m in range(M):
            row = {"epoch": epoch + 1, **{k: float(means_ep[j, m]) for j, k in enumerate(LOSS_TERMS)}}
            row["total"] = float(means_ep[:, m].sum())
            row["seconds"] = seconds / M
            fit.history[m].append(row)
        if eval_sets is not None and eval_every and (epoch + 1) % int(eval_every) == 0:
            evaluate(epoch + 1)
        if on_epoch_end is not None:
            on_epoch_end(epoch + 1, fit)

    if eval_sets is not None and int(train_config.epochs) not in fit.evaluations:
        evaluate(int(train_config.epochs))
    for p in params:
        p.requires_grad_(False)
    fit.seconds = time.perf_counter() - t_start
    fit.predict_proba = stack.predict_proba  # type: ignore[attr-defined]
    return fit
