"""Competence check: the package's (gated) attention MIL against torchmil's ABMIL, same folds.

The independent side is ``torchmil.models.ABMIL`` (torchmil on PyPI, an implementation of
Ilse et al. 2018 that shares no code with ``minitorch_proto``): its ``AttentionPool``
(``softmax(w^T tanh(V h))``, gated: ``softmax(w^T (tanh(V h) * sigm(U h)))``) and its
linear classifier, on top of a feature extractor built from ``torchmil.nn.MLP``
(Linear-ReLU 256-128-64) followed by ``torch.nn.Dropout``. Widths, attention size, dropout
rate and the Adam settings are read from the package estimator, so both sides train the
same configuration: Adam (lr 5e-4, betas (0.9, 0.999), coupled weight decay 5e-4 on every
parameter), binary cross-entropy on the bag logit (the model's ``criterion``), one bag
per step in a fresh random order each epoch, 50 epochs, no early stopping; the global
torch RNG is seeded with the fold's seed. Folds and standardisation (fitted on each
training fold) are those of the package run. Nothing is tuned.

Prints, per data set and method: a lockstep check on the first fold (torchmil's model
given the package's initial weights, bag order and dropout masks must produce the same
logits, so the two differ only in their random draws), then mean test accuracy and AUC of
both sides and the paired differences (package minus torchmil) with their standard errors
over folds.

torchmil is not a dependency of the project; install it beside the venv, not into it::

    .venv/bin/python -m pip install --target /tmp/tmil --no-deps torchmil tensordict einops "pyvers<0.3"

Usage::

    PYTHONPATH=/tmp/tmil MINITORCH_PROTO_DATA=../shared/data/mil \\
        .venv/bin/python benchmarks/crosscheck_torchmil.py --datasets musk1 fox
"""
from __future__ import annotations

import json
import sys
import time
from importlib.metadata import version

import numpy as np
import torch
from sklearn.base import clone
from sklearn.metrics import roc_auc_score
from torch import nn

from minitorch_proto.baselines import BASELINES
from minitorch_proto.baselines.batched_fit import fit_many
from minitorch_proto.data import load_benchmark
from minitorch_proto.evaluation.cv import stratified_folds
from minitorch_proto.outputs import write_atomic
from script_args import Parser, count, output_file  # this folder is on sys.path
from minitorch_proto.preprocessing import BagStandardizer

METHODS = ("attention", "gated_attention")
#: --reseed refits the package with each fold's seed plus this (a second, independent draw).
RESEED_OFFSET = 1_000_003


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


def build_torchmil(ABMIL, MLP, n_features: int, settings: dict) -> nn.Module:
    """torchmil's ABMIL with a Linear-ReLU feature extractor and dropout after it, as the package's."""
    widths = [int(h) for h in settings["hidden_sizes"]]
    feat_ext = nn.Sequential(MLP(n_features, widths, ["relu"] * len(widths)), nn.Dropout(float(settings["dropout"])))
    return ABMIL(in_shape=(n_features,), att_dim=int(settings["attention_dim"]), att_act="tanh",
                 gated=bool(settings["gated"]), feat_ext=feat_ext, criterion=nn.BCEWithLogitsLoss())


def train_torchmil(model: nn.Module, train, y_train, settings: dict, orders, dtype=torch.float32) -> nn.Module:
    """Adam, one bag per step, bags visited in ``orders[epoch]``."""
    opt = torch.optim.Adam(model.parameters(), lr=float(settings["lr"]), betas=tuple(settings["betas"]),
                           weight_decay=float(settings["weight_decay"]))
    xs = [torch.tensor(b, dtype=dtype).unsqueeze(0) for b in train]
    ys = torch.tensor(y_train, dtype=dtype)
    model.train()
    for order in orders:
        for i in order:
            # model.criterion rather than ABMIL.compute_loss, which casts to float32 and
            # would blur the float64 lockstep comparison; in float32 the two are the same.
            loss = model.criterion(model(xs[i]), ys[i : i + 1])
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    return model


