"""One contract for every engine: a frozen :class:`Problem` in, fitted models out.

Each engine trains the same models, by the reference trainer's semantics
(:func:`~minitorch_proto.training.sequential.train_model`), in its own way:

==============  ==========================================================================
engine          how
==============  ==========================================================================
``sequential``  one model after another, step by step in torch: the reference
``tensor``      all models advance together as batched torch operations (CUDA, no numba)
``compiled``    each model's epoch is one numba loop, models in parallel (the CPU default)
``streaming``   one model at a time reading bags in bounded chunks; data-parallel under
                torchrun (the engine of ``fit_streaming``)
==============  ==========================================================================

``fit(problem, engine)`` is the one entry point: a caller describes *what* to train
(bags, training sets, seeds, the two configs, the standardisation, per-model learning
rates) once, and picks *how* by name. :func:`register_engine` adds an engine under
the same contract; ``tests/test_engines.py`` checks that every registered engine gives
the reference's parameters on the same problem.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import numpy as np
import torch

from ..model import PrototypeMIL, PrototypeMILConfig
from ..preprocessing import BagStandardizer
from ..validation import check_codes
from .config import TrainConfig

__all__ = ["Problem", "Fitted", "ENGINES", "register_engine", "fit"]


@dataclass(frozen=True)
class Problem:
    """What to train: ``len(seeds)`` models, model m on bags ``train_sets[m]`` with seed ``seeds[m]``.

    Parameters
    ----------
    bags : sequence of (n_instances, n_features) arrays, raw features
    y : int array (n_bags,), labels encoded 0..C-1
    train_sets : one int array of bag positions per model
    seeds : one int per model; seeds its initial parameters and its bag order
    model_config, train_config : shared by every model
    standardization : {"feature", "instance", "none"}, fitted on each model's training bags
    lr_prototypes, lr_classifier : optional per-model learning rates (default: ``train_config``'s)
    n_classes : default ``y.max() + 1``
    device, dtype : where and in what precision to train
    """

    bags: Sequence[np.ndarray]
    y: np.ndarray
    train_sets: tuple
    seeds: tuple
    model_config: PrototypeMILConfig = field(default_factory=PrototypeMILConfig)
    train_config: TrainConfig = field(default_factory=TrainConfig)
    standardization: str = "feature"
    lr_prototypes: tuple | None = None
    lr_classifier: tuple | None = None
    n_classes: int | None = None
    device: str = "cpu"
    dtype: torch.dtype = torch.float32

    def __post_init__(self) -> None:
        # Codes 0..C-1 as int64 for every engine (0.5 had been 0 to three engines and 0.5 to the sequential one).
        object.__setattr__(self, "y", check_codes(self.y, self.n_classes)[0])
        if len(self.train_sets) != len(self.seeds):
            raise ValueError(f"{len(self.train_sets)} training sets but {len(self.seeds)} seeds.")
        for name in ("lr_prototypes", "lr_classifier"):
            rates = getattr(self, name)
            if rates is not None and len(rates) != len(self.seeds):
                raise ValueError(f"{name} needs one rate per model ({len(self.seeds)}), got {len(rates)}.")

    @property
    def n_models(self) -> int:
        return len(self.seeds)

    def classes(self) -> int:
        return int(self.n_classes or int(np.max(self.y)) + 1)

    def train_config_of(self, m: int) -> TrainConfig:
        """Model ``m``'s training configuration (its own learning rates, if any)."""
        rates = {}
        if self.lr_prototypes is not None:
            rates["lr_prototypes"] = float(self.lr_prototypes[m])
        if self.lr_classifier is not None:
            rates["lr_classifier"] = float(self.lr_classifier[m])
        return replace(self.train_config, **rates)


@dataclass
class Fitted:
    """What every engine returns: one model, standardiser and history per model of the problem."""

    models: list[PrototypeMIL]
    standardizers: list[BagStandardizer]
    histories: list[list[dict]]


ENGINES: dict[str, Callable[[Problem], Fitted]] = {}


def register_engine(name: str) -> Callable[[Callable[[Problem], Fitted]], Callable[[Problem], Fitted]]:
    """Register ``fn(problem) -> Fitted`` under ``name`` (a decorator)."""

    def add(fn: Callable[[Problem], Fitted]) -> Callable[[Problem], Fitted]:
        ENGINES[name] = fn
        return fn

    return add


def fit(problem: Problem, engine: str = "compiled") -> Fitted:
    """Train ``problem``'s models with ``engine`` (a key of :data:`ENGINES`)."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}.")
    return ENGINES[engine](problem)


@register_engine("sequential")
def _sequential(p: Problem) -> Fitted:
    from .sequential import train_model

    models, stds, histories = [], [], []
    for m, (train, seed) in enumerate(zip(p.train_sets, p.seeds)):
        std = BagStandardizer(p.standardization).fit([p.bags[i] for i in train])
        inst = [std.transform_instances(p.bags[i]) for i in train]
        init = np.concatenate(inst) if p.model_config.init != "normal" else None
        model = PrototypeMIL(np.shape(p.bags[0])[1], p.classes(), p.model_config,
                             generator=torch.Generator().manual_seed(int(seed)), init_instances=init)
        model = model.to(device=p.device, dtype=p.dtype)
        bags = [torch.as_tensor(b, dtype=p.dtype, device=p.device) for b in inst]
        y = torch.as_tensor(np.asarray(p.y)[np.asarray(train)], device=p.device)
        histories.append(train_model(model, bags, y, p.train_config_of(m), seed=int(seed)))
        models.append(model.float().cpu().eval())
        stds.append(std)
    return Fitted(models, stds, histories)


def _batched(backend: str) -> Callable[[Problem], Fitted]:
    def run(p: Problem) -> Fitted:
        from .batched import train_batched

        out = train_batched(p.bags, np.asarray(p.y), list(p.train_sets), list(p.seeds), p.model_config,
                            p.train_config, n_classes=p.classes(), standardization=p.standardization,
                            lr_prototypes=p.lr_prototypes, lr_classifier=p.lr_classifier, device=p.device,
                            dtype=p.dtype, backend=backend)
        return Fitted([out.module(m).eval() for m in range(p.n_models)], list(out.standardizers), out.history)

    return run


register_engine("tensor")(_batched("tensor"))
register_engine("compiled")(_batched("compiled"))


@register_engine("streaming")
def _streaming(p: Problem) -> Fitted:
    from .distributed import train_streaming

    models, stds, histories = [], [], []
    for m, (train, seed) in enumerate(zip(p.train_sets, p.seeds)):
        # A lazy collection stays lazy (its subset reads nothing); a list is indexed.
        bags = p.bags.subset(train) if hasattr(p.bags, "subset") and hasattr(p.bags, "rows") else [
            p.bags[i] for i in train]
        out = train_streaming(bags, np.asarray(p.y)[np.asarray(train)], p.model_config, p.train_config_of(m),
                              seed=int(seed), n_classes=p.classes(), standardization=p.standardization,
                              dtype=p.dtype, device=p.device)
        models.append(out.model.float().eval())
        stds.append(out.standardizer)
        histories.append(list(out.history))
    return Fitted(models, stds, histories)
