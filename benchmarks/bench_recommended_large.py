"""The recommended model on one large collection: fit time, the seeding's share, and what its sample costs.

k-means++ seeding passes over every instance it sees once per prototype, so on a large
collection it outlasts the rest of the fit. ``init_prototypes`` therefore seeds from a uniform
sample of ``max(KMEANS_SAMPLE, 8 x D)`` training instances (``minitorch_proto.model``). This
fits ``PrototypeMILClassifier.recommended(n_seeds=1)`` on a single-concept collection
(``make_single_concept_test``: background ``N(0, I)``, a few concept instances in each positive
bag, no poison) twice, once with the sample and once seeding from every training instance, and
prints, for each, the fit time, the seeding time and the test bags' AUC, then the process's peak
resident memory::

    python benchmarks/bench_recommended_large.py        # 60 + 60 bags of about 1,000 x 512 features: the time
    python benchmarks/bench_recommended_large.py --features 64 --size 600 --separation 5 --spread 1 --seeds 10
                                                        # a concept that is hard to find: what the sample costs

The LAST line of output is a JSON object.
"""
from __future__ import annotations

import json
import resource
import time
import warnings

import torch

import minitorch_proto.model as model_module
from minitorch_proto import PrototypeMILClassifier
from minitorch_proto.data import make_single_concept_test
from minitorch_proto.evaluation.metrics import scores_from_proba
from script_args import Parser, count  # this folder is on sys.path


def fit_once(train, test, sample: int | None, seed: int) -> dict:
    """Fit with k-means++ seeding from ``sample`` instances at most (None: the package's rule)."""
    seeding = []
    shipped_sample, shipped_init = model_module.KMEANS_SAMPLE, model_module.init_prototypes

    def timed_init(*args, **kwargs):
        t0 = time.perf_counter()
        out = shipped_init(*args, **kwargs)
        seeding.append(time.perf_counter() - t0)
        return out

    model_module.KMEANS_SAMPLE = shipped_sample if sample is None else sample
    model_module.init_prototypes = timed_init
    try:
        t0 = time.perf_counter()
        clf = PrototypeMILClassifier.recommended(n_seeds=1, random_state=seed).fit(train.bags, train.y)
        seconds = time.perf_counter() - t0
    finally:
        model_module.KMEANS_SAMPLE, model_module.init_prototypes = shipped_sample, shipped_init
    accuracy, auc = scores_from_proba(test.y, clf.predict_proba(test.bags))
    return {"fit_s": seconds, "seeding_s": float(sum(seeding)), "auc": auc, "accuracy": accuracy}


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--bags", type=count(1), default=60, help="training bags (as many test bags)")
    # At least 2: the smallest bag holds 80% of the mean, rounded down.
    parser.add_argument("--size", type=count(2), default=1000, help="mean instances per bag (+-20%%)")
    parser.add_argument("--features", type=count(1), default=512)
    parser.add_argument("--separation", type=float, default=1.0, help="distance of the concept from the origin")
    parser.add_argument("--spread", type=float, default=0.5,
                        help="the concept's standard deviation (the background's is 1; at 1 only the mean "
                             "tells them apart)")
    parser.add_argument("--seeds", type=count(1), default=1, help="collections (and model seeds) 0..seeds-1")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    size = (int(args.size * 0.8), int(args.size * 1.2))
    rows = []
    print(f"{'seed':>4} {'seeding':>22} {'instances':>9} {'fit s':>7} {'seeding s':>9} {'AUC':>6} {'accuracy':>8}")
    for seed in range(args.seeds):
        train, test = make_single_concept_test(args.bags, args.bags, args.features, size, seed, poison=False,
                                               separation=args.separation, spread=args.spread,
                                               concept_per_bag=(5, 20))
        n = int(sum(len(b) for b in train.bags))
        for label, sample in (("sample (shipped)", None), ("every instance", n)):
            row = {"seed": seed, "seeding": label, "instances": n, **fit_once(train, test, sample, seed)}
            rows.append(row)
            print(f"{seed:>4} {label:>22} {n:>9} {row['fit_s']:>7.1f} {row['seeding_s']:>9.1f} {row['auc']:>6.3f} "
                  f"{row['accuracy']:>8.3f}", flush=True)
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB
    data_gb = sum(b.nbytes for b in train.bags) / 2**30
    print(f"peak resident memory {peak_gb:.2f} GiB for {data_gb:.2f} GiB of training instances (the last collection)")
    print(json.dumps({"rows": rows, "kmeans_sample": model_module.KMEANS_SAMPLE, "peak_rss_gib": peak_gb,
                      "train_data_gib": data_gb,
                      "threads": torch.get_num_threads(), "features": args.features, "bags": args.bags}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
