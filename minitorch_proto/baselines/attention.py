"""Attention-based deep MIL (Ilse, Tomczak & Welling, ICML 2018), for tabular instances.

Model (per bag with instances x_1..x_K):

    h_k = f(x_k)                                       instance embedding (MLP)
    a_k = softmax_k( w^T tanh(V h_k) )                 attention   (gated=False)
    a_k = softmax_k( w^T (tanh(V h_k) * sigm(U h_k)) ) gated attention (gated=True)
    z   = sum_k a_k h_k                                bag embedding
    p   = sigmoid(c^T z + b)                           bag probability

Hyper-parameters and where they come from
-----------------------------------------
* Attention pooling, gated variant, one attention head (K=1), linear+sigmoid
  classifier, Adam with betas (0.9, 0.999), learning rate 5e-4, one bag per step:
  **paper** (Ilse et al. 2018; Adam settings as in their MNIST-bags set-up).
* Instance embedding ``hidden_sizes=(256, 128, 64)`` with ReLU for the MIL benchmark
  data, attention hidden size 64: **paper, as we recall it** - Ilse et al. reuse the fully
  connected embedding of Wang et al. (2018) for Musk/Fox/Tiger/Elephant. We could not
  check the appendix offline.
* ``dropout=0.5`` after the last hidden layer (the placement of Wang et al.'s MI-Net),
  ``weight_decay=5e-4`` (coupled L2, as ``torch.optim.Adam`` applies it),
  ``n_epochs=50`` and no early stopping (Ilse et al. used a validation split for early
  stopping and per-data-set optimiser settings, which we do not reproduce, so that
  nothing but the training bags is used): **our choices**; 50 rather than 100 epochs
  keeps a 5x10-fold run on the five benchmarks within the time budget.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import nn

from ..validation import check_bool
from ._base import SOURCE_PAPER
from ._torch import TorchMILClassifier, make_mlp, segment_softmax, segment_sum

__all__ = ["AttentionMIL", "GatedAttentionMIL"]


class _AttentionNet(nn.Module):
    def __init__(self, n_features, hidden_sizes, dropout, attention_dim, gated):
        super().__init__()
        self.embed, m = make_mlp(n_features, hidden_sizes, dropout, dropout_after_each=False)
        self.att_v = nn.Linear(m, attention_dim)
        self.att_u = nn.Linear(m, attention_dim) if gated else None
        self.att_w = nn.Linear(attention_dim, 1)
        self.classifier = nn.Linear(m, 1)

    def _attention(self, h, bag_index, n_bags):
        a = torch.tanh(self.att_v(h))
        if self.att_u is not None:
            a = a * torch.sigmoid(self.att_u(h))
        return segment_softmax(self.att_w(a).squeeze(1), bag_index, n_bags)

    def forward(self, x, bag_index, n_bags):
        h = self.embed(x)
        a = self._attention(h, bag_index, n_bags)
        z = segment_sum(a.unsqueeze(1) * h, bag_index, n_bags)
        return self.classifier(z).squeeze(1)

    def attention(self, x, bag_index, n_bags):
        return self._attention(self.embed(x), bag_index, n_bags)


class AttentionMIL(TorchMILClassifier):
    """Attention-based MIL pooling network (Ilse et al. 2018); see the module docstring.

    Parameters
    ----------
    gated : bool
        Use the gated attention mechanism.
    hidden_sizes : tuple of int
        Widths of the fully connected ReLU layers of the instance embedding.
    attention_dim : int
        Hidden size of the attention network.
    dropout : float
        Dropout rate after the last embedding layer (0 disables).
    lr, betas, weight_decay : Adam settings (``weight_decay`` is L2 on all parameters).
    n_epochs : int
        Passes over the training bags.
    batch_size : int
        Bags per optimisation step (1 = the paper's per-bag training).
    device : {"cpu", "cuda", "auto"} or torch.device
    n_threads : int or None
        torch CPU threads during fit/predict (set, then restored); 1 by default because
        these small per-bag steps run fastest single-threaded. ``None`` leaves torch alone.
    dtype : {"float32", "float64"}
        Floating-point type of the network and data (float64 for exact comparisons).
    random_state : int, RandomState or None
    verbose : bool or int
        Show a tqdm progress bar over epochs (a count >= 0 as in scikit-learn: any but 0 shows it).

    Attributes
    ----------
    classes_, n_features_in_, network_, device_, loss_curve_ (mean training loss per epoch).
    """

    hyperparameter_source = (
        f"{SOURCE_PAPER} (attention/gating, K=1, Adam lr 5e-4 betas (0.9, 0.999), batch 1; "
        "embedding 256-128-64 as recalled); default (dropout 0.5, weight_decay 5e-4, 50 epochs)"
    )

    def __init__(
        self,
        gated: bool = False,
        hidden_sizes: Sequence[int] = (256, 128, 64),
        attention_dim: int = 64,
        dropout: float = 0.5,
        lr: float = 5e-4,
        betas: tuple[float, float] = (0.9, 0.999),
        weight_decay: float = 5e-4,
        n_epochs: int = 50,
        batch_size: int = 1,
        device: str | torch.device = "cpu",
        n_threads: int | None = 1,
        dtype: str = "float32",
        random_state: int | np.random.RandomState | None = None,
        verbose: bool = False,
    ):
        self.gated = gated
        self.hidden_sizes = hidden_sizes
        self.attention_dim = attention_dim
        self.dropout = dropout
        self.lr = lr
        self.betas = betas
        self.weight_decay = weight_decay
        self.n_epochs = n_epochs
        self.batch_size = batch_size
        self.device = device
        self.n_threads = n_threads
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose

    def _build_network(self, n_features: int) -> nn.Module:
        if int(self.attention_dim) < 1:
            raise ValueError(f"attention_dim must be >= 1, got {self.attention_dim}.")
        return _AttentionNet(
            n_features, tuple(self.hidden_sizes), float(self.dropout), int(self.attention_dim),
            check_bool("gated", self.gated),
        )

    def _make_optimizer(self, net: nn.Module, fused: bool | None = None):
        opt = torch.optim.Adam(
            net.parameters(), lr=float(self.lr), betas=tuple(self.betas), weight_decay=float(self.weight_decay),
            fused=fused,
        )
        return opt, None

    def attention_weights(self, bag) -> np.ndarray:
        """Attention weight of each instance of one bag (non-negative, sums to 1)."""
        weights, _ = self._forward_all([bag], "attention")
        return weights.double().cpu().numpy()


class GatedAttentionMIL(AttentionMIL):
    """:class:`AttentionMIL` with ``gated=True`` by default (gated attention, Ilse et al. 2018).

    Parameters
    ----------
    gated : bool, default=True
        Use the gated attention mechanism; False gives :class:`AttentionMIL`'s plain attention.
    hidden_sizes, attention_dim, dropout, lr, betas, weight_decay
        As in :class:`AttentionMIL`, with the same defaults: ``(256, 128, 64)``, ``64``, ``0.5``, ``5e-4``,
        ``(0.9, 0.999)``, ``5e-4``.
    n_epochs, batch_size, device, n_threads, dtype, random_state, verbose
        As in :class:`AttentionMIL`, with the same defaults: ``50``, ``1``, ``"cpu"``, ``1``, ``"float32"``,
        ``None``, ``False``.
    """

    def __init__(
        self,
        gated: bool = True,
        hidden_sizes: Sequence[int] = (256, 128, 64),
        attention_dim: int = 64,
        dropout: float = 0.5,
        lr: float = 5e-4,
        betas: tuple[float, float] = (0.9, 0.999),
        weight_decay: float = 5e-4,
        n_epochs: int = 50,
        batch_size: int = 1,
        device: str | torch.device = "cpu",
        n_threads: int | None = 1,
        dtype: str = "float32",
        random_state: int | np.random.RandomState | None = None,
        verbose: bool = False,
    ):
        super().__init__(
            gated=gated,
            hidden_sizes=hidden_sizes,
            attention_dim=attention_dim,
            dropout=dropout,
            lr=lr,
            betas=betas,
            weight_decay=weight_decay,
            n_epochs=n_epochs,
            batch_size=batch_size,
            device=device,
            n_threads=n_threads,
            dtype=dtype,
            random_state=random_state,
            verbose=verbose,
        )
