"""Registered methods on a real histopathology set (UCSB breast cancer), the same folds for all.

What ``compare_methods`` (``minitorch-proto compare``) does, spelled out so that the fitted
estimators come back: each method of the registry is built with
``minitorch_proto.methods.make(key, seed)`` at its defaults (no benchmark's Table 1: this
is not one of the five), cross-validated with ``evaluation.cv.cross_validate`` on one
shared list of stratified folds, and scored on each test fold. Accuracy and AUC are the
package's own (``scores_from_proba``, the numbers ``compare`` reports); balanced accuracy
(the mean of the two per-class recalls of the arg-max prediction) is computed here from
the same probabilities, because 26 malignant against 32 benign bags make plain accuracy
lean towards the majority class.

The data are found by ``load_pathology``: ``--data-dir``, else ``$MINITORCH_PROTO_DATA``
(its folder, a ``pathology`` sub-folder or a ``pathology`` folder beside it), else the
per-user cache, downloaded and checked by sha256.

Usage (about 4 minutes on two cores)::

    MINITORCH_PROTO_DATA=../shared/data/mil .venv/bin/python benchmarks/pathology_compare.py \\
        --repeats 1 --folds 5 --out benchmarks/out/pathology

Prints a markdown table (best AUC first) and, last, one JSON line; with ``--out`` also
writes the per-fold rows (``folds.csv``) and the table (``table.md``).
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pandas as pd
import torch
from threadpoolctl import threadpool_limits

from minitorch_proto.about import code_version
from minitorch_proto.data import load_pathology
from minitorch_proto.book import compare_on_bags, pathology_table
from minitorch_proto.evaluation.cv import stratified_folds
from minitorch_proto.methods import resolve
from minitorch_proto.outputs import write_together

sys.path.insert(0, str(Path(__file__).resolve().parent))
from script_args import Parser, count, output_folder, seed  # noqa: E402

DEFAULT_METHODS = "prototype,prototype-recommended,miles,attention,mi_net_max"


def main(argv=None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default=DEFAULT_METHODS, help=f"registry keys (default: {DEFAULT_METHODS})")
    parser.add_argument("--repeats", type=count(1), default=1, help="repetitions of the CV (default: 1)")
    parser.add_argument("--folds", type=count(2), default=5, help="folds of each repetition (default: 5)")
    parser.add_argument("--seed", type=seed, default=0, help="folds and models (stratified_folds' random_state)")
    parser.add_argument("--threads", type=count(1), default=2, help="torch and BLAS threads")
    parser.add_argument("--data-dir", default=None, help="folder holding ucsb_breast_cancer.csv (see load_pathology)")
    parser.add_argument("--out", type=output_folder, default=None, help="folder for folds.csv and table.md")
    args = parser.parse_args(argv)
    try:
        keys = [m.key for m in resolve(args.methods)]
    except ValueError as exc:
        parser.error(f"--methods: {exc}")
    data = load_pathology(data_dir=args.data_dir)
    folds = stratified_folds(data.y, n_repeats=args.repeats, n_folds=args.folds, random_state=args.seed)
    torch.set_num_threads(args.threads)
    frames, seconds = [], {}
    with threadpool_limits(args.threads):
        for key in keys:
            t0 = time.perf_counter()
            frames.append(compare_on_bags(data, folds, [key], args.seed)[0])
            seconds[key] = time.perf_counter() - t0
            r = frames[-1]
            print(f"{key}: AUC {r.auc.mean():.3f}, balanced accuracy {r.balanced_accuracy.mean():.3f} "
                  f"({seconds[key]:.0f} s)", file=sys.stderr, flush=True)
    rows = pd.concat(frames, ignore_index=True)
    table = pathology_table(rows)
    table["method"] = [f"{m} (`{k}`)" for m, k in zip(table["method"], table.pop("key"))]
    s = data.summary()
    header = (f"{data.name}: {s['bags']} bags ({s['positive']} malignant / {s['negative']} benign), "
              f"{s['instances']} instances, {s['features']} features; {args.repeats} x stratified "
              f"{args.folds}-fold CV (seed {args.seed}), same folds for every method; mean ± SD over folds; "
              f"code {code_version()}, torch threads {args.threads}.")
    text = header + "\n\n" + table.to_markdown(index=False) + "\n"
    print(text)
    if args.out is not None:
        write_together({args.out / "folds.csv": rows.to_csv(index=False), args.out / "table.md": text})
    print(json.dumps({
        "dataset": data.name, "repeats": args.repeats, "folds": args.folds, "seed": args.seed,
        "code": code_version(), "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "methods": {k: {"auc": round(float(g.auc.mean()), 4),
                        "balanced_accuracy": round(float(g.balanced_accuracy.mean()), 4),
                        "accuracy": round(float(g.accuracy.mean()), 4)}
                    for k, g in rows.groupby("key", sort=False)},
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
