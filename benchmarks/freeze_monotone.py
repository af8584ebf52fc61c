"""Regenerate the frozen table ``monotone_results``: the monotone variant's 5 x 10 CV on the five benchmarks.

One command does the whole job::

    MINITORCH_PROTO_DATA=../shared/data/mil .venv/bin/python benchmarks/freeze_monotone.py --freeze

It runs ``minitorch-proto reproduce --methods prototype-monotone --quiet --out <folder>`` (``reproduce``'s
defaults: 5 x stratified 10-fold CV, the folds of every other row of the book; about ten seconds on two cores),
prints each data set's mean accuracy and AUC beside the frozen table's and how many of the 250 folds are equal,
and with ``--freeze`` writes the new rows as ``monotone_results`` with this command, the commit read at startup
and the wall time. ``--from <folder>`` reads a finished ``reproduce`` output holding the monotone rows (e.g.
``reproduce --methods all``) instead of running it; ``--freeze`` then names the code its ``run.json`` records.
The table had been copied by hand from a ``reproduce`` folder; this script is that step. The last line is a
JSON object.
"""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from minitorch_proto import methods
from minitorch_proto.book.frozen import load_frozen, write_frozen

sys.path.insert(0, str(Path(__file__).resolve().parent))
from script_args import Parser, commit_hash, freeze_commit, full_run_gap, refuse_nan  # noqa: E402

NAME = "monotone_results"
KEY = "prototype-monotone"
KEYS = ["dataset", "repeat", "fold"]


def compare(new: pd.DataFrame, old: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Per data set, the mean accuracy and AUC now and in the frozen table; and how many folds are equal."""
    both = new[KEYS + ["accuracy", "auc"]].merge(old[KEYS + ["accuracy", "auc"]], on=KEYS, how="left",
                                                 suffixes=("", "_frozen"))
    equal = int((np.isclose(both["accuracy"], both["accuracy_frozen"], rtol=0, atol=1e-12)
                 & np.isclose(both["auc"], both["auc_frozen"], rtol=0, atol=1e-12)).sum())
    means = both.groupby("dataset", sort=False)[["accuracy", "accuracy_frozen", "auc", "auc_frozen"]].mean()
    return means.reset_index(), equal


def _folder_commit(p: Parser, folder: Path) -> str:
    """The commit a ``--from`` folder's run.json names, refused unless it is a plain hash (committed code)."""
    record = folder / "run.json"
    recorded = json.loads(record.read_text()).get("commit") if record.is_file() else None
    if recorded is None:
        p.error(f"{folder} has no run.json naming its code; a frozen table must name the commit that made it")
    try:
        return commit_hash(recorded, str(record))
    except ValueError as exc:
        p.error(str(exc))


def main(argv=None) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="results/monotone", help="reproduce's output folder (default: results/monotone)")
    p.add_argument("--from", dest="from_dir", default=None, help="a finished reproduce output holding the monotone rows")
    p.add_argument("--freeze", action="store_true", help=f"write the frozen table {NAME}")
    p.add_argument("--note", default=None, help="with --freeze: a line for the provenance file")
    args = p.parse_args(argv)
    if args.note and not args.freeze:
        p.error("--note goes with --freeze (it is a line of the frozen table's provenance)")
    commit = freeze_commit(p) if args.freeze and not args.from_dir else None  # before the run: no edit meanwhile
    try:  # read now: a missing or damaged table stops the script before its work, not after
        old = load_frozen(NAME)
    except (OSError, ValueError) as exc:
        p.error(f"cannot read the frozen table {NAME} to compare with: {exc}")
    label = methods.get(KEY).label
    t0 = time.perf_counter()
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
    wall = time.perf_counter() - t0
    results = pd.read_csv(out / "results.csv", dtype={"dataset": str, "method": str})
    if not set(KEYS + ["method", "evaluation", "accuracy", "auc"]) <= set(results.columns):
        p.error(f"{out}/results.csv is not a reproduce run's (it needs method, evaluation, {', '.join(KEYS)}, "
                "accuracy and auc)")
    results = results[results["method"] == label].reset_index(drop=True)
    gap = full_run_gap(results, [label])
    if gap and args.freeze:  # the table replaces the whole monotone_results: a part would drop rows from the book
        p.error(f"{out} is {gap}")
    if results.empty:
        p.error(f"{out} holds no {label!r} rows")
    means, equal = compare(results[results["evaluation"] == "final"], old[old["evaluation"] == "final"])
    print(means.round(4).to_string(index=False))
    n = int((results["evaluation"] == "final").sum())
    print(f"{equal} of {n} folds equal the frozen table's (accuracy and AUC); {wall:.0f} s")
    if args.freeze:
        unscored = refuse_nan(results[results["evaluation"] == "final"], ["accuracy", "auc"])
        if unscored:
            p.error(f"nothing frozen: {unscored}")
        if args.from_dir:
            commit = _folder_commit(p, out)
        path = write_frozen(
            results, NAME, command=command,
            description="5x10-fold CV per-fold results of the monotone prototype variant (unit-test settings) on "
                        "the five benchmarks (minitorch-proto reproduce --methods prototype-monotone)",
            commit=commit, **({} if args.from_dir else {"wall_seconds": round(wall, 1)}),
            **({"note": args.note} if args.note else {}),
        )
        print(f"froze {path.name} (commit {commit})")
    print(json.dumps({"folds": n, "equal": equal, "wall_seconds": round(wall, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
