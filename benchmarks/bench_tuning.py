"""Successive halving two ways: scikit-learn's HalvingRandomSearchCV vs the batched search.

Both search the same grid (:data:`minitorch_proto.evaluation.tuning.GRID`) with the same
budget on the training bags of one outer fold of a benchmark: ``n_candidates`` points, factor
3, epochs as the resource (up to ``max_epochs``), 3 stratified inner folds. scikit-learn fits
one estimator per candidate and inner fold, one after another; the batched search trains every
candidate of one architecture and every inner fold in one program
(:func:`~minitorch_proto.training.train_batched`). Prints both wall times and their ratio.

    python benchmarks/bench_tuning.py --dataset musk1 --candidates 9 --max-epochs 30

``--phases`` instead times the nested protocol's phases with the default budget on one
repetition of 10-fold CV of one data set (run it on one core), before and after the speed-ups
that leave every number unchanged: scoring the inner validation checkpoints with scikit-learn's
``roc_auc_score`` vs :func:`~minitorch_proto.evaluation.metrics.binary_auc` (the same floats),
and successive halving with every rung from scratch vs survivors trained on
(``warm_start``; the same choices, checked here). The Manhattan kernel's branch-free gradient
has no switch; its before/after figures are in the README::

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/bench_tuning.py --dataset fox --phases
"""
from __future__ import annotations

import time

import numpy as np
from sklearn.experimental import enable_halving_search_cv  # noqa: F401
from sklearn.model_selection import HalvingRandomSearchCV, StratifiedKFold

from minitorch_proto.data import load_benchmark
from minitorch_proto.estimator import PrototypeMILClassifier
from minitorch_proto.evaluation.cv import stratified_folds
from minitorch_proto.evaluation.tuning import GRID, SearchBudget, grid_size, halving_schedule, search_many
from script_args import FIVE, Parser, count  # this folder is on sys.path


def phases(dataset: str) -> None:
    """Per-phase seconds of the nested protocol (default budget, 1 x 10 CV), before and after."""
    from sklearn.metrics import roc_auc_score

    from minitorch_proto.evaluation import metrics, tuning

    d = load_benchmark(dataset, download=False)
    y = np.asarray(d.y)
    folds = stratified_folds(y, 1, 10)
    budget = SearchBudget()
    scored: list[tuple[np.ndarray, np.ndarray]] = []
    spent = {"scoring": 0.0}
    real_scores = tuning.scores_from_proba

    def recording(y_true, proba):
        t0 = time.perf_counter()
        out = real_scores(y_true, proba)
        spent["scoring"] += time.perf_counter() - t0
        scored.append((np.asarray(y_true), proba))
        return out

    tuning.scores_from_proba = recording
    try:
        runs = {}
        for warm in (False, True):
            spent["scoring"] = 0.0
            scored.clear()
            t0 = time.perf_counter()
            found = search_many(d.bags, y, [f.train for f in folds], [f.seed for f in folds], budget, warm_start=warm)
            runs[warm] = (time.perf_counter() - t0, spent["scoring"], found)
    finally:
        tuning.scores_from_proba = real_scores
    same = all(a.chosen == b.chosen and a.inner_score == b.inner_score for a, b in zip(runs[False][2], runs[True][2]))
    t0 = time.perf_counter()
    sk = [float(roc_auc_score(yt == 1, p[:, 1])) for yt, p in scored]
    sk_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    ours = [metrics.binary_auc(yt == 1, p[:, 1]) for yt, p in scored]
    our_seconds = time.perf_counter() - t0
    assert np.array_equal(np.array(sk), np.array(ours), equal_nan=True)
    t0 = time.perf_counter()
    tuning.fit_ensembles(d.bags, y, [f.train for f in folds], [f.test for f in folds], [r.chosen for r in runs[True][2]],
                         [f.seed for f in folds], budget.n_seeds)
    refit = time.perf_counter() - t0
    cold_train = runs[False][0] - runs[False][1]
    warm_train = runs[True][0] - runs[True][1]
    rows = [("scoring checkpoints (AUC)", sk_seconds, our_seconds),
            ("training the rungs", cold_train, warm_train),
            ("refit (5-seed ensembles)", refit, refit)]
    print(f"{dataset}, 1 x 10 CV, default budget ({budget.describe()}); {len(scored)} checkpoint scores")
    print(f"{'phase':28s} {'before s':>9s} {'after s':>9s} {'ratio':>6s}")
    for name, before, after in rows + [("total", sum(r[1] for r in rows), sum(r[2] for r in rows))]:
        print(f"{name:28s} {before:9.1f} {after:9.1f} {before / after:6.2f}")
    print(f"same choices and inner scores with and without warm start: {same}; AUCs equal bit for bit: True")


def main(argv=None) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="musk1", choices=FIVE)
    p.add_argument("--candidates", type=count(1), default=9)
    p.add_argument("--max-epochs", type=count(1), default=30)
    p.add_argument("--phases", action="store_true", help="time the nested protocol's phases before and after")
    args = p.parse_args(argv)
    if args.phases:
        phases(args.dataset)
        return 0
    d = load_benchmark(args.dataset, download=False)
    fold = stratified_folds(d.y, 1, 10)[0]
    bags, y = [d.bags[i] for i in fold.train], np.asarray(d.y)[fold.train]
    budget = SearchBudget(n_candidates=args.candidates, max_epochs=args.max_epochs, n_seeds=1)
    schedule = halving_schedule(budget, grid_size(GRID))  # as it runs: more --candidates than points draws all
    print(f"{args.dataset}, one outer training fold ({len(bags)} bags); rungs {schedule}, 3 inner folds")

    # Untimed: the compiled loops' compile or cache load, which a short search would otherwise carry.
    search_many(bags, y, [np.arange(len(bags))], [fold.seed], SearchBudget(n_candidates=2, max_epochs=2,
                                                                           eval_every=1, n_seeds=1))
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
