"""What the push costs: the recommended model with and without pushing its prototypes onto real instances.

Both fits share everything up to the push (the same folds, seeds, k-means++ start and
training); with ``push=True`` each prototype is replaced by its nearest training instance
(in the standardised space) and the convex head is refitted on the pushed distances, so
every prototype is a real instance; with ``push=False`` the head is refitted on the
learned prototypes' distances. Paired per fold; the spread is the standard error of the
repetition means of the paired difference.

    MINITORCH_PROTO_DATA=../shared/data/mil python benchmarks/push_cost.py --repeats 5

Prints one row per benchmark and the average, and writes ``results.csv`` under ``--out``.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd

from minitorch_proto.outputs import write_atomic
from recommended_variant import paired, paired_runs  # this folder is on sys.path
from script_args import FIVE, Parser, count, output_folder


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=count(1), default=5, help="repetitions of 10-fold CV (default: 5)")
    parser.add_argument("--datasets", nargs="+", default=list(FIVE), choices=FIVE, metavar="NAME",
                        help=f"benchmarks ({', '.join(FIVE)}; default: all)")
    parser.add_argument("--out", type=output_folder, default="benchmarks/out/push_cost",
                        help="folder of results.csv (default: benchmarks/out/push_cost)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    out = Path(args.out)
    rows, frames = [], []
    for name, pushed, learned, s_pushed, s_learned in paired_runs({"push": False}, args.datasets, args.repeats,
                                                                  ("pushed", "not pushed")):
        frames += [pushed, learned]
        d_acc, se_acc = paired(pushed, learned, "accuracy")
        d_auc, se_auc = paired(pushed, learned, "auc")
        rows.append({"dataset": name, "acc pushed": pushed.accuracy.mean(), "acc not pushed": learned.accuracy.mean(),
                     "acc diff": d_acc, "acc diff SE": se_acc, "auc pushed": pushed.auc.mean(),
                     "auc not pushed": learned.auc.mean(), "auc diff": d_auc, "auc diff SE": se_auc,
                     "seconds pushed": s_pushed, "seconds not pushed": s_learned})
        print(pd.DataFrame(rows[-1:]).round(3).to_string(index=False, header=len(rows) == 1), flush=True)
    table = pd.DataFrame(rows)
    write_atomic(out / "results.csv", pd.concat(frames, ignore_index=True).to_csv(index=False))
    print(f"\n{args.repeats} x 10-fold, paired per fold (SE over repetition means):")
    print(table.round(3).to_string(index=False))
    print(f"\naverage accuracy cost of the push: {-table['acc diff'].mean():+.4f}; "
          f"AUC: {-table['auc diff'].mean():+.4f}")


if __name__ == "__main__":
    main()
