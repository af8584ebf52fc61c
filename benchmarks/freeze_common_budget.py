"""Add finished common-budget runs to the frozen table ``baseline_common_budget``.

The common budget of a baseline (inner-CV tuning over a fixed 3-point grid, then a 5-seed
ensemble for the neural ones) costs up to about 15x its defaults' training: 3 to 35 minutes
of one core per (method, data set) with the compiled backend. So the table is built one
(method, data set) at a time, each run on one core::

    minitorch-proto reproduce --methods attention --datasets tiger --budget common --out runs/attention_tiger
    python benchmarks/freeze_common_budget.py runs/attention_tiger --freeze

Each run's final rows are appended to the table; a (method, data set) that the table already
holds is refused, so nothing is replaced by accident. The run's commit goes into the
provenance's ``row_commits`` (read from the run's ``run.json``; ``--commit`` names it
for runs made before ``reproduce`` wrote that file), its wall time into ``wall_seconds_one_core`` (and, given
``--cpu-seconds``, its CPU time into ``cpu_seconds_one_core``), and the
description's list of what is covered (and what is not) is rebuilt from the table. Without
``--freeze`` it only prints what it would add.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from minitorch_proto.data.benchmarks import BENCHMARKS
from minitorch_proto.evaluation.baseline_cv import GRIDS, INNER_FOLDS, N_SEEDS, budget_label
from minitorch_proto.book.frozen import frozen_dir, load_frozen, provenance, write_frozen

sys.path.insert(0, str(Path(__file__).resolve().parent))
from script_args import Parser, commit_hash, refuse_nan  # noqa: E402

NAME = "baseline_common_budget"
COMMAND = ("minitorch-proto reproduce --methods <method> --datasets <data set> --budget common --out <folder>, "
           "one run per (method, data set) on one core, then python benchmarks/freeze_common_budget.py <folder> "
           "--freeze")
_KEYS = ["dataset", "method", "repeat", "fold"]


def _read_run(folder: Path, columns: list[str], commit: str | None) -> tuple[pd.DataFrame, dict[str, float], str]:
    """A run's final per-fold rows, its wall seconds per ``"<method> <data set>"`` and its code's commit."""
    results, timings = folder / "results.csv", folder / "timings.csv"
    if not results.is_file() or not timings.is_file():
        raise ValueError(f"{folder} holds no results.csv and timings.csv of a reproduce run")
    if commit is None:
        record = folder / "run.json"
        if not record.is_file():
            raise ValueError(f"{folder} has no run.json naming its code; give --commit")
        commit = str(json.loads(record.read_text()).get("commit"))
    commit_hash(commit, str(folder))
    rows = pd.read_csv(results)
    missing = [c for c in columns if c not in rows.columns]
    if missing:
        raise ValueError(f"{results} lacks the columns {missing}")
    rows = rows[rows.evaluation == "final"][columns]
    common = {budget_label(m, "common") for m in GRIDS}
    if rows.empty or not set(rows.method) <= common:
        raise ValueError(f"{results} holds no common-budget rows (was the run made with --budget common?)")
    for (method, dataset), part in rows.groupby(["method", "dataset"]):
        if len(part) != 50:
            raise ValueError(f"{results}: {method} on {dataset} has {len(part)} folds, not the 5 x 10 = 50 expected")
    # A fold with no score would leave the method's mean (and rank) to the folds it did score.
    unscored = refuse_nan(rows, ["accuracy", "auc"])
    if unscored:
        raise ValueError(f"{results}: {unscored}")
    times = pd.read_csv(timings)
    lacking = [c for c in ("method", "datasets", "wall_seconds") if c not in times.columns]
    if lacking:
        raise ValueError(f"{timings} lacks the columns {lacking}")
    walls = {}
    for _, t in times.iterrows():
        for dataset in str(t.datasets).split():
            walls[f"{t.method} {dataset}"] = round(float(t.wall_seconds) / len(str(t.datasets).split()), 1)
    return rows, walls, commit


def _coverage(table: pd.DataFrame) -> tuple[str, str]:
    """What is covered and what is not, ``"<method>: <data sets>; ..."``, methods in the table's order."""
    order = list(BENCHMARKS)
    covered, missing = [], []
    for method in dict.fromkeys(table.method):
        have = set(table.loc[table.method == method, "dataset"])
        covered.append(f"{method}: {', '.join(d for d in order if d in have)}")
        if have != set(order):
            missing.append(f"{method}: {', '.join(d for d in order if d not in have)}")
    return "; ".join(covered), "; ".join(missing) if missing else "nothing"


