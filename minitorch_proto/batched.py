"""Train many independent prototype MIL models at once.

The paper's protocol (batch size 1, 100 epochs, 5 x 10-fold CV on five data sets)
is 250 small models; trained one after another, almost all of the time goes to
per-step framework overhead, not arithmetic. :func:`train_batched` fits M models
in one call, with two backends that give the same models:

``"compiled"`` (the default on the CPU)
    Each model's epoch is one compiled loop (:mod:`minitorch_proto.compiled`):
    forward, hand-written gradients and Adam with no per-step overhead; the
    models run in parallel over the cores. No padding: each step touches only
    its own bag's instances.
``"tensor"`` (CUDA, or where numba is missing)
    The M models advance together: at every tick each model takes one step on
    its own next minibatch through batched torch operations, so the framework
    overhead is paid once per tick instead of once per model. Bags of very
    different sizes (Musk2: 1 to 1,044 instances) are not all padded to the
    largest: the tick's bags are sorted by size and cut into at most three
    groups, each one batched matrix product.

Either way each model keeps exactly the semantics of ``trainer.train_model``: its
own training bags in its own order (from its own seed), its own initialisation,
its own Adam state and learning rates, its own feature standardisation.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import numpy as np
import torch

from . import compiled
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
        # The trained values replace the initialisation, and data-driven inits would
        # need the training instances: build with "normal", then restore the config.
        mod = PrototypeMIL(self.prototypes.shape[2], self.n_classes, replace(self.config, init="normal"))
        mod.config = self.config
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
        # None means "the backend's best": one torch thread for the tensor backend;
        # the compiled backend sets its own (numba) threads.
        n = kwargs.get("num_threads") or 1
        previous = torch.get_num_threads()
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
    num_threads: int | None = None,
    table_limit_bytes: int = 1 << 30,
    on_epoch_end: Callable[[int, "BatchedFit"], None] | None = None,
    backend: str = "auto",
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
        CPU threads for the duration of the call. None (default): every core for
        the compiled backend, which runs models in parallel; one for the tensor
        backend, whose ticks are many tiny operations for which thread hand-offs
        cost more than they save.
    table_limit_bytes : int
        Tensor backend: keep a standardised copy of the pool per model when it fits
        in this many bytes (default 1 GiB; faster), else standardise gathered rows
        on the fly.
    on_epoch_end : callable(epoch, fit), optional
        Called with epoch 0 before training (the initial parameters) and after
        every epoch; ``fit`` holds the current parameters.
    backend : {"auto", "compiled", "tensor"}
        ``"compiled"``: each model's steps run in one compiled loop
        (:mod:`minitorch_proto.compiled`, numba; CPU only), models in parallel over
        the cores. ``"tensor"``: the M models advance together as batched torch
        operations, one tick per step (CPU or CUDA). ``"auto"``: compiled on the
        CPU when numba is installed, tensor otherwise. Both give the sequential
        trainer's result.

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
    if backend not in ("auto", "compiled", "tensor"):
        raise ValueError(f"backend must be 'auto', 'compiled' or 'tensor', got {backend!r}.")
    if backend == "compiled" and (dev.type != "cpu" or not compiled.AVAILABLE):
        raise ValueError("backend='compiled' needs device='cpu' and numba installed; use backend='tensor'.")
    if backend == "compiled" or (backend == "auto" and dev.type == "cpu" and compiled.AVAILABLE):
        run = _fit_compiled
    else:
        run = _fit_tensor
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

    setup = _Setup(bags, y, train_sets, seeds, model_config, train_config, n_classes, standardization,
                   lr_prototypes, lr_classifier, eval_sets, eval_every, dev, dtype, progress, num_threads,
                   table_limit_bytes, on_epoch_end, pool, modules, means, scales, standardizers)
    fit = run(setup)
    fit.seconds = time.perf_counter() - t_start
    return fit


@dataclass
class _Setup:
    """What both backends start from (arguments, initial models, standardisation)."""

    bags: Sequence[np.ndarray]
    y: np.ndarray
    train_sets: list[np.ndarray]
    seeds: Sequence[int]
    model_config: PrototypeMILConfig
    train_config: TrainConfig
    n_classes: int
    standardization: str
    lr_prototypes: Sequence[float] | None
    lr_classifier: Sequence[float] | None
    eval_sets: Sequence[np.ndarray] | None
    eval_every: int | None
    dev: torch.device
    dtype: torch.dtype
    progress: bool
    num_threads: int | None
    table_limit_bytes: int
    on_epoch_end: Callable | None
    pool: BagPool
    modules: list[PrototypeMIL]
    means: torch.Tensor
    scales: torch.Tensor
    standardizers: list[BagStandardizer]

    @property
    def n_models(self) -> int:
        return len(self.train_sets)

    def learning_rates(self) -> tuple[np.ndarray, np.ndarray]:
        M, tc = self.n_models, self.train_config
        lr_p = np.asarray(self.lr_prototypes if self.lr_prototypes is not None else [tc.lr_prototypes] * M, float)
        lr_w = np.asarray(self.lr_classifier if self.lr_classifier is not None else [tc.lr_classifier] * M, float)
        if lr_p.shape != (M,) or lr_w.shape != (M,):
            raise ValueError("lr_prototypes and lr_classifier need one value per model.")
        return lr_p, lr_w

    def evaluate(self, fit: BatchedFit, predict_proba: Callable, epoch: int) -> None:
        sets = self.eval_sets
        sm = np.concatenate([np.full(len(e), m) for m, e in enumerate(sets)])
        sb = np.concatenate([np.asarray(e, dtype=np.int64) for e in sets])
        proba = predict_proba(sm, sb)
        fit.evaluations[epoch] = np.split(proba, np.cumsum([len(e) for e in sets])[:-1])

    def start(self, fit: BatchedFit) -> None:
        if self.on_epoch_end is not None:
            self.on_epoch_end(0, fit)

    def end_of_epoch(self, fit: BatchedFit, predict_proba: Callable, epoch: int, means_ep: np.ndarray,
                     seconds: float) -> None:
        """Record the epoch's mean loss terms (shape (4, M)), evaluate if due, call the hook."""
        M = self.n_models
        for m in range(M):
            row = {"epoch": epoch + 1, **{k: float(means_ep[j, m]) for j, k in enumerate(LOSS_TERMS)}}
            row["total"] = float(means_ep[:, m].sum())
            row["seconds"] = seconds / M
            fit.history[m].append(row)
        if self.eval_sets is not None and self.eval_every and (epoch + 1) % int(self.eval_every) == 0:
            self.evaluate(fit, predict_proba, epoch + 1)
        if self.on_epoch_end is not None:
            self.on_epoch_end(epoch + 1, fit)

    def finish(self, fit: BatchedFit, stack: "_Stack", predict_proba: Callable) -> BatchedFit:
        if self.eval_sets is not None and int(self.train_config.epochs) not in fit.evaluations:
            self.evaluate(fit, predict_proba, int(self.train_config.epochs))
        fit.predict_proba = stack.predict_proba  # type: ignore[attr-defined]
        return fit


