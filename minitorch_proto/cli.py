"""Command-line interface: ``minitorch-proto <command> --help``."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

from . import __version__

PROTOTYPE = "prototype"
PROTOTYPE_COMPAT = "prototype (published code)"
PROTOTYPE_TUNED = "prototype (rates tuned on inner CV)"
PROTOTYPE_MONOTONE = "prototype (monotone)"
# Every setting chosen by successive halving on inner splits (evaluation.tuning), refitted as a seed ensemble.
PROTOTYPE_BEST = "prototype (tuned ensemble)"
# Learning-rate multipliers of the Table 1 rates tried on inner splits of each training fold.
TUNING_MULTIPLIERS = (1.0, 10.0, 100.0)


def _add_data_args(p: argparse.ArgumentParser, single: bool = True) -> None:
    if single:
        src = p.add_mutually_exclusive_group(required=True)
        src.add_argument("--dataset", help="benchmark name: musk1, musk2, fox, tiger, elephant")
        src.add_argument("--csv", help="your own CSV: one row per instance, with a bag column and a label column")
        src.add_argument("--bags-dir", help="folder of per-bag feature files (<bag>.npy, .pt, or .h5 with a 'features' "
                         "dataset), read lazily; bag ids and labels from --labels")
        p.add_argument("--labels", default=None, help="CSV of bag ids and labels for --bags-dir "
                       "(default: DIR/labels.csv)")
        p.add_argument("--bag-col", default="bag", help="bag-id column of --csv or --labels (default: bag)")
        p.add_argument("--label-col", default="label", help="label column of --csv or --labels (default: label)")
    p.add_argument("--data-dir", default=None,
                   help="folder holding the benchmark files (default: $MINITORCH_PROTO_DATA, else the user cache)")
    p.add_argument("--no-download", action="store_true", help="never download; fail if the files are not local")


def _add_model_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model and training (defaults: the paper's Table 1 for the chosen benchmark)")
    g.add_argument("--prototypes", type=int, default=None, help="number of prototypes D (24)")
    g.add_argument("--distance", default=None, choices=["euclidean", "sqeuclidean", "manhattan", "cosine", "pseudo"])
    g.add_argument("--pooling", default=None, help="comma-separated subset of min,mean,max (min)")
    g.add_argument("--no-layer-norm", action="store_true", help="switch off per-bag layer normalisation")
    g.add_argument("--epochs", type=int, default=None, help="epochs (100)")
    g.add_argument("--batch-size", type=int, default=None,
                   help="bags per step (1); under torchrun the global minibatch, split across the processes")
    g.add_argument("--lr-prototypes", type=float, default=None)
    g.add_argument("--lr-classifier", type=float, default=None)
    g.add_argument("--lambda-w", type=float, default=None)
    g.add_argument("--lambda-p", type=float, default=None)
    g.add_argument("--lambda-d", type=float, default=None)
    g.add_argument("--standardization", default="feature", choices=["feature", "instance", "none"])
    g.add_argument("--compat", default="none", choices=["none", "official"],
                   help="'official': the published code's behaviour (see NOTES.md); default: the paper")
    g.add_argument("--device", default="auto", help="auto, cpu or cuda")
    g.add_argument("--backend", default="auto", choices=["auto", "compiled", "tensor"],
                   help="training engine: compiled loops (CPU; the default there) or batched tensors (CPU/CUDA)")
    g.add_argument("--seed", type=int, default=0)


def _load(args):
    from .data import load_bags_csv, load_benchmark

    if getattr(args, "csv", None):
        return load_bags_csv(args.csv, bag_col=args.bag_col, label_col=args.label_col)
    if getattr(args, "bags_dir", None):
        from .data.disk import DiskBagDataset

        labels = args.labels or Path(args.bags_dir) / "labels.csv"
        return DiskBagDataset(args.bags_dir, labels, bag_col=args.bag_col, label_col=args.label_col)
    return load_benchmark(args.dataset, data_dir=args.data_dir, download=not args.no_download)


def _configs(args, dataset_name: str, compat: str | None = None):
    """Model/train configs and standardisation: Table 1 for benchmarks, then CLI overrides."""
    from dataclasses import replace

    from .model import PrototypeMILConfig, compat_config
    from .paper import TABLE1, paper_configs
    from .training import TrainConfig, compat_train_config

    if dataset_name in TABLE1:
        mconf, tconf = paper_configs(dataset_name)
    else:
        mconf, tconf = PrototypeMILConfig(), TrainConfig()
    m_over = {k: v for k, v in dict(
        n_prototypes=getattr(args, "prototypes", None),
        distance=getattr(args, "distance", None),
        pooling=tuple(args.pooling.split(",")) if getattr(args, "pooling", None) else None,
        lambda_w=getattr(args, "lambda_w", None),
        lambda_p=getattr(args, "lambda_p", None),
        lambda_d=getattr(args, "lambda_d", None),
    ).items() if v is not None}
    if getattr(args, "no_layer_norm", False):
        m_over["layer_norm"] = False
    t_over = {k: v for k, v in dict(
        epochs=getattr(args, "epochs", None),
        batch_size=getattr(args, "batch_size", None),
        lr_prototypes=getattr(args, "lr_prototypes", None),
        lr_classifier=getattr(args, "lr_classifier", None),
    ).items() if v is not None}
    standardization = getattr(args, "standardization", "feature")
    compat = compat or getattr(args, "compat", "none")
    if compat == "official":
        mconf, tconf = compat_config(mconf), compat_train_config(tconf)
        standardization = "instance"
    return replace(mconf, **m_over), replace(tconf, **t_over), standardization


#: The monotone variant's settings where the command line gives none: those of the unit-test
#: page (chosen on synthetic data, seeds 100-119, never on a benchmark; book/monotone.md).
MONOTONE_MODEL = {"n_prototypes": 32, "lambda_p": 0.0, "lambda_d": 0.0}
MONOTONE_TRAIN = {"epochs": 30, "lr_prototypes": 1e-2, "lr_classifier": 1e-2}


def _monotone_configs(args, mconf, tconf):
    """Table 1's configs made monotone, with :data:`MONOTONE_MODEL`/``_TRAIN`` unless overridden."""
    from dataclasses import replace

    from .model import monotone_config

    unset = lambda d: {k: v for k, v in d.items() if getattr(args, k.replace("n_", ""), None) is None}  # noqa: E731
    mconf = monotone_config(mconf, init="kmeans++", **unset(MONOTONE_MODEL))
    return mconf, replace(tconf, batch_size=4, **unset(MONOTONE_TRAIN))