def describe(table: pd.DataFrame) -> str:
    """The provenance description, its coverage rebuilt from ``table``."""
    covered, missing = _coverage(table)
    return (
        "per-fold results of 5 x stratified 10-fold CV (the folds of measured_results) for baselines under the "
        f"common budget: MILES, mi-SVM and bag statistics tuned over a 3-point grid on {INNER_FOLDS} inner folds "
        f"of each outer training fold (one model); the neural baselines' 3 learning rates tuned the same way, then "
        f"a {N_SEEDS}-seed ensemble of the chosen one. One reproduce run per (method, data set), on one core; "
        f"row_commits names the code of each. Covered: {covered}. Not covered: {missing}."
    )


def main(argv: list[str] | None = None) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="output folders of minitorch-proto reproduce --budget common")
    p.add_argument("--commit", default=None,
                   help="the commit of the code that made the runs (default: each run's run.json)")
    p.add_argument("--cpu-seconds", type=float, nargs="+", default=None,
                   help="each run's CPU seconds (user + sys, e.g. from /usr/bin/time), recorded beside the wall time: "
                        "the honest cost when a run shared its core")
    p.add_argument("--freeze", action="store_true", help="write the table (default: only print what changes)")
    args = p.parse_args(argv)
    if args.cpu_seconds is not None and len(args.cpu_seconds) != len(args.runs):
        p.error(f"--cpu-seconds needs one value per run ({len(args.runs)}), got {len(args.cpu_seconds)}")
    old = load_frozen(NAME)
    meta = provenance(NAME)
    columns = list(old.columns)
    parts, walls, cpus, commits = [old], {}, {}, {}
    try:
        for r, folder in enumerate(args.runs):
            rows, run_walls, commit = _read_run(Path(folder), columns, args.commit)
            parts.append(rows)
            walls.update(run_walls)
            if args.cpu_seconds is not None:
                cpus.update({k: round(args.cpu_seconds[r] / len(run_walls), 1) for k in run_walls})
            commits.update(dict.fromkeys(sorted({f"{m} {d}" for m, d in zip(rows.method, rows.dataset, strict=True)}),
                                         commit))
    except ValueError as err:
        p.error(str(err))
    table = pd.concat(parts, ignore_index=True)
    clash = table[table.duplicated(_KEYS, keep=False)][["method", "dataset"]].drop_duplicates()
    if not clash.empty:
        pairs = ", ".join(f"{m} on {d}" for m, d in clash.itertuples(index=False))
        p.error(f"already in {NAME} (refusing to replace): {pairs}")
    row_commits = {**meta.get("row_commits", {}), **commits}
    extra = {k: v for k, v in meta.items()
             if k not in ("command", "commit", "date", "description", "columns", "row_commits")}
    extra["wall_seconds_one_core"] = {**meta.get("wall_seconds_one_core", {}), **walls}
    if cpus:
        extra["cpu_seconds_one_core"] = {**meta.get("cpu_seconds_one_core", {}), **cpus}
    print(f"adding {len(table) - len(old)} rows: " + "; ".join(f"{k} (code {c})" for k, c in commits.items()))
    description = describe(table)
    print(description)
    if args.freeze:
        # The table's own commit field keeps naming its first code; row_commits names each row's.
        path = write_frozen(table, NAME, command=COMMAND, description=description, commit=meta["commit"],
                            row_commits=row_commits, **extra)
        print(f"froze {path.name} into {frozen_dir()}: {len(table)} rows")
    print(json.dumps({"added": commits, "rows": len(table)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
