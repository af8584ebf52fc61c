"""Competence check: the package's (gated) attention MIL against torchmil's ABMIL, same folds.

The independent side is ``torchmil.models.ABMIL`` (torchmil on PyPI, an implementation of
Ilse et al. 2018 that shares no code with ``minitorch_proto``): its ``AttentionPool`` (``softmax(w^T tanh(V h))``, gated: ``softmax(w^T (tanh(V h) * sigm(U h)))``)
and its linear classifier, on top of a feature extractor built from ``torchmil.nn.MLP``
(Linear-ReLU 256-128-64) followed by ``torch.nn.Dropout``. Widths, attention size, dropout
rate and the Adam settings are read from the package estimator, so both sides train the
same configuration: Adam (lr 5e-4, betas (0.9, 0.999), coupled weight decay 5e-4 on every
parameter), binary cross-entropy on the bag logit (``ABMIL.compute_loss``), one bag per
step in a fresh random order each epoch, 50 epochs, no early stopping; the global torch
RNG is seeded with the fold's seed. Folds and standardisation (fitted on each training
fold) are those of the package run. Nothing is tuned. Prints, per data set and method,
mean test accuracy and AUC of both sides and the paired differences (package minus
torchmil) with their standard errors over folds.

torchmil is not a dependency of the project; install it beside the venv, not into it::

    .venv/bin/python -m pip install --target /tmp/tmil --no-deps torchmil tensordict einops "pyvers<0.3"

Usage::

    PYTHONPATH=/tmp/tmil MINITORCH_PROTO_DATA=../shared/data/mil \\
        .venv/bin/python benchmarks/crosscheck_torchmil.py --datasets musk1 fox
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from importlib.metadata import version

import numpy as np
import torch
from sklearn.metrics import roc_auc_score
from torch import nn

from minitorch_proto.baselines import BASELINES
from minitorch_proto.baselines.batched import fit_many
from minitorch_proto.data import load_benchmark
from minitorch_proto.evaluation.cv import stratified_folds
from minitorch_proto.preprocessing import BagStandardizer

METHODS = ("attention", "gated_attention")


def _import_torchmil():
    try:
        import torchmil  # noqa: F401
        from torchmil.models import ABMIL
        from torchmil.nn import MLP
    except ImportError as exc:
        print(f"crosscheck_torchmil: torchmil is not importable ({exc}); install it with `.venv/bin/python -m pip "
              "install --target /tmp/tmil --no-deps torchmil tensordict einops 'pyvers<0.3'` and run with "
              "PYTHONPATH=/tmp/tmil", file=sys.stderr)
        sys.exit(2)
    return ABMIL, MLP


def torchmil_fit_predict(ABMIL, MLP, train, y_train, test, settings: dict, seed: int, epochs: int) -> np.ndarray:
    """Train torchmil's ABMIL on ``train`` and return the test bags' logits."""
    torch.manual_seed(seed)
    d = train[0].shape[1]
    widths = [int(h) for h in settings["hidden_sizes"]]
    feat_ext = nn.Sequential(MLP(d, widths, ["relu"] * len(widths)), nn.Dropout(float(settings["dropout"])))
    model = ABMIL(in_shape=(d,), att_dim=int(settings["attention_dim"]), att_act="tanh",
                  gated=bool(settings["gated"]), feat_ext=feat_ext, criterion=nn.BCEWithLogitsLoss())
    opt = torch.optim.Adam(model.parameters(), lr=float(settings["lr"]), betas=tuple(settings["betas"]),
                           weight_decay=float(settings["weight_decay"]))
    xs = [torch.tensor(b, dtype=torch.float32).unsqueeze(0) for b in train]
    ys = torch.tensor(y_train, dtype=torch.float32)
    rng = np.random.default_rng(seed)
    model.train()
    for _ in range(epochs):
        for i in rng.permutation(len(xs)):
            _, losses = model.compute_loss(ys[i : i + 1], xs[i])
            loss = sum(losses.values())
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        return np.array([float(model(torch.tensor(b, dtype=torch.float32).unsqueeze(0))[0]) for b in test])


def _summary(ours: np.ndarray, theirs: np.ndarray) -> dict:
    diff = ours - theirs
    return dict(package=round(float(ours.mean()), 3), torchmil=round(float(theirs.mean()), 3),
                paired_diff=round(float(diff.mean()), 3),
                paired_diff_se=round(float(diff.std(ddof=1) / np.sqrt(len(diff))), 3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["musk1", "fox"])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--folds", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=50)
    args = parser.parse_args()
    if args.epochs < 1 or args.repeats < 1:
        parser.error("--epochs and --repeats must be >= 1")
    ABMIL, MLP = _import_torchmil()

    torch.set_num_threads(1)
    results = {}
    for name in args.datasets:
        data = load_benchmark(name)
        folds = stratified_folds(data.y, args.repeats, args.folds, random_state=0)
        prepared = []
        for f in folds:
            std = BagStandardizer("feature").fit([data.bags[i] for i in f.train])
            prepared.append((std.transform([data.bags[i] for i in f.train]),
                             std.transform([data.bags[i] for i in f.test])))
        for method in args.methods:
            est = BASELINES[method](0).set_params(n_epochs=args.epochs)
            settings = est.get_params()
            t0 = time.perf_counter()
            fitted = fit_many(est, [(tr, data.y[f.train]) for (tr, _), f in zip(prepared, folds)],
                              [f.seed for f in folds])
            t_ours = time.perf_counter() - t0
            ours_logit = [m.decision_function(te) for m, (_, te) in zip(fitted, prepared)]
            t0 = time.perf_counter()
            theirs_logit = [torchmil_fit_predict(ABMIL, MLP, tr, data.y[f.train], te, settings, f.seed, args.epochs)
                            for (tr, te), f in zip(prepared, folds)]
            t_theirs = time.perf_counter() - t0
            y_tests = [data.y[f.test] for f in folds]
            acc = [np.array([np.mean((s > 0) == y) for s, y in zip(side, y_tests)]) for side in (ours_logit, theirs_logit)]
            auc = [np.array([roc_auc_score(y, s) for s, y in zip(side, y_tests)]) for side in (ours_logit, theirs_logit)]
            row = dict(accuracy=_summary(*acc), auc=_summary(*auc), fit_s=dict(package=round(t_ours, 1),
                                                                             torchmil=round(t_theirs, 1)))
            results.setdefault(name, {})[method] = row
            print(name, method, json.dumps(row), flush=True)
    print(json.dumps({"torchmil": version("torchmil"), "folds": f"{args.repeats}x{args.folds}",
                      "epochs": args.epochs, "results": results}))


if __name__ == "__main__":
    main()
