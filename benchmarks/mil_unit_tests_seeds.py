"""The three algorithmic MIL unit tests for every model of the package over several seeds.

Appends one block of rows per (model, seed) to a CSV as it goes, so an interrupted run
resumes where it stopped (a (model, seed) pair with rows in the CSV counts as done; seed
the CSV from the frozen table to add only missing seeds); each row names the commit that
made it (``code_version``). ``--freeze`` then writes the collected rows as the frozen table
``mil_unit_tests_seeds`` (package data, with the command and commit) that the unit-test
page shows. Seeds run in the outer loop, so a partial run covers every model on its first
seeds. The shared heavy-job lock (``--lock``) is taken per (model, seed): neural baselines
take one to two minutes per seed on one core, the prototype models about a second.

    python benchmarks/mil_unit_tests_seeds.py --seeds 0-9 --out benchmarks/out/unit_seeds.csv
    python benchmarks/mil_unit_tests_seeds.py --out benchmarks/out/unit_seeds.csv --freeze
"""
from __future__ import annotations

import contextlib
import fcntl
import sys
import time
from pathlib import Path

import pandas as pd
import torch

from minitorch_proto import book
from minitorch_proto.about import code_version
from minitorch_proto.book.frozen import write_frozen
from minitorch_proto.evaluation.mil_unit_tests import summarize_unit_tests
from script_args import Parser, freeze_commit, output_file, seed_list, seed_text  # this folder is on sys.path


@contextlib.contextmanager
def _locked(path: str | None):
    if not path:
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def main(argv: list[str] | None = None) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="0-9", help="LO-HI (both included), a list such as 0,3,7, or one seed "
                   "(default 0-9)")
    p.add_argument("--models", default=None, help="comma-separated names (default: every model)")
    p.add_argument("--out", type=output_file, required=True, help="CSV collecting the rows (appended, resumable)")
    p.add_argument("--lock", default=None, help="file to flock around each (model, seed)")
    p.add_argument("--freeze", action="store_true", help="write the collected rows as the frozen table and stop")
    p.add_argument("--note", default=None, help="with --freeze: a line for the provenance file (e.g. a re-check)")
    args = p.parse_args(argv)
    out = Path(args.out)
    if args.freeze and not out.is_file():
        p.error(f"--freeze: --out {out} is no file of collected rows")
    if args.freeze:
        commit = freeze_commit(p)  # the table names the code it was frozen from, which must be committed
        table = pd.read_csv(out)
        if "code_version" not in table.columns:
            table["code_version"] = "unknown"
        n = table.groupby("model")["seed"].nunique()
        # Rows were appended over several sessions: say per model which commit made them.
        versions = table.fillna({"code_version": "unknown"}).groupby("model")["code_version"].unique()
        write_frozen(table, "mil_unit_tests_seeds",
                     command=(f"python benchmarks/mil_unit_tests_seeds.py --seeds {seed_text(table['seed'])} --out {args.out}, "
                              f"then the same with --freeze"),
                     description="MIL unit tests (single_concept, multi_concept, false_frequency; 200/200 bags; "
                                 "pass: test accuracy >= 0.75) per model and seed",
                     seeds_per_model={str(k): int(v) for k, v in n.items()},
                     code_versions={str(k): sorted(map(str, v)) for k, v in versions.items()}, commit=commit,
                     **({"note": args.note} if args.note else {}))
        print(summarize_unit_tests(table).round(3).to_string())
        return 0
    try:
        seeds = seed_list(args.seeds)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    available = book.default_mil_unit_test_models()
    names = [n.strip() for n in args.models.split(",")] if args.models else list(available)
    unknown = [n for n in names if n not in available]
    if unknown:
        print(f"error: unknown model(s) {unknown}; choose from {list(available)}", file=sys.stderr)
        return 2
    done = set()
    if out.exists():
        old = pd.read_csv(out)
        done = set(zip(old["model"], old["seed"]))
    version = code_version()
    out.parent.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        for name in names:
            if (name, seed) in done:
                continue
            with _locked(args.lock):
                t0 = time.perf_counter()
                rows = book.mil_unit_test_table({name: available[name]}, random_state=seed)
            rows["seed"] = seed
            rows["code_version"] = version
            rows.to_csv(out, mode="a", header=not out.exists(), index=False)
            print(f"{name} seed {seed}: {time.perf_counter() - t0:.1f} s, accuracy "
                  + ", ".join(f"{a:.2f}" for a in rows["accuracy"]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
