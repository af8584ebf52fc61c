"""Peak memory of the recommended model, per byte of training features, in two ways users run it.

Whole-slide feature sets are large and usually float32 (what slide-processing tools write), so
what matters is how many bytes the package holds per byte of the user's features. Two cases,
each in a fresh process so that one's peak cannot hide the other's:

- ``fit``: ``PrototypeMILClassifier.recommended()`` (two seeds, as shipped) fitted once on a
  single-concept collection (``make_single_concept_test``; default 60 bags of about 1,000 x 512
  float32 features);
- ``cv``: the same model cross-validated (``cross_validate``, 1 x 5 folds by default) on a folder of float32
  ``.npy`` bags read through ``DiskBagDataset`` (default 60 bags of about 500 x 256);
- ``stream``: the ``fit`` collection written as a float32 ``.npy`` folder and fitted with
  ``fit_streaming`` (bags read when needed, ``chunk_size`` instances at a time), whose peak should
  not grow with the data (``--case stream --fit-shape 200 1000 512`` against the default).

A thread samples the process's resident memory every 2 ms while the case runs; the figure is
the peak above the resident memory just before it (data made, libraries loaded), divided by
the bytes of the features (float32). The same script runs on older code, so a change can be
measured against its parent::

    python benchmarks/bench_memory.py
    git worktree add /tmp/old <commit> && (cd /tmp/old && PYTHONPATH=. python /path/to/bench_memory.py)

The LAST line of output is a JSON object.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import warnings

import numpy as np

from script_args import Parser, count  # this folder is on sys.path

PAGE = os.sysconf("SC_PAGE_SIZE")
CASES = ("fit", "cv", "stream")


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


class PeakSampler:
    """Highest resident memory seen while the block runs (sampled by a thread)."""

    def __enter__(self) -> "PeakSampler":
        self.base = self.peak = _rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _rss())
            time.sleep(0.002)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss())


def _give_back_freed_memory() -> None:
    """Return freed heap pages to the system, so the resident memory before a case counts only what is held.

    Without it the bags just written and deleted stay resident as free heap, the case reuses them, and
    its peak above the start reads too low (200 bags of 1,000 x 512: 0.15 GiB instead of 0.6 GiB).
    """
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the figure may read low, as the docstring says
        pass


def _collection(bags: int, size: int, features: int, seed: int = 0):
    from minitorch_proto.data import make_single_concept_test

    train, _ = make_single_concept_test(bags, 2, features, (int(size * 0.8), int(size * 1.2)), seed, poison=False,
                                        separation=1.0, spread=0.5, concept_per_bag=(5, 20))
    return [np.ascontiguousarray(b, dtype=np.float32) for b in train.bags], np.asarray(train.y)


def run_case(case: str, bags: int, size: int, features: int, repeats: int = 1, folds: int = 5,
             chunk_size: int | None = None) -> dict:
    """One case in this process: its peak above the resident memory before it, per feature byte."""
    from minitorch_proto import PrototypeMILClassifier
    from minitorch_proto.evaluation import cross_validate, stratified_folds

    warnings.filterwarnings("ignore")
    X, y = _collection(bags, size, features)
    feature_bytes, instances = sum(b.nbytes for b in X), int(sum(len(b) for b in X))
    with tempfile.TemporaryDirectory() as folder:
        if case in ("cv", "stream"):
            from minitorch_proto.data.disk import DiskBagDataset, write_bag_folder

            data = DiskBagDataset(folder, write_bag_folder(folder, X, y, fmt="npy"))
            del X  # only the folder is left: what a collection too large to hold looks like
            _give_back_freed_memory()
            X, y = data, data.y
            splits = stratified_folds(y, n_repeats=repeats, n_folds=folds)
        model = PrototypeMILClassifier.recommended(random_state=0, **({"chunk_size": chunk_size} if chunk_size else {}))
        t0 = time.perf_counter()
        with PeakSampler() as peak:
            if case == "fit":
                model.fit(X, y)
            elif case == "stream":
                model.fit_streaming(X, y)
            else:
                cross_validate(model, X, y, splits)
        seconds = time.perf_counter() - t0
    return {"case": case, "feature_gib": feature_bytes / 2**30, "peak_over_start_gib": (peak.peak - peak.base) / 2**30,
            "bytes_per_feature_byte": (peak.peak - peak.base) / feature_bytes, "seconds": seconds,
            "instances": instances, "features": features, "folds": f"{repeats} x {folds}" if case == "cv" else None,
            "chunk_size": model.chunk_size}


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=CASES, default=None, help="run one case here (default: all three, "
                        "each in a fresh process)")
    parser.add_argument("--fit-shape", type=count(1), nargs=3, default=(60, 1000, 512), metavar=("BAGS", "SIZE", "L"))
    parser.add_argument("--cv-shape", type=count(1), nargs=3, default=(60, 500, 256), metavar=("BAGS", "SIZE", "L"))
    parser.add_argument("--cv-folds", type=count(1), nargs=2, default=(1, 5), metavar=("REPEATS", "FOLDS"))
    parser.add_argument("--chunk-size", type=count(1), default=None,
                        help="the estimator's chunk_size (default: its own)")
    args = parser.parse_args(argv)
    if args.case is not None:
        shape = args.cv_shape if args.case == "cv" else args.fit_shape
        print(json.dumps(run_case(args.case, *shape, *args.cv_folds, chunk_size=args.chunk_size)))
        return 0
    rows = []
    print(f"{'case':>6} {'instances':>9} {'L':>4} {'features GiB':>12} {'peak over start GiB':>19} "
          f"{'bytes per feature byte':>22} {'s':>6}")
    for case in CASES:
        shape, name = (args.cv_shape, "cv") if case == "cv" else (args.fit_shape, "fit")
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--case", case, f"--{name}-shape",
                              *map(str, shape), "--cv-folds", *map(str, args.cv_folds),
                              *(["--chunk-size", str(args.chunk_size)] if args.chunk_size else [])],
                             capture_output=True, text=True, check=True)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"{case:>6} {row['instances']:>9} {row['features']:>4} {row['feature_gib']:>12.3f} "
              f"{row['peak_over_start_gib']:>19.2f} {row['bytes_per_feature_byte']:>22.1f} {row['seconds']:>6.1f}",
              flush=True)
    print(json.dumps({"rows": rows, "cpu_count": os.cpu_count()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
