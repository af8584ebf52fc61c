"""Regenerate the frozen table ``measured_results`` (12 methods, 5 x 10 CV) and time each method.

One command does the whole job::

    MINITORCH_PROTO_DATA=../shared/data/mil .venv/bin/python benchmarks/reproduce_all.py --freeze

It runs ``minitorch-proto reproduce --methods <MEASURED> --out <folder>`` (``methods.MEASURED``: the
table's rows, which are ``--methods all`` less the recommended and monotone rows, frozen in tables of
their own; all cores; about half an hour on two), then prints the per-method wall times beside the
previous frozen table's one-fold-at-a-time fit times, with their ratio, and (``--freeze``) writes the new per-fold
results as ``measured_results`` with the command, the commit of the code that ran, the machine's
core count and each method's wall time. ``--from <folder>`` reuses a finished ``reproduce`` output
instead of running it again: ``--freeze`` then takes the code's commit from the folder's ``run.json``
(``--commit`` for a folder without one), records the ``--from`` command, and refuses a folder short of
every method x five data sets x 5 x 10 folds, with a fold that has no score, or whose run.json records
settings other than ``reproduce``'s defaults (another seed, epochs or rates). The last line is a JSON object.

Beside them it prints the wall time of the same method in the run that made the table being
replaced (``previous_s``, from its provenance file's ``wall_seconds``) and the speed-up since
(``previous / now``), so a change to any method's code shows in the next regeneration.

The one-at-a-time reference of a baseline is the sum of ``fit_seconds`` over the previous
table's folds (wave 1 trained every baseline fold alone, on one core); once that table has been
replaced, the reference is carried over from its provenance file (``one_at_a_time_seconds``), so
later runs keep comparing with the same baseline. The prototype rows have no such reference (they
were always trained together), so they get no ratio.
"""
from __future__ import annotations

import json
import re
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from minitorch_proto import methods
from minitorch_proto.about import code_version
from minitorch_proto.book.frozen import GIT_HASH, load_frozen, provenance, write_frozen

sys.path.insert(0, str(Path(__file__).resolve().parent))
from script_args import (Parser, commit_hash, freeze_commit, full_run_gap, refuse_nan,  # noqa: E402
                         reproduce_defaults_gap, run_record)

COMMAND = "python benchmarks/reproduce_all.py --freeze"
#: The folds of the run this script makes: ``reproduce``'s defaults (it passes no --repeats or --folds).
REPEATS, FOLDS = 5, 10


def _previous_reference(meta: dict) -> dict[str, float]:
    """Per-method one-at-a-time seconds (all five data sets, 50 folds) of the table being replaced."""
    if "one_at_a_time_seconds" in meta:
        return {k: float(v) for k, v in meta["one_at_a_time_seconds"].items()}
    old = load_frozen("measured_results")
    old = old[old.evaluation == "final"]
    return {m: float(g.fit_seconds.sum()) for m, g in old.groupby("method") if not m.startswith("prototype")}


def _previous_walls(meta: dict) -> tuple[dict[str, float], str | None]:
    """Per-method wall seconds of the run that made the current table, and that run's commit."""
    return {k: float(v) for k, v in meta.get("wall_seconds", {}).items()}, meta.get("commit")


def _recorded_commit(p: Parser, folder: Path, given: str | None, freeze: bool) -> str | None:
    """The commit of the code that made ``folder``: its run.json's, else ``--commit``; with ``--freeze`` a plain
    hash is required (a table must name code a reader can check out)."""
    record = folder / "run.json"
    try:
        run = run_record(folder)
    except ValueError as exc:
        p.error(str(exc))
    recorded = run.get("commit") if run else None
    # A record without settings (an older reproduce's) cannot show them: --commit vouches for it, as for its code.
    gap = reproduce_defaults_gap(run) if run and freeze and not (given and "settings" not in run) else None
    if gap:  # the table holds the defaults' rows: a run with another seed, epochs or rates is not them
        p.error(f"{folder} was {gap}")
    if recorded and not re.fullmatch(GIT_HASH + r"(\+dirty)?", str(recorded)):
        recorded = None  # a run made outside a git checkout names no commit: --commit does
    # run.json holds 12 hex digits and a note may give 7: the same commit when one begins the other.
    if recorded and given and not (str(recorded).startswith(given) or given.startswith(str(recorded))):
        p.error(f"--commit {given} contradicts {record}, which names {recorded}")
    commit = recorded or given  # the run's own record wins (with its "+dirty", which --freeze refuses)
    if not freeze:
        return commit
    if commit is None:
        p.error(f"{folder} has no run.json naming its code; give --commit")
    try:
        return commit_hash(commit, str(record) if recorded else "--commit")
    except ValueError as exc:
        p.error(str(exc))


