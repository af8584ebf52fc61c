"""Training on large bag collections: streamed from disk, in bounded memory, on one or many processes.

Whole-slide collections hold hundreds of bags of thousands of 512- to 1,024-wide
instances: too many to keep in memory, and each bag's instance-to-prototype
distances are the whole cost. :func:`train_streaming` trains one model with the
semantics of the reference trainer (:func:`~minitorch_proto.training.sequential.train_model`)
while reading each bag only when its minibatch comes up, ``chunk_size``
instances at a time, so peak memory is set by ``chunk_size`` and not by the
largest bag.

Run under ``torchrun`` (or any initialised ``torch.distributed`` process group) it
is data-parallel. The global minibatch semantics, exactly:

* every rank draws the same epoch schedule from the same seed
  (:func:`~minitorch_proto.training.config.epoch_batches`): global minibatches of
  ``batch_size`` bags;
* rank ``r`` of ``W`` takes the bags at positions ``r, r + W, ...`` of each global
  minibatch;
* the loss of a step is the sequential trainer's, Eq. 1 on the global minibatch:
  the mean over its ``B`` bags of cross-entropy + distance penalty, plus the two
  parameter penalties once. Each rank back-propagates its own bags' share
  (sum over its bags / ``B``; rank 0 adds the parameter penalties), and one
  all-reduce (sum) of the flattened prototype and classifier gradients gives every
  rank the gradient of the global loss;
* every rank then takes the same Adam step, so the parameters stay identical
  without being broadcast.

An all-reduce of the gradients is used rather than ``DistributedDataParallel``
because DDP averages over ranks, which is the global mean only when every rank
holds the same number of bags, and the last minibatch of an epoch may not split
evenly. Feature standardisation is fitted in one streaming pass over the
training bags, each rank reading its own shard, and the partial statistics are
merged (:meth:`~minitorch_proto.preprocessing.BagStandardizer.merge`).
"""
from __future__ import annotations

import os
import time
import zlib
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch
import torch.distributed as dist

from ..bags import bag_groups
from ..distances import pairwise_distance
from ..model import (
    LOSS_TERMS,
    PrototypeMIL,
    PrototypeMILConfig,
    cross_entropy,
    head_logits,
    normalize_features,
    penalty_terms,
    pooled_from_distances,
    project_monotone_,
)
from ..preprocessing import BagStandardizer
from ..utils import progress_bar, resolve_device
from ..validation import check_codes
from .config import TrainConfig, epoch_batches

__all__ = [
    "StreamingFit",
    "train_streaming",
    "chunked_pool",
    "fit_standardizer_streaming",
    "StreamedInstances",
    "init_distributed",
    "process_device",
    "agree_across_ranks",
    "AUTOCAST_DTYPES",
]

AUTOCAST_DTYPES = {None: None, "none": None, "bf16": torch.bfloat16, "bfloat16": torch.bfloat16}


# --------------------------------------------------------------------- data access
def _n_features(bags) -> int:
    """Features per instance of a collection: a lazy one's header, else the first bag's columns."""
    return int(getattr(bags, "n_features", 0) or np.atleast_2d(np.asarray(bags[0])).shape[1])


def _bag_sizes(bags) -> np.ndarray:
    if hasattr(bags, "sizes"):
        return np.asarray(bags.sizes, dtype=np.int64)
    return np.array([np.atleast_2d(np.asarray(b)).shape[0] for b in bags], dtype=np.int64)


def _rows(bags, i: int, start: int, stop: int) -> np.ndarray:
    """Instances ``start:stop`` of bag ``i``: read from disk for a lazy dataset, sliced otherwise."""
    if hasattr(bags, "rows"):
        return bags.rows(i, start, stop)
    return np.atleast_2d(np.asarray(bags[i]))[start:stop]


def _chunks(bags, i: int, n: int, chunk_size: int):
    for start in range(0, n, chunk_size):
        yield start, _rows(bags, i, start, min(start + chunk_size, n))


