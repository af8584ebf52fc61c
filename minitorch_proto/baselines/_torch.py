"""PyTorch plumbing shared by the neural baselines (attention MIL, mi-Net, MI-Net).

Bags are handled in flat form: the instances of a batch of bags are stacked into one
(n_instances, n_features) tensor with a ``bag_index`` vector naming each row's bag, and
pooling is a segment reduction. With ``batch_size=1`` (the default, as in the original
papers) every optimisation step sees exactly one bag; prediction always runs all bags
in one flat pass.

Randomness: weights are initialised from a local ``torch.Generator`` on the CPU, dropout
masks come from a local generator on the model's device, and bag order from a NumPy
``RandomState``; the global torch RNG is never touched, so a fixed integer
``random_state`` gives the same model every time (on the same device and thread count).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
from numpy.typing import ArrayLike
from torch import nn
from sklearn.utils import check_random_state

from ..utils import resolve_device, torch_threads
from ..validation import check_int, check_number, check_verbose, fits_fresh
from ._base import BaseMILClassifier

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


# ----------------------------------------------------------------------- segment ops
def segment_max(values: torch.Tensor, bag_index: torch.Tensor, n_bags: int) -> torch.Tensor:
    """Per-bag maximum of rows. ``values`` (N, D) -> (n_bags, D)."""
    if n_bags == 1:
        return values.max(dim=0, keepdim=True).values
    out = values.new_full((n_bags, values.shape[1]), -math.inf)
    idx = bag_index.unsqueeze(1).expand_as(values)
    return out.scatter_reduce(0, idx, values, reduce="amax", include_self=False)


def segment_mean(values: torch.Tensor, bag_index: torch.Tensor, n_bags: int) -> torch.Tensor:
    """Per-bag mean of rows. ``values`` (N, D) -> (n_bags, D)."""
    if n_bags == 1:
        return values.mean(dim=0, keepdim=True)
    sums = values.new_zeros((n_bags, values.shape[1])).index_add(0, bag_index, values)
    counts = torch.bincount(bag_index, minlength=n_bags).to(values.dtype).unsqueeze(1)
    return sums / counts


def segment_lse(values: torch.Tensor, bag_index: torch.Tensor, n_bags: int) -> torch.Tensor:
    """Per-bag ``log(mean(exp(x)))`` (the LSE pooling of Wang et al. 2018), computed stably."""
    m = segment_max(values.detach(), bag_index, n_bags)
    shifted = torch.exp(values - (m if n_bags == 1 else m[bag_index]))
    return m + torch.log(segment_mean(shifted, bag_index, n_bags))


def segment_softmax(scores: torch.Tensor, bag_index: torch.Tensor, n_bags: int) -> torch.Tensor:
    """Softmax of 1-D ``scores`` within each bag."""
    if n_bags == 1:
        return torch.softmax(scores, dim=0)
    m = scores.new_full((n_bags,), -math.inf).scatter_reduce(
        0, bag_index, scores.detach(), reduce="amax", include_self=False
    )
    e = torch.exp(scores - m[bag_index])
    s = e.new_zeros(n_bags).index_add(0, bag_index, e)
    return e / s[bag_index]


def segment_sum(values: torch.Tensor, bag_index: torch.Tensor, n_bags: int) -> torch.Tensor:
    if n_bags == 1:
        return values.sum(dim=0, keepdim=True)
    return values.new_zeros((n_bags, values.shape[1])).index_add(0, bag_index, values)


POOL_FUNCTIONS = {"max": segment_max, "mean": segment_mean, "lse": segment_lse}


# ------------------------------------------------------------------------ modules
class GeneratorDropout(nn.Module):
    """Inverted dropout whose masks come from ``self.generator`` (set before training)."""

    def __init__(self, p: float):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {p}.")
        self.p = float(p)
        self.generator: torch.Generator | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = 1.0 - self.p
        mask = torch.empty_like(x).bernoulli_(keep, generator=self.generator)
        return x * mask / keep


def make_mlp(
    n_in: int, hidden_sizes: Sequence[int], dropout: float, dropout_after_each: bool
) -> tuple[nn.Sequential, int]:
    """Linear-ReLU stack. Dropout after every hidden layer, or only after the last."""
    layers: list[nn.Module] = []
    prev = n_in
    hidden_sizes = [int(h) for h in hidden_sizes]
    if any(h <= 0 for h in hidden_sizes):
        raise ValueError(f"hidden_sizes must be positive integers, got {hidden_sizes}.")
    for i, h in enumerate(hidden_sizes):
        layers += [nn.Linear(prev, h), nn.ReLU()]
        if dropout > 0 and (dropout_after_each or i == len(hidden_sizes) - 1):
            layers.append(GeneratorDropout(dropout))
        prev = h
    return nn.Sequential(*layers), prev


def init_linear_layers(module: nn.Module, generator: torch.Generator, scheme: str) -> None:
    """Re-initialise every ``nn.Linear`` from ``generator``.

    ``"torch"``: PyTorch's default (weights and biases U(-1/sqrt(fan_in), 1/sqrt(fan_in))).
    ``"glorot"``: Keras' default (Glorot-uniform weights, zero biases).
    """
    with torch.no_grad():
        for m in module.modules():
            if not isinstance(m, nn.Linear):
                continue
            fan_out, fan_in = m.weight.shape
            if scheme == "glorot":
                a = math.sqrt(6.0 / (fan_in + fan_out))
                m.weight.uniform_(-a, a, generator=generator)
                if m.bias is not None:
                    m.bias.zero_()
            elif scheme == "torch":
                a = 1.0 / math.sqrt(fan_in)
                m.weight.uniform_(-a, a, generator=generator)
                if m.bias is not None:
                    m.bias.uniform_(-a, a, generator=generator)
            else:  # pragma: no cover - internal
                raise ValueError(scheme)


# --------------------------------------------------------------------- estimator
class TorchMILClassifier(BaseMILClassifier):
    """Training loop shared by the neural baselines.

    Subclasses provide ``_build_network(n_features)`` returning an ``nn.Module`` whose
    ``forward(x, bag_index, n_bags)`` gives one bag logit per bag, and
    ``_make_optimizer(net)`` returning ``(optimizer, scheduler_or_None)``; the scheduler,
    if any, is stepped after every optimisation step. The loss is the mean binary
    cross-entropy over the bags of a step.
    """

    _init_scheme = "torch"

    def _check_common_params(self) -> None:
        check_int("n_epochs", self.n_epochs)  # 2.7 epochs is a mistake, not a request for 2
        check_int("batch_size", self.batch_size)
        check_number("lr", self.lr)
        check_verbose(self.verbose)
        if self.n_threads is not None:
            check_int("n_threads", self.n_threads)
        self._torch_dtype()

    def _torch_dtype(self) -> torch.dtype:
        dtype = getattr(self, "dtype", "float32")
        if dtype not in _DTYPES:
            raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}.")
        return _DTYPES[dtype]

    def _to_tensors(self, bags: list[np.ndarray], device: torch.device) -> list[torch.Tensor]:
        dtype = self._torch_dtype()
        return [torch.as_tensor(b, dtype=dtype).to(device) for b in bags]

    def _setup_training(self, device: torch.device):
        """Network, bag-order RNG and dropout generator, exactly as :meth:`fit` creates them.

        The batched trainer (:mod:`minitorch_proto.baselines.batched_fit`) calls this too, so a
        model trained there starts from the same weights and draws the same bag orders and
        dropout masks as one trained alone.
        """
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(0, 2**31 - 1))
        init_gen = torch.Generator().manual_seed(seed)
        # nn.Linear draws a default initialisation from the global RNG; fork it so the
        # caller's RNG stream is left exactly as it was, then re-initialise from init_gen.
        with torch.random.fork_rng(devices=[]):
            net = self._build_network(self.n_features_in_)
        init_linear_layers(net, init_gen, self._init_scheme)
        net = net.to(device=device, dtype=self._torch_dtype())
        drop_gen = torch.Generator(device=device).manual_seed(seed + 1)
        for m in net.modules():
            if isinstance(m, GeneratorDropout):
                m.generator = drop_gen
        return net, rng, drop_gen

    @staticmethod
    def _flat(tensors: Sequence[torch.Tensor], device: torch.device):
        if len(tensors) == 1:
            x = tensors[0]
            return x, torch.zeros(x.shape[0], dtype=torch.long, device=device), 1
        sizes = torch.tensor([t.shape[0] for t in tensors], device=device)
        x = torch.cat(list(tensors), dim=0)
        idx = torch.repeat_interleave(torch.arange(len(tensors), device=device), sizes)
        return x, idx, len(tensors)

    @fits_fresh  # a failed fit leaves it unfitted, not half new labels, half old model
    def fit(self, bags: Sequence[np.ndarray], y: ArrayLike) -> "TorchMILClassifier":
        """Train on ``bags`` (list of (n_i, n_features) arrays) with one label per bag."""
        bags, y_enc = self._validate_fit_data(bags, y)
        self._check_common_params()
        device = resolve_device(self.device)
        with torch_threads(self.n_threads if device.type == "cpu" else None):
            return self._fit_torch(bags, y_enc, device)

    def _fit_torch(self, bags, y_enc, device):
        net, rng, _ = self._setup_training(device)
        optimizer, scheduler = self._make_optimizer(net)

        xs = self._to_tensors(bags, device)
        targets = torch.as_tensor(y_enc, dtype=self._torch_dtype(), device=device)
        loss_fn = nn.BCEWithLogitsLoss()
        n = len(xs)
        bs = int(self.batch_size)
        epochs = range(int(self.n_epochs))
        if self.verbose:
            from tqdm.auto import tqdm

            epochs = tqdm(epochs, desc=type(self).__name__, leave=False)
        self.loss_curve_ = []
        net.train()
        for _ in epochs:
            order = rng.permutation(n)
            total = 0.0
            for start in range(0, n, bs):
                chosen = order[start : start + bs]
                x, idx, nb = self._flat([xs[i] for i in chosen], device)
                logits = net(x, idx, nb)
                loss = loss_fn(logits, targets[torch.as_tensor(chosen, device=device)])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()
                total += float(loss.detach()) * len(chosen)
            self.loss_curve_.append(total / n)
        net.eval()
        self.network_ = net
        self.device_ = device
        return self

    def _forward_all(self, bags, fn_name: str = "forward"):
        bags = self._validate_predict_data(bags)
        device = self.device_
        xs = self._to_tensors(bags, device)
        x, idx, nb = self._flat(xs, device)
        self.network_.eval()
        with torch.no_grad(), torch_threads(self.n_threads if device.type == "cpu" else None):
            return getattr(self.network_, fn_name)(x, idx, nb), idx

    def decision_function(self, bags: Sequence[np.ndarray]) -> np.ndarray:
        """Bag logit (log-odds of ``classes_[1]``), shape (n_bags,)."""
        out, _ = self._forward_all(bags)
        return out.double().cpu().numpy()
