"""What every batched engine starts from and returns.

:class:`BagPool` (all bags in one flat array), :func:`size_groups` (cutting a tick's
bags into a few similar-size groups), :class:`Setup` (arguments, initial models and
standardisation, built once by :func:`~minitorch_proto.training.batched.train_batched`)
and :class:`BatchedFit` (the trained models).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import numpy as np
import torch

from ..model import LOSS_TERMS, PrototypeMIL, PrototypeMILConfig
from ..preprocessing import BagStandardizer
from .config import TrainConfig

__all__ = ["BagPool", "BatchedFit", "ResumeState", "Setup", "numpy_dtype", "size_groups"]


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
        self.instances = torch.as_tensor(np.concatenate(bags, axis=0, dtype=np.float64), device=device)
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
    #: Compiled engine only: everything needed to continue training (``train_batched(resume=...)``).
    state: "ResumeState | None" = None

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


@dataclass
class ResumeState:
    """Where the compiled engine stopped: parameters, Adam moments and step counts
    (``engine``, a :class:`~minitorch_proto.training.compiled.EpochState`), each model's bag-order
    generator, and what the models were trained with (checked when training goes on)."""

    engine: object
    rngs: list[np.random.Generator]
    epochs: int
    train_sets: list[np.ndarray]
    seeds: list[int]
    lr_prototypes: np.ndarray
    lr_classifier: np.ndarray
    model_config: PrototypeMILConfig
    train_config: TrainConfig
    standardization: str
    dtype: torch.dtype


@dataclass
class Setup:
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
    autocast: torch.dtype | None = None  # reduced-precision distance products (tensor engine only)
    resume: Sequence[tuple[BatchedFit, int]] | None = None  # (earlier fit, its model index) per model

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

    def finish(self, fit: BatchedFit, stack, predict_proba: Callable) -> BatchedFit:
        if self.eval_sets is not None and int(self.train_config.epochs) not in fit.evaluations:
            self.evaluate(fit, predict_proba, int(self.train_config.epochs))
        fit.predict_proba = stack.predict_proba  # type: ignore[attr-defined]
        return fit


def numpy_dtype(dtype: torch.dtype):
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}.")
    return np.float32 if dtype == torch.float32 else np.float64