class StreamedInstances:
    """The standardised instances of a bag collection, read from the bags when asked for.

    The streaming twin of :class:`~minitorch_proto.bags.StackedInstances` (same members:
    ``sizes``, ``len()``, ``source[idx]``, ``pieces()``, ``groups()``, ``nearest_across()``,
    ``gather()``): a data-driven start (:func:`~minitorch_proto.model.init_prototypes`) reads only
    the rows it draws, and the push and the convex head
    (:func:`~minitorch_proto.convex_head.refit_members`) read the bags ``chunk_size`` instances
    (``pieces``) or about ``chunk_size`` instances of whole bags (``groups``) at a time, so memory
    is bounded by ``chunk_size`` and the largest bag.

    Inside a process group each process reads its share of the bags (``r, r + W, ...``) in
    ``pieces`` and ``groups``, and ``nearest_across`` and ``gather`` combine the shares, so every
    process ends with what one process reading every bag would have; ``source[idx]`` reads the
    same rows in every process.

    Parameters
    ----------
    bags : sequence of arrays, or a lazy dataset with ``rows(i, start, stop)`` and ``sizes``
    standardizer : a fitted :class:`~minitorch_proto.preprocessing.BagStandardizer`
    chunk_size : int
    group : process group, optional (default: the global group when one is initialised)
    """

    def __init__(self, bags, standardizer: BagStandardizer, chunk_size: int = 65_536, group=None) -> None:
        self.bags, self.standardizer, self.chunk_size, self.group = bags, standardizer, int(chunk_size), group
        self.sizes = _bag_sizes(bags)
        self._ends = np.cumsum(self.sizes)
        rank, world = _rank_world(group)
        self._world = world
        self._mine = np.arange(rank, len(self.sizes), world)

    def __len__(self) -> int:
        return int(self._ends[-1]) if len(self._ends) else 0

    def __getitem__(self, idx) -> np.ndarray:
        idx = np.asarray(idx, dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= len(self)):
            raise IndexError(f"instance index out of range for {len(self)} instances.")
        bag = np.searchsorted(self._ends, idx, side="right")
        local = idx - (self._ends[bag] - self.sizes[bag])
        out: np.ndarray | None = None
        for b in np.unique(bag):
            at = np.flatnonzero(bag == b)
            for start in range(int(local[at].min()), int(local[at].max()) + 1, self.chunk_size):
                inside = at[(local[at] >= start) & (local[at] < start + self.chunk_size)]
                if not inside.size:  # rows far apart: only the chunks holding a drawn row are read
                    continue
                stop = int(local[inside].max()) + 1
                rows = self.standardizer.transform_instances(_rows(self.bags, int(b), start, stop)[local[inside] - start])
                if out is None:
                    out = np.empty((len(idx), rows.shape[1]))
                out[inside] = rows
        return out if out is not None else np.empty((0, 0))

    def pieces(self):
        for b in self._mine:
            for start, raw in _chunks(self.bags, int(b), int(self.sizes[b]), self.chunk_size):
                yield int(b), start, self.standardizer.transform_instances(raw)

    def groups(self):
        for a, b in bag_groups(self.sizes[self._mine], self.chunk_size):
            ids = self._mine[a:b]
            raw = [_rows(self.bags, int(i), 0, int(self.sizes[i])) for i in ids]
            yield ids, self.standardizer.transform_stacked(raw), np.repeat(np.arange(len(ids)), self.sizes[ids])

    def nearest_across(self, pushed: np.ndarray, sources: np.ndarray, best: np.ndarray):
        """Each process's nearest instances (from its ``pieces``) combined: the nearest over every bag.

        Ties go to the smaller bag index, as one process scanning the bags in order keeps the first.
        """
        if self._world == 1:
            return pushed, sources
        parts: list = [None] * self._world
        dist.all_gather_object(parts, (pushed, sources, best), group=self.group)
        pushed, sources, best = (np.stack([p[k] for p in parts]) for k in range(3))  # (W, D, ...)
        cols = np.arange(best.shape[1])
        win = np.lexsort((sources[:, :, 0], best), axis=0)[0]  # smallest distance, then smallest bag
        return pushed[win, cols], sources[win, cols]

    def gather(self, ids: list[np.ndarray], rows: list[np.ndarray]) -> np.ndarray:
        """The rows of every bag, in bag order, from each process's ``groups`` (``ids`` and their ``rows``)."""
        parts: list = [(ids, rows)]
        if self._world > 1:  # a process with no bag (more processes than bags) sends empty lists
            parts = [None] * self._world
            dist.all_gather_object(parts, (ids, rows), group=self.group)
        ids = np.concatenate([i for p in parts for i in p[0]])
        rows = np.concatenate([r for p in parts for r in p[1]])
        out = np.empty_like(rows)
        out[ids] = rows
        return out