def main(argv=None) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="results_all", help="reproduce's output folder (default: results_all/)")
    p.add_argument("--from", dest="from_dir", default=None,
                   help="a finished reproduce output holding the table's methods")
    p.add_argument("--commit", default=None,
                   help="with --from: the commit of the code that made it, when the folder's run.json names none "
                        "(--freeze refuses a run whose code it cannot name)")
    p.add_argument("--freeze", action="store_true", help="write the frozen table measured_results")
    p.add_argument("--note", default=None, help="with --freeze: a line for the provenance file")
    args = p.parse_args(argv)
    if args.commit and not args.from_dir:
        p.error("--commit goes with --from (a run made here records its own commit)")
    if not args.from_dir:
        # Before the half-hour run: a dirty tree is refused now, and no edit made meanwhile is recorded (--from: the
        # folder's run.json names its code, read below).
        commit = freeze_commit(p) if args.freeze else code_version()
    meta = provenance("measured_results")
    reference = _previous_reference(meta)
    previous, previous_commit = _previous_walls(meta)
    if args.from_dir:
        out = Path(args.from_dir)
        if not (out / "results.csv").exists() or not (out / "timings.csv").exists():
            p.error(f"{out} holds no results.csv and timings.csv of a reproduce run")
        command = f"python benchmarks/reproduce_all.py --from {shlex.quote(args.from_dir)} --freeze"
        total = None
    else:
        out, command = Path(args.out), COMMAND
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "minitorch_proto", "reproduce", "--methods", ",".join(methods.MEASURED), "--quiet",
               "--out", str(out)]
        if subprocess.run(cmd).returncode != 0:
            print("error: the reproduce run failed; nothing frozen", file=sys.stderr)
            return 1
        total = time.perf_counter() - t0
    # A --from folder may hold more rows (reproduce --methods all): the table keeps its own.
    labels = [methods.get(key).label for key in methods.MEASURED]
    results, timings = pd.read_csv(out / "results.csv"), pd.read_csv(out / "timings.csv")
    lacking = [c for c in ("method", "dataset", "evaluation", "repeat", "fold") if c not in results.columns]
    if lacking or "method" not in timings.columns or "wall_seconds" not in timings.columns:
        p.error(f"{out} is not a reproduce run: results.csv lacks {lacking or 'nothing'}, timings.csv needs method "
                "and wall_seconds")
    results = results[results["method"].isin(labels)].reset_index(drop=True)
    timings = timings[timings["method"].isin(labels)].reset_index(drop=True)
    if results.empty:
        p.error(f"{out} holds none of the table's methods ({', '.join(methods.MEASURED)})")
    if args.freeze:
        # The table replaces the whole measured_results: a part of the run would drop rows from the book.
        gap = full_run_gap(results, labels, REPEATS, FOLDS)
        if gap:
            p.error(f"{out} is {gap}")
        unscored = refuse_nan(results[results["evaluation"] == "final"], ["accuracy", "auc"])
        if unscored:
            p.error(f"{out}: {unscored}")
    if args.from_dir:
        commit = _recorded_commit(p, out, args.commit, args.freeze)
    rows = []
    for _, t in timings.iterrows():
        before, last = reference.get(t.method), previous.get(t.method)
        rows.append({"method": t.method, "wall_s": round(float(t.wall_seconds), 1),
                     "one_at_a_time_s": None if before is None else round(before, 1),
                     "ratio": None if before is None else round(before / float(t.wall_seconds), 1),
                     "previous_s": None if last is None else round(last, 1),
                     "previous / now": None if last is None else round(last / float(t.wall_seconds), 2)})
    table = pd.DataFrame(rows)
    print(table.to_string(index=False))
    wall = float(timings.wall_seconds.sum())
    print(f"all methods: {wall / 60:.1f} min of wall time on {os.cpu_count()} cores (one-at-a-time reference: "
          f"{sum(reference.values()) / 60:.0f} min, one core"
          + (f"; previous run, at {previous_commit}: {sum(previous.values()) / 60:.1f} min)" if previous else ")"))
    if args.freeze:
        path = write_frozen(
            results, "measured_results", command=command,
            description="per-fold results of 5 x stratified 10-fold CV (the same 50 folds) on Musk1, Musk2, Fox, "
            "Tiger and Elephant for every method of methods.MEASURED (minitorch-proto reproduce --methods all less the "
            "recommended and monotone rows, which have frozen tables of their own), in one run",
            commit=commit, cpu_count=os.cpu_count(),
            wall_seconds={r["method"]: r["wall_s"] for r in rows},
            one_at_a_time_seconds={k: round(v, 1) for k, v in reference.items()},
            **({"note": args.note} if args.note else {}),
        )
        print(f"froze {path.name} (commit {commit})")
    print(json.dumps({"rows": rows, "wall_seconds": wall, "run_seconds": total, "commit": commit}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