def _probabilities(logits: np.ndarray) -> np.ndarray:
    """Class probabilities from logits (S, O): a sigmoid for one column, a softmax otherwise."""
    if logits.shape[1] == 1:
        p1 = 1.0 / (1.0 + np.exp(-logits[:, 0]))
        return np.stack([1.0 - p1, p1], axis=1)
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _numpy_dtype(dtype: torch.dtype):
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}.")
    return np.float32 if dtype == torch.float32 else np.float64


def _fit_compiled(s: _Setup) -> BatchedFit:
    """Every model's epoch as one compiled loop (``minitorch_proto.compiled``), models in parallel."""
    with compiled.threads(s.num_threads):
        return _train_compiled(s)


def _train_compiled(s: _Setup) -> BatchedFit:
    M, mc, tc = s.n_models, s.model_config, s.train_config
    np_dtype = _numpy_dtype(s.dtype)
    # Each model's own standardised copy of the bags it trains and is evaluated on, made once
    # (the pool already holds per-instance z-scores when that is the standardisation).
    sizes, offsets = s.pool.sizes.astype(np.int64), s.pool.offsets
    raw = s.pool.instances.cpu().numpy()
    used = []
    for m in range(M):
        sets = [s.train_sets[m]] + ([np.asarray(s.eval_sets[m], dtype=np.int64)] if s.eval_sets is not None else [])
        used.append(np.unique(np.concatenate(sets)))
    n_rows = np.array([sizes[u].sum() for u in used])
    X = np.empty((int(n_rows.sum()), raw.shape[1]), dtype=np_dtype)
    start = np.full((M, len(s.bags)), -1, dtype=np.int64)
    means, scales = s.means.cpu().numpy(), s.scales.cpu().numpy()
    row = 0
    for m, bag_ids in enumerate(used):
        first = np.cumsum(sizes[bag_ids]) - sizes[bag_ids]
        start[m, bag_ids] = row + first
        rows = np.arange(n_rows[m]) + np.repeat(offsets[bag_ids] - first, sizes[bag_ids])
        X[row : row + n_rows[m]] = (raw[rows] - means[m]) / scales[m]
        row += n_rows[m]
    kmax = int(sizes[start.max(0) >= 0].max())

    def stacked(name):
        return np.ascontiguousarray(np.stack([getattr(mod, name).detach().numpy() for mod in s.modules]), np_dtype)

    state = compiled.EpochState(stacked("prototypes"), stacked("weight"), stacked("bias") if mc.bias else None,
                                tc.accumulate_gradients)
    P, W = torch.from_numpy(state.P), torch.from_numpy(state.W)  # views: they follow the kernel's updates
    b = torch.from_numpy(state.b) if mc.bias else None
    stack = _Stack(P, W, b, mc, s.pool, s.means, s.scales, s.dtype, table_limit_bytes=0)
    fit = BatchedFit(P, W, b, mc, s.standardizers, s.n_classes, history=[[] for _ in range(M)])
    lr_p, lr_w = s.learning_rates()
    rngs = [np.random.default_rng(int(seed)) for seed in s.seeds]
    y = np.asarray(s.y, dtype=np.int64)
    s.start(fit)

    def predict_proba(slot_model, slot_bag):
        logits = compiled.predict_logits(state, X, start, sizes, slot_model, slot_bag, mc, kmax)
        return _probabilities(logits)

    B = int(tc.batch_size)
    for epoch in _progress(range(int(tc.epochs)), s.progress, f"epochs ({M} models)"):
        t0 = time.perf_counter()
        schedule = [epoch_batches(len(s.train_sets[m]), tc, rngs[m]) for m in range(M)]
        n_batches = np.array([len(sch) for sch in schedule], dtype=np.int64)
        plan = np.full((M, int(n_batches.max()), B), -1, dtype=np.int64)
        for m, sch in enumerate(schedule):
            # every minibatch is full except perhaps the last
            order = s.train_sets[m][np.concatenate(sch)]
            full = (len(order) // B) * B
            plan[m, : full // B] = order[:full].reshape(-1, B)
            if full < len(order):
                plan[m, full // B, : len(order) - full] = order[full:]
        sums = compiled.train_epoch(state, X, start, sizes, y, plan, n_batches, lr_p, lr_w, tc.lr_factor(epoch),
                                    mc, tc, kmax)
        s.end_of_epoch(fit, predict_proba, epoch, (sums / n_batches[:, None]).T, time.perf_counter() - t0)
    return s.finish(fit, stack, predict_proba)


def _fit_tensor(s: _Setup) -> BatchedFit:
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
    for epoch in _progress(range(int(train_config.epochs)), s.progress, f"epochs ({M} models)"):
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
                sums += terms.detach().double()
                n_steps += active.double()
        means_ep = (sums / n_steps.clamp_min(1)).cpu().numpy()
        s.end_of_epoch(fit, stack.predict_proba, epoch, means_ep, time.perf_counter() - t0)
    for p in params:
        p.requires_grad_(False)
    return s.finish(fit, stack, stack.predict_proba)
