"""Regenerate the frozen table ``ablation_deltas_5datasets``: every setting of page 03 on the five benchmarks.

One command does the whole job::

    MINITORCH_PROTO_DATA=../shared/data/mil .venv/bin/python benchmarks/freeze_ablations.py --freeze

It runs what notebook 03 runs (``evaluation.run_ablations`` over every setting of ``ABLATIONS``, then
``paired_deltas`` against the paper-faithful baseline; 1 x stratified 10-fold CV, Table 1's 100 epochs, seed 0:
the notebook's defaults, on the CPU where the notebook's ``device="auto"`` would take a GPU) on the five
benchmarks, prints each setting's paired accuracy change beside the frozen table's, and with ``--freeze``
writes the new table with this command, the commit read at startup and the wall time. The table had been
copied by hand from the notebook's ``ablation_deltas.csv``; this script is that step, so the file names the
code that made it. ``--datasets`` narrows a look; a freeze needs all five and the notebook's protocol. The
last line is a JSON object.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from minitorch_proto.book.frozen import load_frozen, write_frozen
from minitorch_proto.data import load_benchmark
from minitorch_proto.evaluation import ABLATIONS, BASELINE, paired_deltas, run_ablations

sys.path.insert(0, str(Path(__file__).resolve().parent))
from script_args import FIVE, Parser, count, freeze_commit, refuse_nan, seed  # noqa: E402

NAME = "ablation_deltas_5datasets"
#: The protocol of the frozen table (notebook 03's parameter defaults): a freeze runs exactly this.
PROTOCOL = {"repeats": 1, "folds": 10, "epochs": 100, "seed": 0}


def compare(new: pd.DataFrame, old: pd.DataFrame) -> pd.DataFrame:
    """Each (setting, data set)'s paired accuracy change now and in the frozen table, and their difference."""
    keys = ["group", "setting", "dataset"]
    both = new[keys + ["delta"]].merge(old[keys + ["delta"]], on=keys, how="left", suffixes=("", "_frozen"))
    return both.assign(change=both["delta"] - both["delta_frozen"])


def main(argv=None) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", choices=FIVE, default=list(FIVE),
                   help="benchmarks to run (default: all five; --freeze needs all five)")
    p.add_argument("--repeats", type=count(1), default=PROTOCOL["repeats"], help="CV repetitions (default: 1)")
    p.add_argument("--folds", type=count(2), default=PROTOCOL["folds"], help="folds (default: 10)")
    p.add_argument("--epochs", type=count(1), default=PROTOCOL["epochs"], help="epochs per model (default: 100)")
    p.add_argument("--seed", type=seed, default=PROTOCOL["seed"], help="seeds the folds and models (default: 0)")
    p.add_argument("--freeze", action="store_true", help=f"write the frozen table {NAME}")
    p.add_argument("--note", default=None, help="with --freeze: a line for the provenance file")
    args = p.parse_args(argv)
    datasets = [d for d in FIVE if d in args.datasets]
    if args.note and not args.freeze:
        p.error("--note goes with --freeze (it is a line of the frozen table's provenance)")
    if args.freeze:
        if datasets != list(FIVE):
            p.error(f"--freeze needs all five data sets (the table's name says so); got {' '.join(datasets)}")
        changed = [f"--{k} {getattr(args, k)}" for k, v in PROTOCOL.items() if getattr(args, k) != v]
        if changed:
            p.error(f"--freeze runs the table's protocol (notebook 03's defaults); drop {', '.join(changed)}")
        commit = freeze_commit(p)  # before the work: a dirty tree is refused now, and the code that ran is named
    try:  # read now: a missing or damaged table stops the script before its work, not after
        old = load_frozen(NAME)
    except (OSError, ValueError) as exc:
        p.error(f"cannot read the frozen table {NAME} to compare with: {exc}")
    t0 = time.perf_counter()
    data = {name: load_benchmark(name) for name in datasets}
    results, seconds = run_ablations(data, ABLATIONS, repeats=args.repeats, folds=args.folds, epochs=args.epochs,
                                     seed=args.seed, device="cpu")
    deltas = paired_deltas(results, baseline=BASELINE)
    wall = time.perf_counter() - t0
    table = compare(deltas, old)
    with pd.option_context("display.width", 160, "display.max_rows", 500):
        print(table.round(4).to_string(index=False))
    same = int(np.isclose(table["change"], 0.0, atol=1e-12).sum())
    print(f"{same} of {len(table)} (setting, data set) cells equal the frozen table's; {seconds:.0f} s of "
          f"cross-validation, {wall:.0f} s in all")
    if args.freeze:
        unscored = refuse_nan(results.assign(method=results["setting"]), ["accuracy"])
        if unscored:
            p.error(f"nothing frozen: {unscored}")
        path = write_frozen(
            deltas, NAME, command="python benchmarks/freeze_ablations.py --freeze",
            description="paired accuracy change of every ablation against the paper-faithful model, 1 x 10-fold CV "
                        "on each of the five benchmarks (notebook 03's run_ablations and paired_deltas)",
            commit=commit, wall_seconds=round(wall, 1), **({"note": args.note} if args.note else {}),
        )
        print(f"froze {path.name} (commit {commit})")
    print(json.dumps({"cells": len(table), "equal": same, "wall_seconds": round(wall, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
