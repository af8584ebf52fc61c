"""How one prototype model is optimised: :class:`TrainConfig`, shared by every engine.

Adam with one learning rate for the prototypes and one for the classifier,
batch size 1, a fixed number of epochs. The published code's training-loop
deviations (bags drawn with replacement, the rate halved every 40 epochs,
gradients never zeroed) are switches of :class:`TrainConfig`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import numpy as np

from ..validation import check_bool, check_int, check_number

__all__ = ["TrainConfig", "compat_train_config", "epoch_batches"]


@dataclass(frozen=True)
class TrainConfig:
    """How a model is optimised.

    Parameters
    ----------
    epochs : int
        Passes over the training bags. At Table 1's rates a few epochs score about chance: the
        head has barely left its random start (:func:`~minitorch_proto.model.init_head`).
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
        object.__setattr__(self, "epochs", check_int("epochs", self.epochs))
        object.__setattr__(self, "batch_size", check_int("batch_size", self.batch_size))
        object.__setattr__(self, "accumulate_gradients", check_bool("accumulate_gradients", self.accumulate_gradients))
        for name in ("lr_prototypes", "lr_classifier"):
            check_number(name, getattr(self, name))
        if self.sampling not in ("shuffle", "replacement"):
            raise ValueError(f"sampling must be 'shuffle' or 'replacement', got {self.sampling!r}.")
        if self.lr_halving_every is not None:
            object.__setattr__(self, "lr_halving_every", check_int("lr_halving_every", self.lr_halving_every))
        betas = tuple(self.betas) if isinstance(self.betas, (tuple, list)) else ()
        if len(betas) != 2 or not all(isinstance(b, (int, float, np.number)) and 0 <= b < 1 for b in betas):
            raise ValueError(f"betas must be two numbers in [0, 1) (Adam's), got {self.betas!r}.")
        if not isinstance(self.eps, (int, float, np.number)) or not 0 <= self.eps < np.inf:
            raise ValueError(f"eps must be a finite number >= 0 (Adam's), got {self.eps!r}.")
        object.__setattr__(self, "betas", betas)

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


def compat_train_config(config: TrainConfig | None = None, **overrides: Any) -> TrainConfig:
    """The published code's loop: sampling with replacement, rate halved every 40 epochs, no zero_grad.

    Parameters
    ----------
    config : TrainConfig, default=None
        The loop to start from (epochs, rate, batch size, seed ...); None means the paper's.
    **overrides
        Fields set after the published code's, e.g. ``accumulate_gradients=False`` to measure one switch.

    Returns
    -------
    TrainConfig
        A new configuration; ``config`` is not changed.
    """
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