def fit_standardizer_streaming(
    bags, train: np.ndarray, mode: str, chunk_size: int = 65_536, group=None
) -> BagStandardizer:
    """Standardisation statistics of the training bags in one streaming pass.

    Under a process group each rank reads the bags ``train[rank::world]`` and the
    partial statistics are merged in rank order, so every rank ends with the same
    standardiser.
    """
    std = BagStandardizer(mode)
    if mode != "feature":
        return std
    rank, world = _rank_world(group)
    sizes = _bag_sizes(bags)
    for i in np.asarray(train)[rank::world]:
        for _, rows in _chunks(bags, int(i), int(sizes[i]), chunk_size):
            std.partial_fit(rows)
    if world > 1:
        parts: list = [None] * world
        dist.all_gather_object(parts, std.get_partial_state(), group=group)
        std = BagStandardizer(mode)
        for part in parts:
            std.merge(BagStandardizer.from_partial_state(part))
    return std


# --------------------------------------------------------------- chunked pooling
class _ChunkedPool(torch.autograd.Function):
    """Min, max and mean over one bag's instances of the distance to each prototype.

    Forward reads the bag ``chunk_size`` rows at a time and keeps, per prototype,
    the running min and max and the instance attaining each, plus the running sum:
    memory is O(chunk_size x (L + D) + D x L), whatever the bag's size. Backward
    needs no stored distances: the min and max depend on one instance each (kept
    from the forward pass), and the mean, when it is pooled, is recomputed chunk
    by chunk. Tied instances get the gradient of one of them, which equals
    autograd's even split whenever the tied instances are identical.
    """

    @staticmethod
    def forward(ctx, P, read, n, chunk_size, metric, autocast_dtype, need_mean):
        D = P.shape[0]
        lo = torch.full((D,), float("inf"), dtype=P.dtype, device=P.device)
        hi = torch.full((D,), float("-inf"), dtype=P.dtype, device=P.device)
        total = torch.zeros(D, dtype=P.dtype, device=P.device)
        lo_rows = P.new_zeros(P.shape)
        hi_rows = P.new_zeros(P.shape)
        for start in range(0, n, chunk_size):
            X = read(start, min(start + chunk_size, n))
            d = _distances(X, P, metric, autocast_dtype)
            v, a = d.min(0)
            better = v < lo
            lo = torch.where(better, v, lo)
            lo_rows = torch.where(better.unsqueeze(1), X[a], lo_rows)
            v, a = d.max(0)
            better = v > hi
            hi = torch.where(better, v, hi)
            hi_rows = torch.where(better.unsqueeze(1), X[a], hi_rows)
            total += d.sum(0)
        ctx.save_for_backward(P, lo_rows, hi_rows)
        ctx.read, ctx.n, ctx.chunk_size, ctx.metric, ctx.need_mean = read, n, chunk_size, metric, need_mean
        return torch.stack([lo, hi, total / n])

    @staticmethod
    def backward(ctx, grad):
        P, lo_rows, hi_rows = ctx.saved_tensors
        with torch.enable_grad():
            Pg = P.detach().requires_grad_(True)
            # Prototype d against its own nearest (farthest) instance: the diagonal.
            d_lo = torch.diagonal(pairwise_distance(lo_rows, Pg, ctx.metric))
            d_hi = torch.diagonal(pairwise_distance(hi_rows, Pg, ctx.metric))
            out = (d_lo * grad[0]).sum() + (d_hi * grad[1]).sum()
            (gP,) = torch.autograd.grad(out, Pg)
            if ctx.need_mean:
                g_mean = grad[2] / ctx.n
                for start in range(0, ctx.n, ctx.chunk_size):
                    X = ctx.read(start, min(start + ctx.chunk_size, ctx.n))
                    d = pairwise_distance(X, Pg, ctx.metric)
                    (g,) = torch.autograd.grad((d.sum(0) * g_mean).sum(), Pg)
                    gP = gP + g
        return gP, None, None, None, None, None, None


