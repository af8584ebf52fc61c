"""The straightforward way to train the paper's model: one model, one bag per step.

Kept here as the timing reference for ``minitorch_proto.training`` (it is not part
of the package). It follows the paper exactly like the package does (Euclidean
distance, min pooling, layer norm, linear head with bias, Eq. 1, Adam with two
learning rates, batch size 1), written the way a PyTorch user would write it
first: ``torch.cdist``, ``F.layer_norm``, ``nn.Linear`` and ``torch.optim.Adam``.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class PerBagPrototypeMIL(nn.Module):
    def __init__(self, n_features: int, n_prototypes: int = 24, seed: int = 0):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.prototypes = nn.Parameter(torch.randn(n_prototypes, n_features, generator=gen))
        with torch.random.fork_rng(devices=[]):  # seeded head, global RNG left untouched
            torch.manual_seed(seed)
            self.head = nn.Linear(n_prototypes, 1)

    def forward(self, bag: torch.Tensor):
        phi = torch.cdist(bag, self.prototypes).min(dim=0).values
        z = F.layer_norm(phi, phi.shape, eps=1e-6)
        return self.head(z)[0], phi


def train_per_bag(bags, y, train, seed, epochs, lr_prototypes, lr_classifier,
                  lambda_w=3e-4, lambda_p=4e-3, lambda_d=1e-2, n_prototypes=24) -> PerBagPrototypeMIL:
    """Fit one fold: z-score on the training bags, then Adam over shuffled bags, one at a time."""
    X = np.concatenate([bags[i] for i in train])
    mu, sd = X.mean(0), X.std(0)
    sd[sd < 1e-12] = 1.0
    tensors = {i: torch.as_tensor((bags[i] - mu) / sd, dtype=torch.float32) for i in train}
    model = PerBagPrototypeMIL(X.shape[1], n_prototypes, seed)
    opt = torch.optim.Adam([
        {"params": [model.prototypes], "lr": lr_prototypes},
        {"params": model.head.parameters(), "lr": lr_classifier},
    ])
    rng = np.random.default_rng(seed)
    target = {i: torch.tensor(float(y[i])) for i in train}
    for _ in range(epochs):
        for i in rng.permutation(train):
            logit, phi = model(tensors[i])
            loss = (F.binary_cross_entropy_with_logits(logit, target[i])
                    + lambda_w * model.head.weight.abs().sum()
                    + lambda_p * model.prototypes.norm(dim=1).sum()
                    + lambda_d * phi.sum())
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.standardisation = (mu, sd)
    return model


@torch.no_grad()
def accuracy(model: PerBagPrototypeMIL, bags, y, test) -> float:
    mu, sd = model.standardisation
    hits = [(model(torch.as_tensor((bags[i] - mu) / sd, dtype=torch.float32))[0] > 0).item() == bool(y[i])
            for i in test]
    return float(np.mean(hits))


if __name__ == "__main__":
    # A module, not a command: say so (it had printed nothing and exited 0, even for --help).
    import argparse

    epilog = "This file is a module; benchmarks/bench_training.py imports and times it."
    argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=epilog).parse_args()
    raise SystemExit("per_bag_loop.py is a module with nothing to run; run benchmarks/bench_training.py")