def _estimator_from(args, dataset_name: str):
    from .estimator import PrototypeMILClassifier

    mconf, tconf, std = _configs(args, dataset_name)
    return PrototypeMILClassifier(
        **{k: v for k, v in mconf.to_dict().items() if k != "layer_norm_eps"},
        **{k: v for k, v in tconf.to_dict().items() if k not in ("betas", "eps")},
        standardization=std, device=args.device, backend=args.backend, random_state=args.seed, verbose=True,
        **({"chunk_size": args.chunk_size} if getattr(args, "chunk_size", None) else {}),
        autocast=None if getattr(args, "autocast", "none") == "none" else args.autocast,
    )


# ------------------------------------------------------------------ commands
def cmd_reproduce(args) -> int:
    from .evaluation.cv import (
        CVTask,
        cross_validate_estimator,
        cross_validate_many,
        stratified_folds,
        summarize,
    )
    from .data import load_benchmark
    from .evaluation.report import average_ranks, format_table, table2, write_atomic

    methods = _parse_methods(args.methods)
    if args.compat == "official" and PROTOTYPE_COMPAT not in methods:
        # For reproduce, --compat official adds the published code's rows beside the paper's.
        methods.append(PROTOTYPE_COMPAT)
    out = Path(args.out)
    data = {name: load_benchmark(name, data_dir=args.data_dir, download=not args.no_download)
            for name in args.datasets}
    folds = {name: stratified_folds(d.y, args.repeats, args.folds, random_state=args.seed) for name, d in data.items()}
    frames, timings = [], []
    for method in methods:
        t0 = time.perf_counter()
        if method in (PROTOTYPE, PROTOTYPE_COMPAT, PROTOTYPE_MONOTONE):
            # Every data set's folds in one call: compatible ones train as one batched program.
            compat = "official" if method == PROTOTYPE_COMPAT else "none"
            tasks = []
            for name, d in data.items():
                mconf, tconf, std = _configs(args, d.name, compat)
                if method == PROTOTYPE_MONOTONE:
                    mconf, tconf = _monotone_configs(args, mconf, tconf)
                tasks.append(CVTask(d.name, d.bags, d.y, folds[name], mconf, tconf, std, method))
            evaluations = ("final", "test_selected") if compat == "official" else ("final",)
            res = cross_validate_many(tasks, evaluations=evaluations, device=args.device, progress=not args.quiet,
                                      backend=args.backend)
        elif method == PROTOTYPE_TUNED:
            from .evaluation.cv import cross_validate_tuned

            parts, choices = [], []
            for name, d in data.items():
                mconf, tconf, std = _configs(args, d.name, "none")
                grid = [dict(lr_prototypes=tconf.lr_prototypes * k, lr_classifier=tconf.lr_classifier * k)
                        for k in TUNING_MULTIPLIERS]
                r, c = cross_validate_tuned(CVTask(d.name, d.bags, d.y, folds[name], mconf, tconf, std, method),
                                            grid, device=args.device, progress=not args.quiet,
                                            backend=args.backend)
                parts.append(r)
                choices.append(c)
            res = pd.concat(parts, ignore_index=True)
            write_atomic(out / "tuning_choices.csv", pd.concat(choices, ignore_index=True).to_csv(index=False))
        elif method == PROTOTYPE_BEST:
            from .evaluation.tuning import SearchBudget, nested_cross_validate

            budget = SearchBudget(random_state=args.seed)
            parts, choices = [], []
            for name, d in data.items():
                t1 = time.perf_counter()
                r, c = nested_cross_validate(d.bags, d.y, folds[name], budget, dataset=d.name, method=method,
                                             backend=args.backend, device=args.device)
                c["dataset_wall_seconds"] = time.perf_counter() - t1
                print(f"{method}: {d.name} {r.accuracy.mean():.3f} ({c['dataset_wall_seconds'].iloc[0]:.0f} s)",
                      file=sys.stderr)
                parts.append(r)
                choices.append(c)
            res = pd.concat(parts, ignore_index=True)
            write_atomic(out / "best_choices.csv", pd.concat(choices, ignore_index=True).to_csv(index=False))
        else:
            from .baselines import BASELINES

            res = pd.concat([
                cross_validate_estimator(d.bags, d.y, folds[name], BASELINES[method], dataset=d.name,
                                         method=method, progress=not args.quiet)
                for name, d in data.items()
            ], ignore_index=True)
        wall = time.perf_counter() - t0
        timings.append({"method": method, "datasets": " ".join(data), "wall_seconds": wall})
        final = res[res.evaluation == "final"]
        print(f"{method}: " + ", ".join(f"{n} {final[final.dataset == n].accuracy.mean():.3f}" for n in data)
              + f" (accuracy; {wall:.1f} s)", file=sys.stderr)
        frames.append(res)
    results = pd.concat(frames, ignore_index=True)
    write_atomic(out / "results.csv", results.to_csv(index=False))
    write_atomic(out / "summary.csv", summarize(results).to_csv(index=False))
    write_atomic(out / "timings.csv", pd.DataFrame(timings).to_csv(index=False))
    text = []
    for spread in ("se_repeats", "std_folds"):
        t = table2(results, spread=spread, include_reported=args.reported)
        text.append(format_table(t))
    if len(set(results.method)) > 1:
        ranks = average_ranks(results)
        text.append("average rank across data sets (1 = best, measured methods, final evaluation):\n"
                    + ranks.round(2).to_string())
    report = "\n\n".join(text) + "\n"
    write_atomic(out / "table2.txt", report)
    print(report)
    print(f"wrote {out / 'results.csv'}, summary.csv, timings.csv, table2.txt")
    return 0


