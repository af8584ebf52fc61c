"""Regenerate the frozen table ``monotone_results``: the monotone variant's 5 x 10 CV on the five benchmarks.

One command does the whole job::

    MINITORCH_PROTO_DATA=../shared/data/mil .venv/bin/python benchmarks/freeze_monotone.py --freeze

It runs ``minitorch-proto reproduce --methods prototype-monotone --quiet --out <folder>`` (``reproduce``'s
defaults: 5 x stratified 10-fold CV, the folds of every other row of the book; under a minute on two cores,
most of it starting Python and torch and compiling the loops), prints each data set's mean accuracy and AUC beside
the frozen table's and how many of the 250 folds are equal, and with ``--freeze`` writes the new rows as
``monotone_results`` with this command, the commit read at startup and the method's wall time (``reproduce``'s
``timings.csv``). ``--from <folder>`` reads a finished ``reproduce`` output holding the monotone rows (e.g.
``reproduce --methods all``) instead of running it; ``--freeze`` then names the code its ``run.json`` records
and refuses a run whose settings are not ``reproduce``'s defaults (another seed, epochs or rates).
The table had been copied by hand from a ``reproduce`` folder; this script is that step. The last line is a
JSON object.
"""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from minitorch_proto import methods
from minitorch_proto.book.frozen import load_frozen, write_frozen

sys.path.insert(0, str(Path(__file__).resolve().parent))
from script_args import (Parser, commit_hash, freeze_commit, full_run_gap, refuse_nan,  # noqa: E402
                         reproduce_defaults_gap, run_record)

NAME = "monotone_results"
KEY = "prototype-monotone"
KEYS = ["dataset", "repeat", "fold"]


def compare(new: pd.DataFrame, old: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Per data set, the mean accuracy and AUC now and in the frozen table; and how many folds are equal."""
    both = new[KEYS + ["accuracy", "auc"]].merge(old[KEYS + ["accuracy", "auc"]], on=KEYS, how="left",
                                                 suffixes=("", "_frozen"))
    same = [np.isclose(both[c], both[f"{c}_frozen"], rtol=0, atol=1e-12, equal_nan=True) for c in ("accuracy", "auc")]
    means = both.groupby("dataset", sort=False)[["accuracy", "accuracy_frozen", "auc", "auc_frozen"]].mean()
    return means.reset_index(), int((same[0] & same[1]).sum())


def _folder_commit(p: Parser, folder: Path) -> str:
    """The commit a ``--from`` folder's run.json names, refused unless it is a plain hash (committed code) and the
    run used ``reproduce``'s defaults."""
    try:
        record = run_record(folder)
    except ValueError as exc:
        p.error(str(exc))
    if record is None or record.get("commit") is None:
        p.error(f"{folder} has no run.json naming its code (a frozen table must name the commit that made it): "
                "run freeze_monotone.py without --from")
    gap = reproduce_defaults_gap(record)
    if gap:
        p.error(f"{folder} was {gap}; the table holds the defaults' rows")
    try:
        return commit_hash(record["commit"], str(folder / "run.json"))
    except ValueError as exc:
        p.error(str(exc))


def _as_frozen(rows: pd.DataFrame, old: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with the frozen table's whole-number columns whole again: read beside the baselines' rows (which
    leave ``epoch`` empty), pandas reads them as floats, and 30 would be written 30.0."""
    rows = rows.copy()
    for column in old.columns:
        if column in rows and pd.api.types.is_integer_dtype(old[column]) and rows[column].notna().all():
            rows[column] = rows[column].astype(old[column].dtype)
    return rows


def main(argv=None) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="results/monotone", help="reproduce's output folder (default: results/monotone)")
    p.add_argument("--from", dest="from_dir", default=None, help="a finished reproduce output holding the monotone rows")
    p.add_argument("--freeze", action="store_true", help=f"write the frozen table {NAME}")
    p.add_argument("--note", default=None, help="with --freeze: a line for the provenance file")
    args = p.parse_args(argv)
    if args.note and not args.freeze:
        p.error("--note goes with --freeze (it is a line of the frozen table's provenance)")
    if args.from_dir and args.out != p.get_default("out"):
        p.error("--out names the folder of a run made here; --from reads a finished one")
    commit = freeze_commit(p) if args.freeze and not args.from_dir else None  # before the run: no edit meanwhile
    try:  # read now: a missing or damaged table stops the script before its work, not after
        old = load_frozen(NAME)
    except (OSError, ValueError) as exc:
        p.error(f"cannot read the frozen table {NAME} to compare with: {exc}")
    label = methods.get(KEY).label
    if args.from_dir:
        out = Path(args.from_dir)
        if not (out / "results.csv").is_file():
            p.error(f"{out} holds no results.csv of a reproduce run")
        command = f"python benchmarks/freeze_monotone.py --from {shlex.quote(args.from_dir)} --freeze"
    else:
        out, command = Path(args.out), "python benchmarks/freeze_monotone.py --freeze"
        cmd = [sys.executable, "-m", "minitorch_proto", "reproduce", "--methods", KEY, "--quiet", "--out", str(out)]
        if subprocess.run(cmd).returncode != 0:
            print("error: the reproduce run failed; nothing frozen", file=sys.stderr)
            return 1
    if args.freeze and args.from_dir:
        commit = _folder_commit(p, out)  # before reading rows: a run of other settings is refused first
    results = pd.read_csv(out / "results.csv", dtype={"dataset": str, "method": str})
    if not set(KEYS + ["method", "evaluation", "accuracy", "auc"]) <= set(results.columns):
        p.error(f"{out}/results.csv is not a reproduce run's (it needs method, evaluation, {', '.join(KEYS)}, "
                "accuracy and auc)")
    results = _as_frozen(results[results["method"] == label].reset_index(drop=True), old)
    # The method's own time, as measured_results records it (the command's would add Python's and torch's start).
    timings = pd.read_csv(out / "timings.csv") if (out / "timings.csv").is_file() else pd.DataFrame()
    wall = float("nan")
    if {"method", "wall_seconds"} <= set(timings.columns) and (timings["method"] == label).any():
        wall = float(timings.loc[timings["method"] == label, "wall_seconds"].sum())
    gap = full_run_gap(results, [label])
    if gap and args.freeze:  # the table replaces the whole monotone_results: a part would drop rows from the book
        p.error(f"{out} is {gap}")
    if results.empty:
        p.error(f"{out} holds no {label!r} rows")
    means, equal = compare(results[results["evaluation"] == "final"], old[old["evaluation"] == "final"])
    print(means.round(4).to_string(index=False))
    n = int((results["evaluation"] == "final").sum())
    took = f"; the method took {wall:.0f} s" if np.isfinite(wall) else "; no timings.csv time for the method"
    print(f"{equal} of {n} folds equal the frozen table's (accuracy and AUC){took}")
    if args.freeze:
        unscored = refuse_nan(results[results["evaluation"] == "final"], ["accuracy", "auc"])
        if unscored:
            p.error(f"nothing frozen: {unscored}")
        path = write_frozen(
            results, NAME, command=command,
            description="5x10-fold CV per-fold results of the monotone prototype variant (unit-test settings) on "
                        "the five benchmarks (minitorch-proto reproduce --methods prototype-monotone)",
            commit=commit, **({"wall_seconds": round(wall, 1)} if np.isfinite(wall) else {}),
            **({"note": args.note} if args.note else {}),
        )
        print(f"froze {path.name} (commit {commit})")
    print(json.dumps({"folds": n, "equal": equal, "wall_seconds": round(wall, 1) if np.isfinite(wall) else None}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