def torchmil_logits(model: nn.Module, bags, dtype=torch.float32) -> np.ndarray:
    with torch.no_grad():
        return np.array([float(model(torch.tensor(b, dtype=dtype).unsqueeze(0))[0]) for b in bags])


def torchmil_fit_predict(ABMIL, MLP, train, y_train, test, settings: dict, seed: int, epochs: int) -> np.ndarray:
    """Train torchmil's ABMIL on ``train`` (its own initialisation, order and dropout draws); test logits."""
    torch.manual_seed(seed)
    model = build_torchmil(ABMIL, MLP, train[0].shape[1], settings)
    rng = np.random.default_rng(seed)
    orders = [rng.permutation(len(train)) for _ in range(epochs)]
    return torchmil_logits(train_torchmil(model, train, y_train, settings, orders), test)


class _SameMasks(nn.Module):
    """Inverted dropout drawing its masks from a given generator (to replay another run's masks)."""

    def __init__(self, p: float, generator: torch.Generator):
        super().__init__()
        self.keep, self.generator = 1.0 - p, generator

    def forward(self, x):
        if not self.training:
            return x
        return x * torch.empty_like(x).bernoulli_(self.keep, generator=self.generator) / self.keep


def lockstep(ABMIL, MLP, method: str, train, y_train, test, seed: int, epochs: int = 3,
             dropout: bool = False) -> float:
    """Max |logit difference| on ``test`` when both sides start from the package's initial
    weights, visit the bags in the package's order and train in float64: without dropout,
    or (``dropout=True``) with torchmil's dropout replaying the package's masks.

    Near zero means the two implement the same network, dropout placement and scaling,
    loss and optimiser step, so any gap in the cross-validated scores comes from the
    random draws (initial weights, bag order, dropout masks), not from the model.
    """
    est = BASELINES[method](0).set_params(n_epochs=epochs, dtype="float64", random_state=seed)
    if not dropout:
        est.set_params(dropout=0.0)
    probe = clone(est)
    probe.n_features_in_ = train[0].shape[1]
    # The package's own set-up (what fit() draws): initial network, bag-order RNG, dropout RNG.
    net0, rng, drop_gen = probe._setup_training(torch.device("cpu"))
    orders = [rng.permutation(len(train)) for _ in range(epochs)]
    theirs = build_torchmil(ABMIL, MLP, train[0].shape[1], est.get_params()).double()
    ours0 = net0.state_dict()
    embed = sorted({int(k.split(".")[1]) for k in ours0 if k.startswith("embed.")})
    mapping = {f"feat_ext.0.net.{i}.{p}": f"embed.{i}.{p}" for i in embed for p in ("weight", "bias")}
    mapping.update({"pool.fc1.module.weight": "att_v.weight", "pool.fc1.module.bias": "att_v.bias",
                    "pool.fc2.weight": "att_w.weight",  # att_w.bias shifts every score alike: no effect
                    "classifier.module.weight": "classifier.weight", "classifier.module.bias": "classifier.bias"})
    if est.gated:
        mapping.update({"pool.fc_gated.module.weight": "att_u.weight", "pool.fc_gated.module.bias": "att_u.bias"})
    theirs.load_state_dict({k: ours0[v] for k, v in mapping.items()}, strict=True)
    if dropout:
        replay = torch.Generator()
        replay.set_state(drop_gen.get_state())
        theirs.feat_ext[1] = _SameMasks(float(est.dropout), replay)
    train_torchmil(theirs, train, y_train, est.get_params(), orders, dtype=torch.float64)
    ours = est.fit(train, y_train).decision_function(test)
    return float(np.abs(ours - torchmil_logits(theirs, test, dtype=torch.float64)).max())


def _summary(ours: np.ndarray, theirs: np.ndarray, names=("package", "torchmil")) -> dict:
    diff = ours - theirs
    return {names[0]: round(float(ours.mean()), 3), names[1]: round(float(theirs.mean()), 3)} | dict(
                paired_diff=round(float(diff.mean()), 3),
                paired_diff_se=round(float(diff.std(ddof=1) / np.sqrt(len(diff))), 3))