def _distances(X, P, metric, autocast_dtype):
    if autocast_dtype is None:
        return pairwise_distance(X, P, metric)
    # Only the matrix products run in reduced precision (autocast's op lists); the
    # norms, the subtraction and the square root stay in P's dtype.
    with torch.autocast(X.device.type, dtype=autocast_dtype):
        return pairwise_distance(X, P, metric).to(P.dtype)


def chunked_pool(
    P: torch.Tensor,
    read,
    n: int,
    config: PrototypeMILConfig,
    chunk_size: int = 65_536,
    autocast_dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pooled features (1, F) and penalised distances (1, D') of one bag, differentiable in ``P``.

    ``read(start, stop)`` returns the bag's standardised instances ``start:stop`` as a
    tensor of ``P``'s dtype and device; ``n`` is the bag's size.
    """
    need_mean = "mean" in config.pooling
    s = _ChunkedPool.apply(P, read, int(n), int(chunk_size), config.distance, autocast_dtype, need_mean)
    pooled = {"min": s[0:1], "max": s[1:2], "mean": s[2:3]}
    return pooled_from_distances(None, lambda _d, how: pooled[how], config)


# ------------------------------------------------------------------ process group
def _rank_world(group=None) -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(group), dist.get_world_size(group)
    return 0, 1


def agree_across_ranks(seed: int, bags, y, group=None) -> int:
    """Rank 0's seed, after checking that every process holds the same collection; ``seed`` alone otherwise.

    Nothing is broadcast during training: every process draws the start, the k-means++ sample and
    the epoch schedule from one seed over one collection and reads its share of each minibatch. So
    a seed drawn per process (``random_state=None``) is replaced by rank 0's, and a process holding
    other bags (e.g. its own shard, the DistributedSampler habit) stops every process with one
    error instead of training on a part of the data.

    Raises
    ------
    ValueError
        If the processes' bag counts, feature counts, bag sizes or labels differ.
    """
    _, world = _rank_world(group)
    if world == 1:
        return int(seed)
    sizes = np.asarray(_bag_sizes(bags), dtype=np.int64)
    mine = (int(seed), len(sizes), _n_features(bags), zlib.crc32(sizes.tobytes()),
            zlib.crc32(np.asarray(y, dtype=np.int64).tobytes()))
    every: list = [None] * world
    dist.all_gather_object(every, mine, group=group)
    first = every[0]
    for r, theirs in enumerate(every):
        if theirs[1:] != first[1:]:
            other = " (with other bag sizes or labels)" if theirs[1:3] == first[1:3] else ""
            raise ValueError(f"process {r} holds {theirs[1]} bags of {theirs[2]} features and process 0 {first[1]} "
                             f"of {first[2]}{other}: under torchrun every process passes the whole collection, in "
                             "one order, and takes its share of each minibatch itself.")
    return int(first[0])


def process_device(device: str | torch.device = "auto") -> torch.device:
    """The device of this torchrun process: its own GPU (``LOCAL_RANK``) or the CPU.

    ``"auto"`` takes the GPUs only when there is one for every process on the machine
    (``LOCAL_WORLD_SIZE``), else every process trains on the CPU: all must agree on one backend,
    and with more processes than GPUs the extra ones would find no device of their own.

    Raises
    ------
    ValueError
        If ``"cuda"`` is asked for and the machine has fewer GPUs than processes.
    """
    local_rank, local_world = int(os.environ.get("LOCAL_RANK", "0")), int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    dev = torch.device(device) if device != "auto" else torch.device("cuda" if gpus >= local_world else "cpu")
    if dev.type != "cuda":
        return dev
    if gpus < local_world:
        raise ValueError(f"--device cuda with {local_world} processes on this machine needs {local_world} GPUs; it has "
                         f"{gpus}: start as many processes as GPUs (--nproc_per_node {gpus}) or use --device cpu.")
    return torch.device("cuda", local_rank)


def init_distributed(device: str | torch.device = "cpu") -> tuple[int, int]:
    """Join the process group torchrun describes in the environment; return (rank, world size).

    Without ``WORLD_SIZE`` in the environment (a plain single-process run) nothing is
    initialised and (0, 1) is returned. The backend is gloo on the CPU, NCCL on CUDA, the
    device :func:`process_device`'s.
    """
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return 0, 1
    if not dist.is_initialized():
        dev = process_device(device)
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    return dist.get_rank(), dist.get_world_size()


# ------------------------------------------------------------------------ trainer
@dataclass
class StreamingFit:
    """What :func:`train_streaming` returns (identical on every rank).

    Attributes
    ----------
    model : PrototypeMIL, the trained model on the CPU, in the training dtype
    standardizer : BagStandardizer, fitted on the training bags
    history : list of dict, per epoch: the mean of each loss term over the steps,
        ``seconds`` and ``instances`` (instances this rank read in the epoch)
    world_size : int
    seconds : float, wall time including the standardisation pass
    """

    model: PrototypeMIL
    standardizer: BagStandardizer
    history: list[dict] = field(default_factory=list)
    world_size: int = 1
    seconds: float = 0.0


def train_streaming(
    bags: Sequence,
    y: np.ndarray,
    model_config: PrototypeMILConfig | None = None,
    train_config: TrainConfig | None = None,
    *,
    seed: int = 0,
    n_classes: int | None = None,
    standardization: str = "feature",
    standardizer: BagStandardizer | None = None,
    chunk_size: int = 65_536,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    autocast: str | None = None,
    group=None,
    progress: bool = False,
) -> StreamingFit:
    """Train one model reading bags lazily, on this process or data-parallel across a process group.

    Parameters
    ----------
    bags : sequence of arrays, or a lazy dataset with ``rows(i, start, stop)`` and ``sizes``
        (:class:`~minitorch_proto.data.disk.DiskBagDataset`). Raw, unstandardised features.
    y : ndarray of int, shape (n_bags,)
        Encoded labels 0..C-1.
    model_config, train_config :
        The model and its optimisation; ``batch_size`` is the *global* minibatch.
        A data-driven start (``init="instances"`` or ``"kmeans++"``) reads only the training
        instances it draws (:class:`StreamedInstances`), the same draw as the in-memory trainers';
        every rank reads the same rows, so all start alike.
    seed : int
        Seeds the initial parameters and the bag order, as ``PrototypeMILClassifier(random_state=seed)``.
    standardization : {"feature", "instance", "none"}
        Fitted on ``bags`` in one streaming pass unless ``standardizer`` is given.
    chunk_size : int
        Instances read and compared with the prototypes at a time: peak memory is
        about ``chunk_size x (n_features + n_prototypes)`` numbers per process, whatever the bag sizes.
    dtype : torch.float32 or torch.float64
    device : str
    autocast : {None, "bf16"}
        Run the distance matrix products under bf16 autocast (CPU or CUDA).
    group : process group, optional
        Default: the global group when ``torch.distributed`` is initialised, else single-process.
    progress : bool
        A progress bar over epochs on rank 0.

    Returns
    -------
    StreamingFit
    """
    model_config = model_config or PrototypeMILConfig()
    train_config = train_config or TrainConfig()
    if autocast not in AUTOCAST_DTYPES:
        raise ValueError(f"autocast must be None or 'bf16', got {autocast!r}.")
    if int(chunk_size) < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}.")
    autocast_dtype = AUTOCAST_DTYPES[autocast]
    y, n_classes = check_codes(y, n_classes)
    if len(y) != len(bags):
        raise ValueError(f"Found {len(bags)} bags but {len(y)} labels.")
    if len(np.unique(y)) < 2:
        raise ValueError("The training bags hold a single class.")
    sizes = _bag_sizes(bags)
    if (sizes == 0).any():
        raise ValueError(f"Bag {int(np.flatnonzero(sizes == 0)[0])} is empty: every bag needs at least one instance.")
    n_features = _n_features(bags)
    dev = resolve_device(device)
    rank, world = _rank_world(group)
    seed = agree_across_ranks(seed, bags, y, group)
    chunk_size = int(chunk_size)
    t_start = time.perf_counter()

    if standardizer is None:
        standardizer = fit_standardizer_streaming(bags, np.arange(len(bags)), standardization, chunk_size, group)
    mean = scale = None
    if standardizer.mode == "feature":
        mean = torch.as_tensor(standardizer.mean_, dtype=dtype, device=dev)
        scale = torch.as_tensor(standardizer.scale_, dtype=dtype, device=dev)
    # Centred in float32, a feature far from zero against its spread loses its digits first (1e6 + N(0, 1):
    # rows off by 0.04 SD, prototypes by 3e-2 against fit's). Such data are centred in float64, as fit does;
    # the rest keep the cheaper path on the training device (its rounding: about 1e-7 against fit).
    exact = dtype != torch.float64 and standardizer.mode == "feature" and bool(
        np.max(np.abs(standardizer.mean_) / standardizer.scale_, initial=0.0) > 1e2)

    def reader(i: int):
        def read(start: int, stop: int) -> torch.Tensor:
            raw = _rows(bags, i, start, stop)
            if standardizer.mode == "instance" or exact:
                return torch.as_tensor(standardizer.transform_instances(raw), dtype=dtype, device=dev)
            want = np.float32 if dtype == torch.float32 else np.float64
            # A read-only memory map (torch.as_tensor warns about those) or another dtype needs a copy;
            # rows a folder read are already this process's own, and a copy per bag is not free.
            arr = raw if raw.dtype == want and raw.flags.writeable else np.array(raw, dtype=want)
            X = torch.as_tensor(arr, device=dev)
            # The in-place divide works on the subtraction's new tensor, never on the caller's rows.
            return X if mean is None else (X - mean).div_(scale)

        return read

    gen = torch.Generator().manual_seed(int(seed))
    init = None if model_config.init == "normal" else StreamedInstances(bags, standardizer, chunk_size)
    model = PrototypeMIL(n_features, n_classes, model_config, generator=gen, init_instances=init).to(dev, dtype)
    params = [model.prototypes, model.weight] + ([model.bias] if model.bias is not None else [])
    optimizer = torch.optim.Adam(
        [{"params": [model.prototypes], "lr": train_config.lr_prototypes},
         {"params": params[1:], "lr": train_config.lr_classifier}],
        betas=train_config.betas, eps=train_config.eps, foreach=False,
    )
    base_lrs = [g["lr"] for g in optimizer.param_groups]
    accumulated = [torch.zeros_like(p) for p in params] if train_config.accumulate_gradients else None
    y_t = torch.as_tensor(y, device=dev)
    rng = np.random.default_rng(int(seed))
    history: list[dict] = []
    for epoch in progress_bar(range(int(train_config.epochs)), progress and rank == 0, "epochs"):
        t0 = time.perf_counter()
        for g, lr in zip(optimizer.param_groups, base_lrs):
            g["lr"] = lr * train_config.lr_factor(epoch)
        sums = torch.zeros(len(LOSS_TERMS), dtype=torch.float64)
        instances = 0
        batches = epoch_batches(len(bags), train_config, rng)
        for idx in batches:
            mine = idx[rank::world]
            B = len(idx)
            data_terms = torch.zeros(2, dtype=dtype, device=dev)  # cross-entropy and distance penalty, summed
            loss = torch.zeros((), dtype=dtype, device=dev)
            if len(mine):
                pooled = [chunked_pool(model.prototypes, reader(int(i)), int(sizes[i]), model_config, chunk_size,
                                       autocast_dtype) for i in mine]
                phi = torch.cat([p[0] for p in pooled])
                pen = torch.cat([p[1] for p in pooled])
                logits = head_logits(normalize_features(phi, model_config), model.weight, model.bias)
                ce = cross_entropy(logits, y_t[mine]).sum()
                dp = model_config.lambda_d * pen.sum()
                loss = loss + (ce + dp) / B
                data_terms = torch.stack([ce, dp]).detach()
                instances += int(sizes[mine].sum())
            pens = penalty_terms(model.weight, model.prototypes, model_config)
            if rank == 0:
                loss = loss + pens["weight_penalty"] + pens["prototype_penalty"]
            if loss.requires_grad:
                grads = torch.autograd.grad(loss, params, allow_unused=True, materialize_grads=True)
            else:  # a rank with no bag in this minibatch (and not rank 0) adds nothing
                grads = [torch.zeros_like(p) for p in params]
            flat = torch.cat([g.reshape(-1) for g in grads] + [data_terms])
            if world > 1:
                dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=group)
            grads = _unflatten(flat[:-2], params)
            with torch.no_grad():
                for i, (p, g) in enumerate(zip(params, grads)):
                    if accumulated is not None:
                        accumulated[i] += g
                        g = accumulated[i]
                    p.grad = g.clone()
            optimizer.step()
            if model_config.monotone:  # every rank projects the same step: parameters stay equal
                project_monotone_(model.weight)
            ce_sum, dp_sum = (float(v) for v in flat[-2:])
            sums += torch.tensor([ce_sum / B, float(pens["weight_penalty"].detach()),
                                  float(pens["prototype_penalty"].detach()), dp_sum / B], dtype=torch.float64)
        means = sums / len(batches)
        row = {"epoch": epoch + 1, **{k: float(v) for k, v in zip(LOSS_TERMS, means)}}
        row["total"] = float(means.sum())
        row["seconds"] = time.perf_counter() - t0
        row["instances"] = instances
        history.append(row)
    model = model.to("cpu").eval()  # kept in the training dtype, so float64 fits can be compared exactly
    for p in model.parameters():
        p.requires_grad_(False)
    return StreamingFit(model, standardizer, history, world, time.perf_counter() - t_start)


def _unflatten(flat: torch.Tensor, like: list[torch.Tensor]) -> list[torch.Tensor]:
    out, start = [], 0
    for p in like:
        out.append(flat[start : start + p.numel()].view_as(p))
        start += p.numel()
    return out


def model_parameters(fit: StreamingFit, dtype: torch.dtype = torch.float64) -> dict[str, np.ndarray]:
    """The trained parameters as arrays (for comparing fits)."""
    return {k: v.detach().to(dtype).numpy() for k, v in fit.model.state_dict().items()}
