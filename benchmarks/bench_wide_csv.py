"""Wide CSVs: reading vs training vs predicting through the command line, at 1k, 10k and 100k columns.

Foundation-model embeddings concatenated per tile make CSVs 100,000 columns wide. Matching
a model's feature columns by name used to be quadratic in the number of columns (predict
took 125 s at 100k columns against 1.9 s to read the file); now it is linear, so predicting
costs a small multiple of reading. Prints one row per width with the ratios to the read time.

    python benchmarks/bench_wide_csv.py            # 40 bags x 2 instances, one core
"""
from __future__ import annotations

import contextlib
import io
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from minitorch_proto.cli import main
from script_args import Parser, count  # this folder is on sys.path


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run(width: int, n_bags: int, folder: Path) -> dict:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(2 * n_bags, width)).astype(np.float32),
                         columns=[f"emb_{j}" for j in range(width)])
    frame.insert(0, "label", np.repeat(np.arange(n_bags) % 2, 2))
    frame.insert(0, "bag", np.repeat([f"slide_{i:04d}" for i in range(n_bags)], 2))
    csv = folder / f"wide_{width}.csv"
    frame.to_csv(csv, index=False)
    model = folder / f"m_{width}.safetensors"
    quiet = contextlib.redirect_stdout(io.StringIO())
    read = _timed(lambda: pd.read_csv(csv, dtype={"bag": str}))
    with quiet:
        train = _timed(lambda: main(["train", "--csv", str(csv), "--epochs", "2", "--prototypes", "4",
                                     "--out", str(model)]))
        predict = _timed(lambda: main(["predict", "--model", str(model), "--csv", str(csv),
                                       "--out", str(folder / "pred.csv")]))
    return {"columns": width, "read_s": read, "train_s": train, "predict_s": predict,
            "train/read": train / read, "predict/read": predict / read}


def main_() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", type=count(1), nargs="+", default=[1_000, 10_000, 100_000],
                        help="feature counts to measure (default: 1000 10000 100000)")
    parser.add_argument("--bags", type=count(2), default=40, help="bags of each file (default: 40)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        rows = [run(w, args.bags, Path(tmp)) for w in args.widths]
    print(pd.DataFrame(rows).round(2).to_string(index=False))


if __name__ == "__main__":
    main_()