def _parse_methods(spec: str) -> list[str]:
    names = [s.strip() for s in spec.split(",") if s.strip()]
    known = [PROTOTYPE, "prototype-compat", "prototype-tuned", "prototype-best", "prototype-monotone"]
    try:
        from .baselines import BASELINES

        known += list(BASELINES)
    except ImportError:
        BASELINES = {}
    if names == ["all"]:
        names = [PROTOTYPE, "prototype-compat", "prototype-tuned", *BASELINES]
    resolved = []
    for n in names:
        if n not in known:
            raise SystemExit(f"error: unknown method {n!r}; choose from {', '.join(known)} or 'all'.")
        resolved.append({"prototype-compat": PROTOTYPE_COMPAT, "prototype-tuned": PROTOTYPE_TUNED,
                         "prototype-best": PROTOTYPE_BEST, "prototype-monotone": PROTOTYPE_MONOTONE}.get(n, n))
    return resolved


def cmd_cv(args) -> int:
    from .evaluation.cv import cross_validate_prototype, stratified_folds, summarize
    from .evaluation.report import write_atomic

    data = _load(args)
    mconf, tconf, std = _configs(args, data.name)
    folds = stratified_folds(data.y, args.repeats, args.folds, random_state=args.seed)
    evaluations = ("final", "test_selected") if args.compat == "official" else ("final",)
    res = cross_validate_prototype(data.bags, data.y, folds, mconf, tconf, dataset=data.name,
                                   standardization=std, evaluations=evaluations, device=args.device, progress=True,
                                   backend=args.backend)
    summ = summarize(res)
    print(summ.to_string(index=False))
    if args.out:
        write_atomic(Path(args.out), res.to_csv(index=False))
        print(f"wrote {args.out}")
    return 0


