"""Run the ladder of notebook 08 (evaluation.ladder) and freeze its per-fold results and table.

Usage (from the repository root; the fixed rungs take about seven minutes of one core per
repetition for all five data sets, the nested rung about four and a half minutes on two cores)::

    minitorch-proto reproduce --methods prototype-best --repeats 5 --out results_best
    python benchmarks/run_ladder.py --repeats 5 --nested-from results_best --freeze

``--nested-from`` reuses the output folder of ``minitorch-proto reproduce --methods
prototype-best --out results_best`` run with the same ``--repeats`` and ``--seed`` (the same
folds): its per-fold rows become the last rung and its ``best_choices.csv`` the chosen
settings, instead of searching again; without it the nested rung is run here (and the choices
are not kept). ``--freeze`` writes ``ladder_results``, ``ladder_table`` and ``ladder_choices`` with :func:`~minitorch_proto.book.frozen.write_frozen`
(command, commit and date recorded beside them).
"""
from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import pandas as pd

from minitorch_proto.data import load_benchmark
from minitorch_proto.evaluation.cv import stratified_folds
from minitorch_proto.evaluation.ladder import LADDER_STEPS, NESTED_STEP, ladder_table, run_ladder

NESTED_METHOD = "prototype (tuned ensemble)"  # methods.PROTOTYPE_BEST


