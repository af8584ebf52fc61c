"""mi-SVM: instance scoring by libsvm against the BLAS form, on the same folds, one core.

mi-SVM rescores every training instance after each SVM of its relabelling loop. libsvm
evaluates the RBF kernel one (instance, support vector) pair at a time;
``minitorch_proto.baselines.misvm.svc_decision`` writes it as one matrix product per block of
rows. For each data set this fits ``MISVM()`` (the defaults of ``reproduce``) on the first
``--folds`` training folds of the 5 x 10 protocol (feature standardisation fitted on each
training fold) both ways, checks that both took the same relabelling path (iterations and
final instance labels) and prints the seconds and their ratio. BLAS is held to one thread,
as in ``reproduce``'s worker processes. The last line is a JSON object.

Usage::

    MINITORCH_PROTO_DATA=../shared/data/mil .venv/bin/python benchmarks/bench_misvm.py --folds 5
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
from threadpoolctl import threadpool_limits

import minitorch_proto.baselines.misvm as misvm_module
from minitorch_proto.baselines.misvm import MISVM
from minitorch_proto.data import load_benchmark
from minitorch_proto.data.benchmarks import BENCHMARKS
from minitorch_proto.evaluation.cv import stratified_folds
from minitorch_proto.preprocessing import BagStandardizer


def _fit(train, y, libsvm_scoring: bool) -> tuple[MISVM, float]:
    fast = misvm_module.svc_decision
    if libsvm_scoring:
        misvm_module.svc_decision = lambda svc, X: svc.decision_function(X)
    try:
        t0 = time.perf_counter()
        est = MISVM(random_state=0).fit(train, y)
        return est, time.perf_counter() - t0
    finally:
        misvm_module.svc_decision = fast


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(BENCHMARKS), choices=list(BENCHMARKS))
    parser.add_argument("--folds", type=int, default=5, help="training folds per data set (of the 50)")
    args = parser.parse_args()
    if not 1 <= args.folds <= 50:
        parser.error("--folds must be between 1 and 50")
    out = {}
    with threadpool_limits(1):
        for name in args.datasets:
            data = load_benchmark(name)
            seconds = {"libsvm": 0.0, "blas": 0.0}
            for f in stratified_folds(data.y, 5, 10, random_state=0)[: args.folds]:
                bags = [data.bags[i] for i in f.train]
                train = BagStandardizer("feature").fit(bags).transform(bags)
                slow, t_slow = _fit(train, data.y[f.train], libsvm_scoring=True)
                fast, t_fast = _fit(train, data.y[f.train], libsvm_scoring=False)
                if slow.n_iter_ != fast.n_iter_ or not np.array_equal(slow.instance_labels_, fast.instance_labels_):
                    raise SystemExit(f"{name} fold {f.repeat}.{f.fold}: the two scorings took different paths")
                seconds["libsvm"] += t_slow
                seconds["blas"] += t_fast
            ratio = seconds["libsvm"] / seconds["blas"]
            out[name] = {k: round(v, 2) for k, v in seconds.items()} | {"ratio": round(ratio, 2)}
            print(f"{name:9s} {args.folds} folds: libsvm scoring {seconds['libsvm']:7.2f} s, "
                  f"BLAS scoring {seconds['blas']:7.2f} s, ratio {ratio:5.2f} (same relabelling path)")
    print(json.dumps({"folds": args.folds, "datasets": out}))


if __name__ == "__main__":
    main()