def summarise(records: list[dict]) -> dict:
    """Per data set and method: mean accuracy / AUC of both sides and paired differences over folds."""
    out: dict = {}
    for name, method in sorted({(r["dataset"], r["method"]) for r in records}):
        rows = [r for r in records if r["dataset"] == name and r["method"] == method]
        scores, floor = {}, {}
        reseeded = all("package_reseeded" in r for r in rows)
        for metric, fn in (("accuracy", lambda y, s: np.mean((s > 0) == y)), ("auc", roc_auc_score)):
            sides = ("package", "torchmil", "package_reseeded") if reseeded else ("package", "torchmil")
            per_fold = {side: np.array([fn(np.array(r["y"]), np.array(r[side])) for r in rows]) for side in sides}
            scores[metric] = _summary(per_fold["package"], per_fold["torchmil"])
            if reseeded:
                floor[metric] = _summary(per_fold["package"], per_fold["package_reseeded"],
                                         names=("package", "package_reseeded"))
        # Share of test bags called positive: separates a threshold (calibration) gap from a ranking gap.
        scores["called_positive"] = {
            side: round(float(np.mean(np.concatenate([np.array(r[side]) > 0 for r in rows]))), 3)
            for side in ("package", "torchmil")
        }
        if reseeded:
            # The same package model with other seeds: how far two runs of one implementation drift apart.
            scores["noise_floor"] = floor
        scores["folds"] = len(rows)
        out.setdefault(name, {})[method] = scores
    return out


def _saved_torchmil(paths, epochs: int) -> dict:
    """torchmil's test logits from earlier ``--records`` (torchmil's side is deterministic given the
    fold seed and does not depend on minitorch_proto's code, so it need not be retrained when only
    the package changed)."""
    saved = {}
    for path in paths or ():
        with open(path) as fh:
            blob = json.load(fh)
        if blob.get("epochs") != epochs:
            raise SystemExit(f"crosscheck_torchmil: {path} was run with {blob.get('epochs')} epochs, not {epochs}")
        for r in blob["records"]:
            saved[(r["dataset"], r["method"], r["repeat"], r["fold"])] = r
    return saved