def check_same_folds(results: pd.DataFrame, folds: dict, source: str) -> None:
    """Refuse rows read from ``source`` that were not made on ``folds`` (another --seed or --repeats):
    the table pairs rungs fold by fold, and rows of other folds would pair silently."""
    for name, fs in folds.items():
        want = {(f.repeat, f.fold): (f.seed, len(f.train), len(f.test)) for f in fs}
        rows = results[results.dataset == name]
        # Every rung on every fold, once: a file of fewer repetitions (or a rung missing folds) had passed.
        for rung, g in rows.groupby("method", sort=False):
            have = list(zip(g.repeat, g.fold))
            if len(have) != len(set(have)) or set(have) != set(want):
                raise SystemExit(f"error: {source}: {name} {rung!r} has {len(set(have))} distinct of the "
                                 f"{len(want)} folds of --repeats {max(r for r, _ in want)} (or a fold twice): run "
                                 "with the same --repeats and --seed.")
        got = zip(zip(rows.repeat, rows.fold), zip(rows.seed, rows.n_train, rows.n_test))
        bad = [(key, have) for key, have in got if want.get(key) != tuple(int(v) for v in have)]
        if bad:
            (rep, fold), have = bad[0]
            raise SystemExit(f"error: {source}: {name} repeat {rep} fold {fold} has (model seed, n_train, n_test) "
                             f"{tuple(int(v) for v in have)}, not {want.get((rep, fold))} of these folds: run with "
                             "the same --repeats and --seed.")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", default=["musk1", "musk2", "fox", "tiger", "elephant"])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--nested-from", default=None, help="--out folder of reproduce --methods prototype-best")
    p.add_argument("--freeze", action="store_true", help="write the frozen tables (package data)")
    p.add_argument("--results-out", default=None, help="also write the per-fold results of the rungs run here (CSV)")
    p.add_argument("--no-nested", action="store_true", help="run the fixed rungs only")
    p.add_argument("--note", default="", help="appended to the frozen tables' descriptions (e.g. how they were timed)")
    p.add_argument("--fixed-from", nargs="+", default=None,
                   help="per-fold results of the fixed rungs from earlier --results-out runs (same --repeats and "
                   "--seed; e.g. one per data set, run side by side), instead of running them again")
    args = p.parse_args(argv)
    data = {n: load_benchmark(n, download=False) for n in args.datasets}
    folds = {n: stratified_folds(d.y, args.repeats, 10, random_state=args.seed) for n, d in data.items()}
    steps = [s for s, _ in LADDER_STEPS] + ([] if args.nested_from or args.no_nested else [NESTED_STEP])
    t0 = time.perf_counter()
    if args.fixed_from:
        results = pd.concat([pd.read_csv(f) for f in args.fixed_from], ignore_index=True)
        results = results[results.dataset.isin(args.datasets) & results.method.isin(steps)
                          & (results.repeat <= args.repeats)].reset_index(drop=True)
        have = set(zip(results.dataset, results.method))
        missing = [(n, s) for n in args.datasets for s in steps if (n, s) not in have]
        if missing:
            raise SystemExit(f"error: {' '.join(args.fixed_from)} lack rungs {missing}.")
        check_same_folds(results, folds, " ".join(args.fixed_from))
    else:
        results = run_ladder({n: (d.bags, d.y) for n, d in data.items()}, folds, steps=steps,
                             progress=lambda s: print(f"[{time.perf_counter() - t0:6.0f} s] {s}", file=sys.stderr,
                                                      flush=True))
    if args.results_out:
        results.to_csv(args.results_out, index=False)
    if args.nested_from:
        nested = pd.read_csv(Path(args.nested_from) / "results.csv")
        choices = pd.read_csv(Path(args.nested_from) / "best_choices.csv")
        choices = choices[choices.dataset.isin(args.datasets) & (choices.repeat <= args.repeats)]
        nested = nested[(nested.method == NESTED_METHOD) & nested.dataset.isin(args.datasets)
                        & (nested.repeat <= args.repeats)].copy()
        missing = set(args.datasets) - set(nested.dataset)
        if missing:
            raise SystemExit(f"error: {args.nested_from} has no {NESTED_METHOD!r} rows for {sorted(missing)}.")
        check_same_folds(nested, folds, args.nested_from)
        nested["method"] = NESTED_STEP
        results = pd.concat([results, nested[results.columns]], ignore_index=True)
    table = ladder_table(results)
    print(table.round(3).to_string())
    if args.freeze:
        from minitorch_proto.book.frozen import write_frozen

        command = "python benchmarks/run_ladder.py " + shlex.join(sys.argv[1:] if argv is None else argv)
        extra = {}
        if args.fixed_from:
            # Each file's data sets as they are in it, so the recorded commands run as written.
            command = "".join(f"python benchmarks/run_ladder.py --repeats {args.repeats} --seed {args.seed} --no-nested "
                              f"--datasets {' '.join(_datasets_in(f, args.datasets))} --results-out {shlex.quote(f)}; "
                              for f in args.fixed_from) + command
        if args.nested_from:
            # The nested rung came from an earlier run: name it too (folder shown as given, relative).
            command = (f"minitorch-proto reproduce --methods prototype-best --repeats {args.repeats} --seed {args.seed} "
                       f"--out {shlex.quote(args.nested_from)}; " + command)
            timings = pd.read_csv(Path(args.nested_from) / "timings.csv")
            extra["nested_wall_seconds"] = round(float(timings["wall_seconds"].sum()))
        what = f"{args.repeats} x 10-fold CV, {', '.join(args.datasets)}" + (f"; {args.note}" if args.note else "")
        # Rows read from --fixed-from were timed where they ran (fit_seconds), not here.
        write_frozen(results, "ladder_results", command=command, description=f"Ladder per-fold results ({what})",
                     wall_seconds=None if args.fixed_from else round(time.perf_counter() - t0), **extra)
        write_frozen(table, "ladder_table", command=command, description=f"Ladder table ({what})")
        if args.nested_from:
            write_frozen(choices, "ladder_choices", command=command,
                         description=f"Settings each outer fold's nested search chose ({what})")
    return 0


def _datasets_in(path: str, wanted: list[str]) -> list[str]:
    """The data sets of ``wanted`` that a --fixed-from file holds, in ``wanted``'s order."""
    held = set(pd.read_csv(path, usecols=["dataset"])["dataset"])
    return [n for n in wanted if n in held]


if __name__ == "__main__":
    raise SystemExit(main())
