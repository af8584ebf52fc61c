"""Run the ladder of notebook 08 (evaluation.ladder) and freeze its per-fold results and table.

Usage (from the repository root; the fixed rungs take about seven minutes of one core per
repetition for all five data sets, the nested rung about four and a half minutes on two cores)::

    minitorch-proto reproduce --methods prototype-best --repeats 5 --out results_best
    python benchmarks/run_ladder.py --repeats 5 --nested-from results_best --freeze

``--nested-from`` reuses the output folder of ``minitorch-proto reproduce --methods
prototype-best --out results_best`` run with the same ``--repeats`` and ``--seed`` (the same
folds): its per-fold rows become the last rung and its ``best_choices.csv`` the chosen
settings, instead of searching again; without it the nested rung is run here (and the choices
are not kept, so ``--freeze`` requires it, with all five data sets). ``--freeze`` writes ``ladder_results``,
``ladder_table`` and ``ladder_choices`` together (all three or none), each with its provenance
(command, commit and date; :func:`~minitorch_proto.book.frozen.write_frozen`).
"""
from __future__ import annotations

import shlex
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from minitorch_proto.data import load_benchmark
from minitorch_proto.evaluation.cv import stratified_folds
from minitorch_proto.evaluation.ladder import LADDER_STEPS, NESTED_STEP, ladder_table, run_ladder
from minitorch_proto.outputs import write_atomic, write_together

sys.path.insert(0, str(Path(__file__).resolve().parent))
from script_args import FIVE, Parser, count, freeze_commit, input_file, output_file, seed  # noqa: E402

#: The files of a --nested-from folder this script reads.
NESTED_FILES = ("results.csv", "best_choices.csv", "timings.csv")

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
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", default=list(FIVE), choices=FIVE, metavar="NAME",
                   help=f"benchmarks to run ({', '.join(FIVE)}; default: all five, which --freeze requires)")
    p.add_argument("--repeats", type=count(1), default=5, help="repetitions of 10-fold CV (default: 5)")
    p.add_argument("--seed", type=seed, default=0, help="random_state of the folds (default: 0)")
    p.add_argument("--nested-from", default=None, help="--out folder of reproduce --methods prototype-best "
                   "(required by --freeze: the nested rung's rows and its choices come from that one run)")
    p.add_argument("--freeze", action="store_true", help="write the frozen tables (package data)")
    p.add_argument("--results-out", type=output_file, default=None,
                   help="also write the per-fold results of the rungs run here (CSV)")
    p.add_argument("--no-nested", action="store_true", help="run the fixed rungs only")
    p.add_argument("--note", default="", help="appended to the frozen tables' descriptions (e.g. how they were timed)")
    p.add_argument("--fixed-from", nargs="+", type=input_file, default=None,
                   help="per-fold results of the fixed rungs from earlier --results-out runs (same --repeats and "
                   "--seed; e.g. one per data set, run side by side), instead of running them again")
    args = p.parse_args(argv)
    if args.fixed_from:
        args.fixed_from = [str(f) for f in args.fixed_from]
    if args.nested_from and args.no_nested:
        p.error("--nested-from and --no-nested contradict each other")
    if args.nested_from:
        absent = [n for n in NESTED_FILES if not (Path(args.nested_from) / n).is_file()]
        if absent:
            p.error(f"--nested-from {args.nested_from} holds no {', '.join(absent)} of a reproduce run")
    if args.freeze:
        # The three tables replace the book's whole ladder: a part of it, or rows without the choices of the
        # same nested run, would leave page 08 pairing tables of different runs.
        if args.no_nested:
            p.error("--freeze needs the nested rung; --no-nested would freeze a ladder without it")
        if sorted(args.datasets) != sorted(FIVE):
            p.error(f"--freeze needs all five data sets ({', '.join(FIVE)}); got {', '.join(args.datasets)}")
        if not args.nested_from:
            p.error("--freeze needs --nested-from (a nested rung run here keeps no choices to freeze beside it)")
        if args.repeats != 5:  # the book ranks the ladder among 5 x 10 rows
            p.error(f"--freeze needs the whole protocol, --repeats 5; got {args.repeats}")
        commit = freeze_commit(p)  # before the run: the tables name the code that ran, which a reader can check out
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
            p.error(f"{' '.join(args.fixed_from)} lack rungs {missing}")
        _same_folds(p, results, folds, " ".join(args.fixed_from))
    else:
        results = run_ladder({n: (d.bags, d.y) for n, d in data.items()}, folds, steps=steps,
                             progress=lambda s: print(f"[{time.perf_counter() - t0:6.0f} s] {s}", file=sys.stderr,
                                                      flush=True))
    if args.results_out:
        write_atomic(args.results_out, results.to_csv(index=False))
    if args.nested_from:
        nested = pd.read_csv(Path(args.nested_from) / "results.csv")
        choices = pd.read_csv(Path(args.nested_from) / "best_choices.csv")
        choices = choices[choices.dataset.isin(args.datasets) & (choices.repeat <= args.repeats)]
        nested = nested[(nested.method == NESTED_METHOD) & nested.dataset.isin(args.datasets)
                        & (nested.repeat <= args.repeats)].copy()
        missing = set(args.datasets) - set(nested.dataset)
        if missing:
            p.error(f"{args.nested_from} has no {NESTED_METHOD!r} rows for {sorted(missing)}")
        _same_folds(p, nested, folds, args.nested_from)
        nested["method"] = NESTED_STEP
        results = pd.concat([results, nested[results.columns]], ignore_index=True)
    table = ladder_table(results)
    print(table.round(3).to_string())
    if args.freeze:
        from minitorch_proto.book.frozen import frozen_dir, write_frozen

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
        # The three tables are made in a scratch folder, then published together: all of them or none.
        with tempfile.TemporaryDirectory() as scratch:
            # Rows read from --fixed-from were timed where they ran (fit_seconds), not here.
            # The commit read before the run: an edit or a commit during it would otherwise be recorded.
            write_frozen(results, "ladder_results", command=command, description=f"Ladder per-fold results ({what})",
                         wall_seconds=None if args.fixed_from else round(time.perf_counter() - t0), folder=scratch,
                         commit=commit, **extra)
            write_frozen(table, "ladder_table", command=command, description=f"Ladder table ({what})", folder=scratch,
                         commit=commit)
            write_frozen(choices, "ladder_choices", command=command, folder=scratch, commit=commit,
                         description=f"Settings each outer fold's nested search chose ({what})")
            target = Path(str(frozen_dir()))
            write_together({target / f.name: f.read_bytes() for f in sorted(Path(scratch).iterdir())})
    return 0


def _same_folds(p: Parser, results: pd.DataFrame, folds: dict, source: str) -> None:
    """:func:`check_same_folds` as a usage error (exit status 2)."""
    try:
        check_same_folds(results, folds, source)
    except SystemExit as exc:
        p.error(str(exc.code).removeprefix("error: "))


def _datasets_in(path: str, wanted: list[str]) -> list[str]:
    """The data sets of ``wanted`` that a --fixed-from file holds, in ``wanted``'s order."""
    held = set(pd.read_csv(path, usecols=["dataset"])["dataset"])
    return [n for n in wanted if n in held]


if __name__ == "__main__":
    raise SystemExit(main())
