"""Training one prototype MIL model, step by step, as the paper describes.

This trainer is the reference semantics of :class:`~minitorch_proto.training.config.TrainConfig`;
the batched engines (:mod:`minitorch_proto.training.batched`) train many such models at
once and are tested to give the same result.
"""
from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np
import torch

from ..bags import BagBatch
from ..model import LOSS_TERMS, PrototypeMIL, project_monotone_
from ..utils import progress_bar, torch_threads
from ..validation import check_codes
from .config import TrainConfig, epoch_batches

__all__ = ["train_model"]


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

    Raises
    ------
    ValueError
        If ``y`` is not class codes 0..C-1 of the model's C classes.
    """
    codes, _ = check_codes(y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else y, model.n_classes)
    y = torch.as_tensor(codes, device=y.device if isinstance(y, torch.Tensor) else None)
    with torch_threads(num_threads):
        return _train(model, bags, y, config, seed, progress, on_epoch_end)


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
    for epoch in progress_bar(range(int(config.epochs)), progress, "epochs"):
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
            if model.config.monotone:
                project_monotone_(model.weight)
            for k, v in terms.items():
                sums[k] += float(v.detach())
        row = {"epoch": epoch + 1, **{k: v / len(batches) for k, v in sums.items()}}
        row["seconds"] = time.perf_counter() - t0
        history.append(row)
        if on_epoch_end is not None:
            on_epoch_end(epoch + 1, model)
    model.eval()
    return history
