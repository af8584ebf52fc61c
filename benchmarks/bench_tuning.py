"""Successive halving two ways: scikit-learn's HalvingRandomSearchCV vs the batched search.

Both search the same grid (:data:`minitorch_proto.evaluation.tuning.GRID`) with the same
budget on the training bags of one outer fold of a benchmark: ``n_candidates`` points, factor
3, epochs as the resource (up to ``max_epochs``), 3 stratified inner folds. scikit-learn fits
one estimator per candidate and inner fold, one after another; the batched search trains every
candidate of one architecture and every inner fold in one program
(:func:`~minitorch_proto.training.train_batched`). Prints both wall times and their ratio.

    python benchmarks/bench_tuning.py --dataset musk1 --candidates 9 --max-epochs 30
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.experimental import enable_halving_search_cv  # noqa: F401
from sklearn.model_selection import HalvingRandomSearchCV, StratifiedKFold

from minitorch_proto.data import load_benchmark
from minitorch_proto.estimator import PrototypeMILClassifier
from minitorch_proto.evaluation.cv import stratified_folds
from minitorch_proto.evaluation.tuning import GRID, SearchBudget, halving_schedule, search_many


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="musk1")
    p.add_argument("--candidates", type=int, default=9)
    p.add_argument("--max-epochs", type=int, default=30)
    args = p.parse_args(argv)
    d = load_benchmark(args.dataset, download=False)
    fold = stratified_folds(d.y, 1, 10)[0]
    bags, y = [d.bags[i] for i in fold.train], np.asarray(d.y)[fold.train]
    budget = SearchBudget(n_candidates=args.candidates, max_epochs=args.max_epochs, n_seeds=1)
    schedule = halving_schedule(budget)
    print(f"{args.dataset}, one outer training fold ({len(bags)} bags); rungs {schedule}, 3 inner folds")

    t0 = time.perf_counter()
    found = search_many(bags, y, [np.arange(len(bags))], [fold.seed], budget)[0]
    batched = time.perf_counter() - t0
    print(f"batched search: {batched:.1f} s, chose {found.chosen.label()}")

    grid = {k: [list(v) if isinstance(v, tuple) and k == "pooling" else v for v in vals] for k, vals in GRID.items()}
    search = HalvingRandomSearchCV(
        PrototypeMILClassifier(device="cpu"), grid, n_candidates=args.candidates, factor=budget.factor,
        resource="epochs", min_resources=schedule[0][1], max_resources=args.max_epochs,
        cv=StratifiedKFold(budget.inner_folds, shuffle=True, random_state=0), scoring="roc_auc", random_state=0,
        refit=False,
    )
    t0 = time.perf_counter()
    search.fit(bags, y)
    sk = time.perf_counter() - t0
    print(f"HalvingRandomSearchCV: {sk:.1f} s, chose {search.best_params_}")
    print(f"ratio (scikit-learn / batched): {sk / batched:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
