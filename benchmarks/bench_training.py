"""Batched trainer vs the per-bag loop, the full reproduction's wall time, scaling, and big-bag inference.

Run:  .venv/bin/python benchmarks/bench_training.py [--epochs-compare 10] [--runs 3] [--quick]

Prints a table per measurement and, as its LAST line, a JSON object with at least
ratio_musk1, ratio_musk2, full_reproduction_s, peak_rss_mb. The scaling plot goes to
benchmarks/out/scaling.png. Set MINITORCH_PROTO_DATA to the benchmark folder (the
Makefile does when ../shared/data/mil exists).
"""
from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from per_bag_loop import accuracy, train_per_bag  # noqa: E402
from script_args import Parser, count, freeze_commit  # noqa: E402

from minitorch_proto import PrototypeMIL, PrototypeMILConfig, load_benchmark, paper_configs, stratified_folds  # noqa: E402
from minitorch_proto.evaluation.cv import CVTask, evaluate_tasks  # noqa: E402
from minitorch_proto.data import BENCHMARKS  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def compare(name: str, epochs: int, runs: int, n_folds_loop: int | None) -> dict:
    """Same folds, same epochs: per-bag loop (one model after another) vs batched (all together)."""
    data = load_benchmark(name)
    folds = stratified_folds(data.y, 5, 10, random_state=0)
    mconf, tconf = paper_configs(name, epochs=epochs)
    loop_folds = folds[:n_folds_loop] if n_folds_loop else folds
    torch.set_num_threads(1)  # the faster setting for the loop too, on two cores
    # Untimed: torch's first optimiser step imports torch._dynamo (4.6 s against 0.4 s a fold after it),
    # which a --quick run's loop, scaled from 5 folds to 50, had multiplied tenfold (Musk1 "208x").
    train_per_bag(data.bags, data.y, folds[0].train[:4], folds[0].seed, 1, tconf.lr_prototypes, tconf.lr_classifier)
    loop_times, loop_acc = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        accs = []
        for f in loop_folds:
            model = train_per_bag(data.bags, data.y, f.train, f.seed, epochs, tconf.lr_prototypes, tconf.lr_classifier)
            accs.append(accuracy(model, data.bags, data.y, f.test))
        loop_times.append((time.perf_counter() - t0) * len(folds) / len(loop_folds))
        loop_acc.append(float(np.mean(accs)))
    timed = {}
    for backend in ("compiled", "tensor"):
        times, accs = [], []
        for _ in range(runs):
            t0 = time.perf_counter()
            res = evaluate_tasks([CVTask(name, data.bags, data.y, folds, mconf, tconf)], device="cpu",
                                      backend=backend)
            times.append(time.perf_counter() - t0)
            accs.append(float(res.accuracy.mean()))
        timed[backend] = (float(np.median(times)), float(np.mean(accs)))
    loop_s = float(np.median(loop_times))
    (batch_s, batch_acc), (tensor_s, tensor_acc) = timed["compiled"], timed["tensor"]
    row = dict(dataset=name, epochs=epochs, models=len(folds), loop_s=loop_s, batched_s=batch_s,
               ratio=loop_s / batch_s, tensor_s=tensor_s, ratio_tensor=loop_s / tensor_s,
               loop_accuracy=float(np.mean(loop_acc)), batched_accuracy=batch_acc, tensor_accuracy=tensor_acc,
               loop_folds_timed=len(loop_folds), runs=runs)
    print(f"{name}: per-bag loop {loop_s:.1f} s | batched, compiled backend (default on CPU) {batch_s:.2f} s, "
          f"ratio {row['ratio']:.1f}x | batched, tensor backend {tensor_s:.2f} s, ratio {row['ratio_tensor']:.1f}x "
          f"({len(folds)} models x {epochs} epochs; loop timed on {len(loop_folds)} folds and scaled; "
          f"median of {runs}); accuracy loop {row['loop_accuracy']:.3f} / compiled {batch_acc:.3f} / "
          f"tensor {tensor_acc:.3f}", flush=True)
    return row


def warm_up() -> float:
    """Compile (or load from numba's on-disk cache) the compiled backend once, outside the timings."""
    from minitorch_proto.training import train_batched
    from minitorch_proto.training import TrainConfig

    rng = np.random.default_rng(0)
    bags = [rng.normal(size=(3, 4)) for _ in range(6)]
    t0 = time.perf_counter()
    train_batched(bags, np.arange(6) % 2, [np.arange(6)], [0], PrototypeMILConfig(n_prototypes=2),
                  TrainConfig(epochs=1), device="cpu", eval_sets=[np.arange(6)])
    seconds = time.perf_counter() - t0
    print(f"compiled backend ready in {seconds:.1f} s (first use on a machine compiles, later runs load the cache)")
    return seconds