def run(args) -> tuple[list[dict], dict]:
    ABMIL, MLP = _import_torchmil()
    saved = _saved_torchmil(args.reuse_torchmil, args.epochs)
    torch.set_num_threads(1)
    records, lockstep_gaps = [], {}
    for name in args.datasets:
        data = load_benchmark(name)
        folds = [f for f in stratified_folds(data.y, args.repeats, args.folds, random_state=0)
                 if not args.only_repeats or f.repeat in args.only_repeats]
        prepared = []
        for f in folds:
            std = BagStandardizer("feature").fit([data.bags[i] for i in f.train])
            prepared.append((std.transform([data.bags[i] for i in f.train]),
                             std.transform([data.bags[i] for i in f.test])))
        for method in args.methods:
            f0, (tr0, te0) = folds[0], prepared[0]
            gaps = {kind: lockstep(ABMIL, MLP, method, tr0, data.y[f0.train], te0, f0.seed, dropout=kind == "dropout")
                    for kind in ("no_dropout", "dropout")}
            print(name, method, f"lockstep (package's initial weights and bag order, float64, 3 epochs, fold "
                  f"{f0.repeat}.{f0.fold}): max |logit difference| {gaps['no_dropout']:.1e} without dropout, "
                  f"{gaps['dropout']:.1e} with the package's dropout masks replayed", flush=True)
            lockstep_gaps.setdefault(name, {})[method] = gaps
            est = BASELINES[method](0).set_params(n_epochs=args.epochs)
            settings = est.get_params()
            t0 = time.perf_counter()
            fitted = fit_many(est, [(tr, data.y[f.train]) for (tr, _), f in zip(prepared, folds)],
                              [f.seed for f in folds])
            t_ours = time.perf_counter() - t0
            if args.reseed:
                again = fit_many(est, [(tr, data.y[f.train]) for (tr, _), f in zip(prepared, folds)],
                                 [f.seed + RESEED_OFFSET for f in folds])
            t0 = time.perf_counter()
            theirs = []
            for (tr, te), f in zip(prepared, folds):
                old = saved.get((name, method, f.repeat, f.fold))
                if old is not None and old["seed"] == f.seed and old["y"] == data.y[f.test].tolist():
                    theirs.append(np.array(old["torchmil"]))
                else:
                    theirs.append(torchmil_fit_predict(ABMIL, MLP, tr, data.y[f.train], te, settings, f.seed,
                                                       args.epochs))
            t_theirs = time.perf_counter() - t0
            new = [dict(dataset=name, method=method, repeat=f.repeat, fold=f.fold, seed=f.seed,
                        y=data.y[f.test].tolist(), package=m.decision_function(te).tolist(), torchmil=s.tolist())
                   for f, m, (_, te), s in zip(folds, fitted, prepared, theirs)]
            if args.reseed:
                for rec, m, (_, te) in zip(new, again, prepared):
                    rec["package_reseeded"] = m.decision_function(te).tolist()
            records += new
            print(name, method, json.dumps(summarise(new)[name][method]),
                  f"fit seconds: package {t_ours:.1f}, torchmil {t_theirs:.1f}", flush=True)
    return records, lockstep_gaps


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["musk1", "fox"])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--repeats", type=count(1), default=1)
    parser.add_argument("--only-repeats", type=count(1), nargs="+", default=None,
                        help="run only these repetitions (1-based) of the --repeats x --folds protocol, "
                             "so a long protocol can be run in pieces and merged with --combine")
    parser.add_argument("--folds", type=count(2), default=10)
    parser.add_argument("--epochs", type=count(1), default=50)
    parser.add_argument("--reseed", action="store_true",
                        help="also refit the package with other seeds: the paired difference between two runs "
                             "of the same implementation (the noise floor)")
    parser.add_argument("--records", type=output_file, default=None,
                        help="write every fold's test labels and logits here (JSON)")
    parser.add_argument("--reuse-torchmil", nargs="+", default=None, metavar="RECORDS",
                        help="take torchmil's logits for folds found in these --records files instead of "
                             "retraining it (to refresh the package side after a package change)")
    parser.add_argument("--combine", nargs="+", default=None, metavar="RECORDS",
                        help="train nothing: merge --records files and print the summary")
    args = parser.parse_args()
    if args.only_repeats and not all(1 <= r <= args.repeats for r in args.only_repeats):
        parser.error(f"--only-repeats must lie in 1..{args.repeats}")
    if args.combine:
        records, meta = [], {}
        for path in args.combine:
            try:
                with open(path) as fh:
                    blob = json.load(fh)
                records += blob["records"]
            except (OSError, ValueError, KeyError) as exc:
                parser.exit(2, f"crosscheck_torchmil: cannot read records from {path}: {exc!r}\n")
            for k, v in blob.items():
                if k == "lockstep_max_logit_diff":
                    for name, by_method in v.items():
                        meta.setdefault(k, {}).setdefault(name, {}).update(by_method)
                elif k != "records":
                    meta[k] = v
        keys = [(r["dataset"], r["method"], r["repeat"], r["fold"]) for r in records]
        if len(set(keys)) != len(keys):
            parser.exit(2, "crosscheck_torchmil: the --combine files hold the same fold twice\n")
    else:
        records, gaps = run(args)
        meta = {"torchmil": version("torchmil"), "protocol": f"{args.repeats}x{args.folds}", "epochs": args.epochs,
                "lockstep_max_logit_diff": gaps}
        if args.records:  # whole: an interrupted rewrite leaves the earlier records
            write_atomic(args.records, json.dumps({**meta, "records": records}))
    print(json.dumps({**meta, "results": summarise(records)}))


if __name__ == "__main__":
    main()
