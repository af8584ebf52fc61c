"""Training one prototype MIL model, step by step, as the paper describes.

Adam with one learning rate for the prototypes and one for the classifier,
batch size 1, a fixed number of epochs. The published code's training-loop
deviations (bags drawn with replacement, the rate halved every 40 epochs,
gradients never zeroed) are switches of :class:`TrainConfig`.

This trainer is the reference semantics; ``minitorch_proto.batched`` trains many
such models at once and is tested to give the same result.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, fields, replace
from typing import Callable, Sequence

import numpy as np
import torch

from .bags import BagBatch
from .model import LOSS_TERMS, PrototypeMIL

__all__ = ["TrainConfig", "compat_train_config", "epoch_batches", "train_model", "resolve_device"]


@dataclass(frozen=True)
class TrainConfig:
    """How a model is optimised.

    Attributes
    ----------
    epochs : int
    lr_prototypes, lr_classifier : float
        Adam learning rates (alpha_p and alpha_w). Defaults: Musk1 in Table 1.
    batch_size : int
        Bags per step (1 in the paper).
    sampling : {"shuffle", "replacement"}
        Each epoch visits every training bag once in a new random order (paper),
        or draws as many bags with replacement (published code).
    lr_halving_every : int or None
        Halve both rates every this many epochs (published code: 40).
    accumulate_gradients : bool
        Never zero the gradients, so each step uses the sum of every gradient so
        far (published code; a bug there, kept to measure its effect).
    betas, eps : Adam constants (PyTorch defaults).
    """

    epochs: int = 100
    lr_prototypes: float = 9e-5
    lr_classifier: float = 3e-5
    batch_size: int = 1
    sampling: str = "shuffle"
    lr_halving_every: int | None = None
    accumulate_gradients: bool = False
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8

    def __post_init__(self) -> None:
        if int(self.epochs) < 1:
            raise ValueError(f"epochs must be >= 1, got {self.epochs}.")
        if int(self.batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}.")
        for name in ("lr_prototypes", "lr_classifier"):
            v = getattr(self, name)
            if not np.isfinite(v) or v <= 0:
                raise ValueError(f"{name} must be a positive number, got {v}.")
        if self.sampling not in ("shuffle", "replacement"):
            raise ValueError(f"sampling must be 'shuffle' or 'replacement', got {self.sampling!r}.")
        if self.lr_halving_every is not None and int(self.lr_halving_every) < 1:
            raise ValueError("lr_halving_every must be None or >= 1.")
        object.__setattr__(self, "betas", tuple(self.betas))

    def lr_factor(self, epoch: int) -> float:
        """Multiplier of both learning rates in ``epoch`` (0-based)."""
        if self.lr_halving_every is None:
            return 1.0
        return 0.5 ** (epoch // int(self.lr_halving_every))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["betas"] = list(self.betas)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


def compat_train_config(config: TrainConfig | None = None, **overrides) -> TrainConfig:
    """The published code's loop: sampling with replacement, rate halved every 40 epochs, no zero_grad."""
    base = config or TrainConfig()
    compat = dict(sampling="replacement", lr_halving_every=40, accumulate_gradients=True)
    compat.update(overrides)
    return replace(base, **compat)


def epoch_batches(n_bags: int, config: TrainConfig, rng: np.random.Generator) -> list[np.ndarray]:
    """The minibatches (arrays of bag positions) of one epoch.

    Shared by the sequential and the batched trainer so both see the same bags
    in the same order for the same seed.
    """
    if config.sampling == "shuffle":
        order = rng.permutation(n_bags)
    else:
        order = rng.integers(0, n_bags, size=n_bags)
    B = int(config.batch_size)
    return [order[i : i + B] for i in range(0, n_bags, B)]


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``"auto"``/None -> CUDA when available, else CPU."""
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device='cuda' was requested but CUDA is not available; use device='cpu' or 'auto'.")
    return dev


def _progress(iterable, enabled: bool, desc: str):
    if not enabled:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, leave=False)


def train_model(
    model: PrototypeMIL,
    bags: Sequence[torch.Tensor],
    y: torch.Tensor,
    config: TrainConfig,
    seed: int = 0,
    *,
    progress: bool = False,
    on_epoch_end: Callable[[int, PrototypeMIL], None] | None = None,
    num_threads: int | None = 1,
) -> list[dict]:
    """Fit ``model`` in place on pre-standardised bags.

    Parameters
    ----------
    model : PrototypeMIL
    bags : sequence of Tensor (n_instances_i, n_features), already on the model's device
    y : LongTensor of shape (n_bags,), encoded 0..C-1
    config : TrainConfig
    seed : int
        Seeds the bag order (``numpy.random.default_rng(seed)``).
    progress : bool
        Show a tqdm bar over epochs.
    on_epoch_end : callable(epoch, model), optional
    num_threads : int or None
        CPU threads while training (restored afterwards). One is fastest for
        batch-size-1 steps, which are many tiny operations; None keeps torch's setting.

    Returns
    -------
    list of dict
        One row per epoch: the mean of each loss term over the epoch's steps,
        the total, and the epoch's wall time.
    """
    previous = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(int(num_threads))
    try:
        return _train(model, bags, y, config, seed, progress, on_epoch_end)
    finally:
        torch.set_num_threads(previous)


def _train(model, bags, y, config, seed, progress, on_epoch_end) -> list[dict]:
    rng = np.random.default_rng(seed)
    optimizer = torch.optim.Adam(
        [
            {"params": [model.prototypes], "lr": config.lr_prototypes},
            {"params": [p for n, p in model.named_parameters() if n != "prototypes"], "lr": config.lr_classifier},
        ],
        betas=config.betas,
        eps=config.eps,
        foreach=False,
    )
    base_lrs = [g["lr"] for g in optimizer.param_groups]
    history: list[dict] = []
    model.train()
    optimizer.zero_grad(set_to_none=False)
    for epoch in _progress(range(int(config.epochs)), progress, "epochs"):
        t0 = time.perf_counter()
        factor = config.lr_factor(epoch)
        for group, lr in zip(optimizer.param_groups, base_lrs):
            group["lr"] = lr * factor
        sums = {k: 0.0 for k in (*LOSS_TERMS, "total")}
        batches = epoch_batches(len(bags), config, rng)
        for idx in batches:
            batch = BagBatch.from_bags([bags[i] for i in idx], dtype=bags[idx[0]].dtype, device=y.device)
            terms = model.loss_terms(batch, y[idx])
            if not config.accumulate_gradients:
                optimizer.zero_grad(set_to_none=False)
            terms["total"].backward()
            optimizer.step()
            for k, v in terms.items():
                sums[k] += float(v.detach())
        row = {"epoch": epoch + 1, **{k: v / len(batches) for k, v in sums.items()}}
        row["seconds"] = time.perf_counter() - t0
        history.append(row)
        if on_epoch_end is not None:
            on_epoch_end(epoch + 1, model)
    model.eval()
    return history