def full_reproduction(runs: int, epochs: int = 100) -> float:
    """Five data sets, 5 x 10 CV, Table 1 settings, paper-faithful: the whole Table 2."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        tasks = []
        for name in BENCHMARKS:
            d = load_benchmark(name)
            mconf, tconf = paper_configs(name, epochs=epochs)
            tasks.append(CVTask(name, d.bags, d.y, stratified_folds(d.y, 5, 10), mconf, tconf))
        res = evaluate_tasks(tasks, device="cpu")
        times.append(time.perf_counter() - t0)
        acc = res.groupby("dataset", sort=False).accuracy.mean().round(3).to_dict()
        print(f"full reproduction: {times[-1]:.1f} s; accuracy {acc}", flush=True)
    return float(np.median(times))


def scaling(quick: bool) -> dict:
    """Time per epoch against total instances, and against the number of models trained together."""
    from minitorch_proto.training import train_batched
    from minitorch_proto.training import TrainConfig

    rng = np.random.default_rng(0)
    mconf = PrototypeMILConfig()
    tconf = TrainConfig(epochs=2)
    sizes = [4, 8, 16, 32] if quick else [4, 8, 16, 32, 64, 128]
    inst_rows = []
    for k in sizes:  # 100 bags of k instances, 10 models
        bags = [rng.normal(size=(k, 166)) for _ in range(100)]
        y = np.arange(100) % 2
        t0 = time.perf_counter()
        train_batched(bags, y, [np.arange(100)] * 10, list(range(10)), mconf, tconf, device="cpu")
        inst_rows.append((100 * k, (time.perf_counter() - t0) / 2))
    data = load_benchmark("musk1")
    folds = stratified_folds(data.y, 10, 10)
    counts = [1, 5, 10, 25, 50] if quick else [1, 2, 5, 10, 25, 50, 100]
    model_rows = []
    for m in counts:
        t0 = time.perf_counter()
        train_batched(data.bags, data.y, [f.train for f in folds[:m]], [f.seed for f in folds[:m]], mconf, tconf,
                      device="cpu")
        model_rows.append((m, (time.perf_counter() - t0) / 2))
    print("time per epoch vs total instances (10 models):",
          ", ".join(f"{n}: {t:.3f}s" for n, t in inst_rows))
    print("time per epoch vs models trained together (Musk1):",
          ", ".join(f"{m}: {t:.3f}s ({t / m * 1e3:.1f} ms/model)" for m, t in model_rows))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        n, t = zip(*inst_rows)
        axes[0].loglog(n, t, "o-", label="compiled backend")
        axes[0].loglog(n, [t[-1] * x / n[-1] for x in n], "--", label="linear in instances")
        axes[0].legend()
        axes[0].set_xlabel("total instances per epoch (per model)")
        axes[0].set_ylabel("seconds per epoch (10 models)")
        axes[0].set_title("time vs instances")
        m, t = zip(*model_rows)
        axes[1].loglog(m, t, "o-", label="trained together (2 cores)")
        axes[1].loglog(m, [t[0] * x for x in m], "--", label="linear (one after another)")
        axes[1].set_xlabel("models trained together (Musk1 folds)")
        axes[1].set_ylabel("seconds per epoch")
        axes[1].legend()
        axes[1].set_title("time vs number of models")
        fig.tight_layout()
        OUT.mkdir(parents=True, exist_ok=True)
        fig.savefig(OUT / "scaling.png", dpi=120)
        print(f"scaling plot: {OUT / 'scaling.png'}")
    except ImportError:
        pass
    slope_inst = float(np.polyfit(np.log([r[0] for r in inst_rows]), np.log([r[1] for r in inst_rows]), 1)[0])
    slope_models = float(np.polyfit(np.log([r[0] for r in model_rows]), np.log([r[1] for r in model_rows]), 1)[0])
    print(f"log-log slopes: instances {slope_inst:.2f} (1 = linear), models {slope_models:.2f} (< 1 = sub-linear)")
    return {"scaling_slope_instances": slope_inst, "scaling_slope_models": slope_models}


def big_inference(n_instances: int, n_features: int = 512, chunk: int = 65_536) -> dict:
    """Pooled distance features of 1,000,000 x 512 instances from a memmap, chunk by chunk."""
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "instances.f32"
        X = np.memmap(path, dtype=np.float32, mode="w+", shape=(n_instances, n_features))
        for s in range(0, n_instances, chunk):
            X[s : s + chunk] = rng.standard_normal((min(chunk, n_instances - s), n_features), dtype=np.float32)
        X.flush()
        del X
        X = np.memmap(path, dtype=np.float32, mode="r", shape=(n_instances, n_features))
        n_bags = 1000
        bag_index = np.sort(rng.integers(0, n_bags, n_instances))
        bag_index[:n_bags] = np.arange(n_bags)
        bag_index.sort()
        model = PrototypeMIL(n_features, 2, PrototypeMILConfig(pooling=("min", "mean", "max")))
        rss0 = peak_rss_mb()
        torch.set_num_threads(os.cpu_count() or 1)
        t0 = time.perf_counter()
        phi, _ = model.pooled_chunked(X, bag_index, n_bags, chunk_size=chunk)
        dt = time.perf_counter() - t0
        torch.set_num_threads(1)
    rate = n_instances / dt
    print(f"inference: {n_instances:,} x {n_features} instances -> {tuple(phi.shape)} pooled features in {dt:.1f} s "
          f"({rate:,.0f} instances/s), chunk {chunk:,} rows; peak RSS grew by {peak_rss_mb() - rss0:.0f} MB "
          f"(the data alone would be {n_instances * n_features * 4 / 2**20:.0f} MB)")
    return {"inference_instances_per_s": rate, "inference_s": dt}


def freeze_scaling(slopes: dict, commit: str) -> None:
    """The scaling plot as the book's figure, with a provenance file naming the command and ``commit`` (the code
    version read before the run)."""
    import datetime

    from minitorch_proto.outputs import write_together

    book = Path(__file__).resolve().parents[1] / "book" / "data"
    record = {"command": "python benchmarks/bench_training.py --scaling-only --freeze", "commit": commit,
              "date": datetime.date.today().isoformat(), "cpu_count": os.cpu_count(), **slopes}
    # The figure and its provenance are published together: a stop leaves the old pair, never a new figure
    # under the old record.
    write_together({book / "scaling.png": (OUT / "scaling.png").read_bytes(),
                    book / "scaling.json": json.dumps(record, indent=1) + "\n"})
    print(f"froze {book / 'scaling.png'} and scaling.json at {commit}")


def main() -> None:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs-compare", type=count(1), default=10, help="epochs for the side-by-side comparison")
    ap.add_argument("--runs", type=count(1), default=3, help="runs per timing (median reported)")
    ap.add_argument("--loop-folds", type=count(1), default=None, help="time the loop on this many folds and scale")
    ap.add_argument("--quick", action="store_true", help="smaller settings, for a smoke run")
    ap.add_argument("--scaling-only", action="store_true", help="only the scaling step (its plot)")
    ap.add_argument("--freeze", action="store_true",
                    help="with --scaling-only: copy the plot to book/data/scaling.png with scaling.json beside it "
                    "(command, code version, slopes), the book's figure and its provenance")
    args = ap.parse_args()
    if args.freeze and (not args.scaling_only or args.quick):
        ap.error("--freeze goes with --scaling-only and full settings")
    # Now, not at the write: a dirty tree is refused before the work, and no edit made meanwhile is recorded.
    commit = freeze_commit(ap) if args.freeze else None
    if args.quick:
        args.epochs_compare, args.runs, args.loop_folds = 2, 1, 5
    if args.scaling_only:
        warm_up()
        slopes = scaling(args.quick)
        if args.freeze:
            freeze_scaling(slopes, commit)
        return
    summary = {"compile_s": warm_up()}
    for name in ("musk1", "musk2"):
        row = compare(name, args.epochs_compare, args.runs, args.loop_folds)
        summary[f"ratio_{name}"] = row["ratio"]
        summary[f"loop_s_{name}"] = row["loop_s"]
        summary[f"batched_s_{name}"] = row["batched_s"]
        summary[f"ratio_tensor_{name}"] = row["ratio_tensor"]
    summary["full_reproduction_s"] = full_reproduction(1 if args.quick else args.runs, epochs=5 if args.quick else 100)
    summary.update(scaling(args.quick))
    summary.update(big_inference(100_000 if args.quick else 1_000_000))
    summary["peak_rss_mb"] = peak_rss_mb()
    summary["epochs_compare"] = args.epochs_compare
    summary["quick"] = bool(args.quick)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
