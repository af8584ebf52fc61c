"""mi-SVM: libsvm's own kernel against BLAS scoring and the kernel matrix, on the same folds, one core.

mi-SVM trains an SVM, rescores every training instance, relabels and repeats. Three ways of
doing the kernel work, each fitting ``MISVM()`` (the defaults of ``reproduce``) on the first
``--folds`` training folds of the 5 x 10 protocol (feature standardisation fitted on each
training fold):

* ``libsvm``: libsvm evaluates the RBF kernel one pair at a time, in training and scoring
  (the code before issue 17's third round);
* ``blas``: scoring as one matrix product per block of rows (``svc_decision``), libsvm still
  computing kernel columns while it trains (what ``MISVM`` does above ``GRAM_MAX_INSTANCES``);
* ``gram``: the kernel matrix computed once per fit and read by every SVM of the loop (the
  default up to ``GRAM_MAX_INSTANCES`` training instances).

The script checks that all three took the same relabelling path (iterations and final
instance labels) and prints the seconds and ratios to ``libsvm``. BLAS is held to one thread,
as in ``reproduce``'s worker processes. The last line is a JSON object.

Usage::

    MINITORCH_PROTO_DATA=../shared/data/mil .venv/bin/python benchmarks/bench_misvm.py --folds 5
"""
from __future__ import annotations

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
from script_args import Parser, count  # this folder is on sys.path


WAYS = ("libsvm", "blas", "gram")


def _fit(train, y, way: str) -> tuple[MISVM, float]:
    saved = misvm_module.svc_decision, misvm_module.GRAM_MAX_INSTANCES
    if way != "gram":
        misvm_module.GRAM_MAX_INSTANCES = 0
    if way == "libsvm":
        misvm_module.svc_decision = lambda svc, X: svc.decision_function(X)
    try:
        t0 = time.perf_counter()
        est = MISVM(random_state=0).fit(train, y)
        return est, time.perf_counter() - t0
    finally:
        misvm_module.svc_decision, misvm_module.GRAM_MAX_INSTANCES = saved


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(BENCHMARKS), choices=list(BENCHMARKS))
    parser.add_argument("--folds", type=count(1), default=5, help="training folds per data set (of the 50)")
    args = parser.parse_args()
    if args.folds > 50:
        parser.error(f"--folds must be at most 50 (of 5 x 10), got {args.folds}")
    out = {}
    with threadpool_limits(1):
        for name in args.datasets:
            data = load_benchmark(name)
            seconds = dict.fromkeys(WAYS, 0.0)
            for f in stratified_folds(data.y, 5, 10, random_state=0)[: args.folds]:
                bags = [data.bags[i] for i in f.train]
                train = BagStandardizer("feature").fit(bags).transform(bags)
                fits = {}
                for way in WAYS:
                    fits[way], t = _fit(train, data.y[f.train], way)
                    seconds[way] += t
                ref = fits["libsvm"]
                for way in WAYS[1:]:
                    est = fits[way]
                    if est.n_iter_ != ref.n_iter_ or not np.array_equal(est.instance_labels_, ref.instance_labels_):
                        raise SystemExit(f"{name} fold {f.repeat}.{f.fold}: {way} took another relabelling path")
            ratios = {f"libsvm / {w}": round(seconds["libsvm"] / seconds[w], 2) for w in WAYS[1:]}
            out[name] = {k: round(v, 2) for k, v in seconds.items()} | ratios
            print(f"{name:9s} {args.folds} folds: " + ", ".join(f"{w} {seconds[w]:6.2f} s" for w in WAYS)
                  + "; " + ", ".join(f"{k} {v:5.2f}" for k, v in ratios.items()) + " (same relabelling path)")
    print(json.dumps({"folds": args.folds, "datasets": out}))


if __name__ == "__main__":
    main()
