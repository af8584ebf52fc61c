"""Competence check: the package's MI-Net / mi-Net against a plain PyTorch rewrite, same folds.

The rewrite follows Wang et al. (2018) and their Keras code directly, sharing no code with
``minitorch_proto.baselines``: ``nn.Sequential`` of Linear-ReLU 256-128-64, dropout 0.5 after
the last, max or mean pooling (of features for MI-Net, of instance probabilities for
mi-Net), a sigmoid unit, Glorot-uniform weights and zero biases (``nn.init``), the L2
penalty ``5e-3 * ||W||^2`` added to the loss, SGD with Nesterov momentum 0.9, learning rate
5e-4 decayed as ``lr / (1 + 1e-4 * step)``, one bag per step, 50 epochs, the global torch
RNG seeded per fold. Folds, standardisation (fitted on each training fold) and epochs are
those of the package run. Nothing is tuned. Prints mean accuracy of both and the paired
difference with its standard error over folds.

Usage::

    MINITORCH_PROTO_DATA=../shared/data/mil .venv/bin/python benchmarks/crosscheck_minet.py --dataset musk1
"""
from __future__ import annotations

import json

import numpy as np
import torch
from torch import nn

from minitorch_proto.baselines import BASELINES
from minitorch_proto.baselines.batched_fit import fit_many
from minitorch_proto.data import load_benchmark
from minitorch_proto.evaluation.cv import stratified_folds
from minitorch_proto.preprocessing import BagStandardizer
from script_args import FIVE, Parser, count  # this folder is on sys.path


def plain_fit_predict(train, y_train, test, embedding: bool, pooling: str, seed: int, epochs: int) -> np.ndarray:
    torch.manual_seed(seed)
    d = train[0].shape[1]
    body = nn.Sequential(nn.Linear(d, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                         nn.Dropout(0.5))
    head = nn.Linear(64, 1)
    weights = []
    for layer in [*body, head]:
        if isinstance(layer, nn.Linear):
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)
            weights.append(layer.weight)
    params = list(body.parameters()) + list(head.parameters())
    opt = torch.optim.SGD(params, lr=5e-4, momentum=0.9, nesterov=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 1.0 / (1.0 + 1e-4 * t))

    def bag_prob(x):
        h = body(x)
        if embedding:
            z = h.max(0).values if pooling == "max" else h.mean(0)
            return torch.sigmoid(head(z)).squeeze()
        p = torch.sigmoid(head(h)).squeeze(1)
        return p.max() if pooling == "max" else p.mean()

    xs = [torch.tensor(b, dtype=torch.float32) for b in train]
    ys = torch.tensor(y_train, dtype=torch.float32)
    rng = np.random.default_rng(seed)
    body.train()
    for _ in range(epochs):
        for i in rng.permutation(len(xs)):
            p = bag_prob(xs[i]).clamp(1e-7, 1 - 1e-7)
            loss = nn.functional.binary_cross_entropy(p, ys[i]) + 5e-3 * sum((w ** 2).sum() for w in weights)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    body.eval()
    with torch.no_grad():
        return np.array([float(bag_prob(torch.tensor(b, dtype=torch.float32))) for b in test])


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="musk1", choices=FIVE)
    parser.add_argument("--methods", nargs="+", default=["MI_net_max", "mi_net_max"], metavar="NAME",
                        choices=[m for m in BASELINES if m.lower().startswith("mi_net")])
    parser.add_argument("--repeats", type=count(1), default=1)
    parser.add_argument("--folds", type=count(2), default=10)
    parser.add_argument("--epochs", type=count(1), default=50)
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = load_benchmark(args.dataset)
    folds = stratified_folds(data.y, args.repeats, args.folds, random_state=0)
    prepared = []
    for f in folds:
        std = BagStandardizer("feature").fit([data.bags[i] for i in f.train])
        prepared.append((std.transform([data.bags[i] for i in f.train]), std.transform([data.bags[i] for i in f.test])))
    out = {}
    for method in args.methods:
        est = BASELINES[method](0).set_params(n_epochs=args.epochs)
        fitted = fit_many(est, [(tr, data.y[f.train]) for (tr, _), f in zip(prepared, folds)], [f.seed for f in folds])
        ours = np.array([np.mean(m.predict(te) == data.y[f.test]) for m, (_, te), f in zip(fitted, prepared, folds)])
        plain = np.array([
            np.mean((plain_fit_predict(tr, data.y[f.train], te, method.startswith("MI"), method.split("_")[-1],
                                       f.seed, args.epochs) > 0.5) == data.y[f.test])
            for (tr, te), f in zip(prepared, folds)
        ])
        diff = ours - plain
        out[method] = dict(package=round(float(ours.mean()), 3), plain_pytorch=round(float(plain.mean()), 3),
                           paired_diff=round(float(diff.mean()), 3),
                           paired_diff_se=round(float(diff.std(ddof=1) / np.sqrt(len(diff))), 3))
        print(method, out[method], flush=True)
    print(json.dumps({"dataset": args.dataset, "folds": len(folds), "epochs": args.epochs, "results": out}))


if __name__ == "__main__":
    main()
