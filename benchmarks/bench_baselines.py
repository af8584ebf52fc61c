"""Neural baselines: all folds trained together (``fit_many``) against one fold at a time.

For each baseline and data set, the same folds (the first ``--folds`` of the 5 x 10
protocol, feature standardisation fitted on each training fold) are trained for
``--epochs`` epochs both ways; the one-at-a-time time is measured on ``--sample`` folds and
scaled to all of them. Both scale linearly with epochs, so the full protocol's time
(50 epochs, 50 folds) is extrapolated as ``seconds * 50 / epochs * 50 / folds``, printed as
``full_min``, and labelled as an extrapolation. ``--backend`` picks ``fit_many``'s backend
(``compiled``, the CPU default since issue 17's second round, or the stacked ``tensor`` one);
``--jobs 2`` gives the compiled backend two threads (take both CPU slots). Each method is warmed
up untimed first (one epoch on two folds both ways): the first ``fit_many`` pays its compiled
loop's compile or cache load, which a short run's extrapolation had multiplied by 250 (attention's
ratio read 0.84 cold against 2.58 warm). The last line is a JSON object.

Usage::

    MINITORCH_PROTO_DATA=../shared/data/mil .venv/bin/python benchmarks/bench_baselines.py --quick
"""
from __future__ import annotations

import json
import time

import numpy as np
import torch

from minitorch_proto.baselines import BASELINES
from minitorch_proto.baselines.batched_fit import fit_many
from minitorch_proto.data import load_benchmark
from minitorch_proto.evaluation.cv import stratified_folds
from minitorch_proto.preprocessing import BagStandardizer
from script_args import FIVE, Parser, count  # this folder is on sys.path

NEURAL = ["attention", "gated_attention", "mi_net_max", "mi_net_mean", "MI_net_max", "MI_net_mean"]


def _train_sets(name: str, n_folds: int):
    data = load_benchmark(name)
    folds = stratified_folds(data.y, 5, 10, random_state=0)[:n_folds]
    sets = []
    for f in folds:
        std = BagStandardizer("feature").fit([data.bags[i] for i in f.train])
        sets.append((std.transform([data.bags[i] for i in f.train]), data.y[f.train]))
    return sets, [f.seed for f in folds]


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["musk1", "fox"], choices=FIVE, metavar="NAME",
                        help=f"benchmarks ({', '.join(FIVE)}; default: musk1 fox)")
    parser.add_argument("--methods", nargs="+", default=NEURAL, choices=NEURAL, metavar="NAME",
                        help=f"neural baselines ({', '.join(NEURAL)}; default: all)")
    parser.add_argument("--folds", type=count(1), default=50)
    parser.add_argument("--epochs", type=count(1), default=2)
    parser.add_argument("--sample", type=count(1), default=3, help="folds timed one at a time")
    parser.add_argument("--threads", type=count(1), default=1)
    parser.add_argument("--jobs", type=count(1), default=1, help="fit_many n_jobs (threads of the compiled backend)")
    parser.add_argument("--backend", default="auto", choices=["auto", "compiled", "tensor"])
    parser.add_argument("--quick", action="store_true", help="Musk1 only, 10 folds, 1 epoch")
    args = parser.parse_args()
    if args.quick:
        args.datasets, args.folds, args.epochs = ["musk1"], 10, 1
    torch.set_num_threads(args.threads)
    rows = []
    for name in args.datasets:
        sets, seeds = _train_sets(name, args.folds)
        for method in args.methods:
            warm = BASELINES[method](0).set_params(n_epochs=1, n_threads=args.threads)  # untimed: first-use costs
            fit_many(warm, sets[:2], seeds[:2], n_threads=args.threads, n_jobs=args.jobs, backend=args.backend)
            BASELINES[method](0).set_params(n_epochs=1, n_threads=args.threads).fit(*sets[0])
            est = BASELINES[method](0).set_params(n_epochs=args.epochs, n_threads=args.threads)
            t0 = time.perf_counter()
            fit_many(est, sets, seeds, n_threads=args.threads, n_jobs=args.jobs, backend=args.backend)
            batched = time.perf_counter() - t0
            t0 = time.perf_counter()
            k = min(args.sample, len(sets))
            for (bags, y), seed in zip(sets[:k], seeds[:k]):
                BASELINES[method](seed).set_params(n_epochs=args.epochs, n_threads=args.threads).fit(bags, y)
            single = (time.perf_counter() - t0) / k * len(sets)
            scale = 50 / args.epochs * 50 / len(sets)
            rows.append(dict(dataset=name, method=method, folds=len(sets), epochs=args.epochs, jobs=args.jobs,
                             backend=args.backend,
                             one_at_a_time_s=round(single, 2), batched_s=round(batched, 2),
                             ratio=round(single / batched, 2),
                             full_min_one_at_a_time_extrapolated=round(single * scale / 60, 1),
                             full_min_batched_extrapolated=round(batched * scale / 60, 1)))
            print("  ".join(f"{k}={v}" for k, v in rows[-1].items()), flush=True)
    print(json.dumps({"rows": rows, "median_ratio": float(np.median([r["ratio"] for r in rows]))}))


if __name__ == "__main__":
    main()