def cmd_train(args) -> int:
    from .training.distributed import init_distributed

    # Under torchrun (WORLD_SIZE > 1) every process joins the group and trains on its share of each minibatch.
    rank, world = init_distributed(args.device)
    try:
        data = _load(args)
        clf = _estimator_from(args, data.name)
        if world > 1 or args.stream:
            clf.fit_streaming(data.bags, data.y)
        else:
            clf.fit(data.bags, data.y)
        if rank != 0:
            return 0  # every process holds the same model: one writes it
        path = clf.save(args.out)
    finally:
        if world > 1:
            import torch.distributed as dist

            dist.destroy_process_group()
    procs = f" with {world} processes" if world > 1 else ""
    print(f"trained on {data.n_bags} bags ({data.name}){procs}; training accuracy {clf.score(data.bags, data.y):.3f}; "
          f"saved to {path}")
    return 0


def cmd_predict(args) -> int:
    from .estimator import load_model
    from .evaluation.report import write_atomic

    clf = load_model(args.model)
    data = _load(args)
    proba = clf.predict_proba(data.bags)
    frame = pd.DataFrame({"bag": data.bag_ids, "predicted": clf.classes_[proba.argmax(1)]})
    for j, c in enumerate(clf.classes_):
        frame[f"proba_{c}"] = proba[:, j]
    text = frame.to_csv(index=False)
    if args.out:
        write_atomic(Path(args.out), text)
        print(f"wrote {len(frame)} predictions to {args.out}")
    else:
        sys.stdout.write(text)
    return 0


def cmd_datasets(args) -> int:
    from .data import BENCHMARKS, load_benchmark

    rows = []
    for name in BENCHMARKS:
        try:
            d = load_benchmark(name, data_dir=args.data_dir, download=args.download)
            s = d.summary()
            rows.append({"dataset": name, "status": "ok", "bags": s["bags"], "instances": s["instances"],
                         "features": s["features"], "source": d.source})
        except Exception as exc:  # noqa: BLE001 - report every data set, then fail
            rows.append({"dataset": name, "status": f"missing: {type(exc).__name__}", "source": str(exc)[:120]})
    print(pd.DataFrame(rows).to_string(index=False))
    return 0 if all(r["status"] == "ok" for r in rows) else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="minitorch-proto",
        description="Prototype multiple-instance learning (Yuksekgonul et al., 2019): reproduce, cross-validate, "
        "train and predict.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("reproduce", help="5 x 10-fold CV on the benchmarks; a table shaped like the paper's Table 2")
    p.add_argument("--datasets", nargs="+", default=["musk1", "musk2", "fox", "tiger", "elephant"])
    p.add_argument("--methods", default=PROTOTYPE,
                   help="comma-separated: prototype, prototype-compat, prototype-tuned, prototype-monotone, "
                   "prototype-best (nested "
                   "search + 5-seed ensemble; long), baseline names, or 'all' (all but prototype-best; default: "
                   "prototype)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--folds", type=int, default=10)
    p.add_argument("--out", default="results", help="output folder (default: results/)")
    p.add_argument("--reported", action="store_true", help="also list the other methods' figures quoted in the paper")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    _add_data_args(p, single=False)
    _add_model_args(p)
    p.set_defaults(func=cmd_reproduce)

    p = sub.add_parser("cv", help="repeated stratified CV of the prototype model on one data set")
    _add_data_args(p)
    _add_model_args(p)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--folds", type=int, default=10)
    p.add_argument("--out", default=None, help="CSV of per-fold results")
    p.set_defaults(func=cmd_cv)

    p = sub.add_parser("train", help="fit one model on a whole data set and save it")
    _add_data_args(p)
    _add_model_args(p)
    p.add_argument("--out", required=True, help="checkpoint path, e.g. model.pt")
    g = p.add_argument_group("large collections")
    g.add_argument("--stream", action="store_true",
                   help="train with the streaming trainer: bags read when needed, in bounded memory "
                   "(always on under torchrun --nproc_per_node N -m minitorch_proto train ...)")
    g.add_argument("--chunk-size", type=int, default=None,
                   help="instances compared with the prototypes at a time (65536): bounds peak memory")
    g.add_argument("--autocast", default="none", choices=["none", "bf16"],
                   help="bf16 autocast for the distance products (tensor engine or --stream)")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("predict", help="predict bags with a saved model")
    p.add_argument("--model", required=True, help="checkpoint written by 'train'")
    _add_data_args(p)
    p.add_argument("--out", default=None, help="CSV of predictions (default: standard output)")
    p.set_defaults(func=cmd_predict)

    p = sub.add_parser("datasets", help="list the benchmarks and where they are found")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--download", action="store_true", help="download the missing ones into the cache")
    p.set_defaults(func=cmd_datasets)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
