"""The shipped recommended model against the same model with one setting changed, paired per fold.

For an ingredient that is not a candidate of ``recommended_lodo.py`` (so it cannot become
the default without a new, labelled round of the choice): what would it change? Both
models see the same 5 x 10 folds of the book and the same seeds; the spread is the
standard error of the repetition means of the paired per-fold difference (variant minus
shipped). ``push_cost.py`` is its ``push=False`` case.

    MINITORCH_PROTO_DATA=../shared/data/mil python benchmarks/recommended_variant.py --set head_threshold=inner

Prints one row per benchmark and the averages; writes the per-fold rows of both models to
``--out``/results.csv.
"""
from __future__ import annotations

import argparse
import ast
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from minitorch_proto import PrototypeMILClassifier, cross_validate, load_benchmark, stratified_folds
from minitorch_proto.outputs import write_atomic
from script_args import FIVE, Parser, count, output_folder  # this folder is on sys.path



def paired(a: pd.DataFrame, b: pd.DataFrame, metric: str) -> tuple[float, float]:
    """Mean per-fold difference a - b of ``metric`` and its SE over the repetition means."""
    diff = a[metric].to_numpy() - b[metric].to_numpy()
    by_repeat = pd.Series(diff).groupby(a["repeat"].to_numpy()).mean()
    se = by_repeat.std(ddof=1) / np.sqrt(len(by_repeat)) if len(by_repeat) > 1 else float("nan")
    return float(diff.mean()), float(se)


def paired_runs(overrides: dict, datasets, repeats: int, labels: tuple[str, str]):
    """Per benchmark: (name, shipped rows, variant rows, shipped seconds, variant seconds), same folds and seeds."""
    for name in datasets:
        d = load_benchmark(name)
        folds = stratified_folds(d.y, repeats, 10, random_state=0)
        t0 = time.perf_counter()
        shipped = cross_validate(PrototypeMILClassifier.recommended(), d.bags, d.y, folds, dataset=name,
                                 method=labels[0])
        t1 = time.perf_counter()
        variant = cross_validate(PrototypeMILClassifier.recommended(**overrides), d.bags, d.y, folds, dataset=name,
                                 method=labels[1])
        yield name, shipped, variant, t1 - t0, time.perf_counter() - t1


def parse_setting(text: str) -> tuple[str, object]:
    """``key=value`` with a Python literal value (a bare word stays a string)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key.strip(), ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return key.strip(), value


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", dest="settings", type=parse_setting, action="append", required=True,
                        metavar="KEY=VALUE", help="a parameter of PrototypeMILClassifier to change (repeatable)")
    parser.add_argument("--repeats", type=count(1), default=5, help="repetitions of 10-fold CV (default: 5)")
    parser.add_argument("--datasets", nargs="+", default=list(FIVE), choices=FIVE, metavar="NAME",
                        help=f"benchmarks ({', '.join(FIVE)}; default: all)")
    parser.add_argument("--out", type=output_folder, default="benchmarks/out/variant",
                        help="folder of results.csv (default: benchmarks/out/variant)")
    args = parser.parse_args(argv)
    overrides = dict(args.settings)
    try:
        PrototypeMILClassifier.recommended(**overrides)
    except TypeError as err:
        parser.error(str(err))
    warnings.filterwarnings("ignore")
    out = Path(args.out)
    label = ", ".join(f"{k}={v!r}" for k, v in overrides.items())
    rows, frames = [], []
    for name, shipped, variant, s_shipped, s_variant in paired_runs(overrides, args.datasets, args.repeats,
                                                                   ("shipped", label)):
        frames += [shipped, variant]
        d_acc, se_acc = paired(variant, shipped, "accuracy")
        d_auc, se_auc = paired(variant, shipped, "auc")
        rows.append({"dataset": name, "acc shipped": shipped.accuracy.mean(), "acc variant": variant.accuracy.mean(),
                     "acc diff": d_acc, "acc diff SE": se_acc, "auc diff": d_auc, "auc diff SE": se_auc,
                     "seconds shipped": s_shipped, "seconds variant": s_variant})
        print(pd.DataFrame(rows[-1:]).round(3).to_string(index=False, header=len(rows) == 1), flush=True)
    table = pd.DataFrame(rows)
    write_atomic(out / "results.csv", pd.concat(frames, ignore_index=True).to_csv(index=False))
    print(f"\n{label}: {args.repeats} x 10-fold, paired per fold (variant - shipped; SE over repetition means):")
    print(table.round(3).to_string(index=False))
    print(f"\naverage difference: accuracy {table['acc diff'].mean():+.4f}, AUC {table['auc diff'].mean():+.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
