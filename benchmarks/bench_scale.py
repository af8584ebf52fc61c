"""Scale benchmark: a synthetic pathology-like bag collection on disk, trained with 1 and 2 processes.

Run:  .venv/bin/python benchmarks/bench_scale.py [--bags 500] [--instances 2000] [--features 512]
      [--instance-sweep 250,500,1000,2000] [--bag-sweep 62,125,250,500] [--procs 1,2] [--epochs 2]

Writes the collection once (one float32 .npy per bag plus labels.csv, under --data-dir,
reused when it already matches), then trains the streaming trainer
(``minitorch_proto.training.distributed.train_streaming``) on it in fresh processes:
one plain process, or ``torchrun --nproc_per_node N`` with the gloo backend on
127.0.0.1. Every run has its own processes, so its peak memory (the largest over its
ranks) is that run's alone.

Reported per run: seconds per epoch (mean over the epochs after the first), instances
per second, peak memory (the resident set's high-water mark during training, per process, and
"+MB": how much of it training added to the imported libraries), and the arithmetic floor: the distance products' FLOPs per
epoch (2 x instances x features x prototypes) at this machine's measured matrix-product
rate for the same shapes on one thread, times the ratio of measured time to that floor.
Log-log slopes of seconds per epoch against instances per bag and against the number
of bags (one process) say how time grows. The LAST line of output is a JSON object.

``--bf16-cv musk1,musk2`` instead measures what bf16 autocast of the distance products
costs in accuracy: the tensor engine on the CPU, Table 1 settings, stratified CV
(``--cv-repeats`` x 10 folds, the same folds and seeds), float32 against bf16.
Needs MINITORCH_PROTO_DATA pointing at the benchmark files.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from script_args import Parser, count, count_list  # this folder is on sys.path

ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------- collection
def write_collection(folder: Path, n_bags: int, n_instances: int, n_features: int, seed: int = 0) -> Path:
    """Pathology-like bags: a mixture of "tissue" clusters; positive bags hold a few % "tumour" instances.

    Returns the labels CSV; skips the work when ``folder`` already holds this collection.
    """
    meta = {"bags": n_bags, "instances": n_instances, "features": n_features, "seed": seed}
    meta_path = folder / "collection.json"
    labels = folder / "labels.csv"
    if meta_path.exists() and json.loads(meta_path.read_text()) == meta and labels.exists():
        return labels
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    tissues = rng.normal(size=(8, n_features)).astype(np.float32) * 2.0
    tumour = rng.normal(size=n_features).astype(np.float32) * 2.0
    y = np.arange(n_bags) % 2
    for i in range(n_bags):
        which = rng.integers(0, len(tissues), size=n_instances)
        X = tissues[which] + rng.standard_normal((n_instances, n_features), dtype=np.float32)
        if y[i]:
            k = max(1, int(0.03 * n_instances))
            X[:k] = tumour + rng.standard_normal((k, n_features), dtype=np.float32)
            rng.shuffle(X, axis=0)
        tmp = folder / f".bag{i:05d}.npy.part"
        with open(tmp, "wb") as fh:
            np.save(fh, X)
        os.replace(tmp, folder / f"bag{i:05d}.npy")
    tmp = folder / ".labels.csv.part"
    tmp.write_text("bag,label\n" + "".join(f"bag{i:05d},{y[i]}\n" for i in range(n_bags)))
    os.replace(tmp, labels)
    meta_path.write_text(json.dumps(meta))
    return labels


class _Truncated:
    """The first ``n_bags`` bags of a dataset, each cut to its first ``max_instances`` rows (read lazily)."""

    def __init__(self, data, n_bags: int, max_instances: int) -> None:
        self.data, self.n, self.k = data, int(n_bags), int(max_instances)
        self.sizes = np.minimum(data.sizes[: self.n], self.k)
        self.n_features = data.n_features

    def __len__(self) -> int:
        return self.n

    def rows(self, i: int, start: int, stop: int) -> np.ndarray:
        return self.data.rows(i, start, min(stop, int(self.sizes[i])))

    def __getitem__(self, i: int) -> np.ndarray:
        return self.rows(i, 0, int(self.sizes[i]))


# ----------------------------------------------------------------------- worker
def worker(args) -> None:
    """One training run (one rank of it under torchrun); rank 0 prints a JSON line."""
    import torch

    from minitorch_proto.data.disk import DiskBagDataset
    from minitorch_proto.model import PrototypeMILConfig
    from minitorch_proto.training.config import TrainConfig
    from minitorch_proto.training.distributed import init_distributed, train_streaming

    torch.set_num_threads(1)
    rank, world = init_distributed(args.device)
    data = DiskBagDataset(args.data_dir, Path(args.data_dir) / "labels.csv")
    view = _Truncated(data, args.run_bags, args.run_instances)
    y = np.asarray(data.y[: view.n], dtype=np.int64)
    # torch.optim imports torch._dynamo on first use (~3 s): a start-up cost, not training.
    torch.optim.Adam([torch.zeros(1, requires_grad=True)])
    cuda = args.device.startswith("cuda")
    if cuda:
        torch.zeros(1, device=args.device)  # the CUDA context (~0.3 GB resident) is a start-up cost too
    baseline = _rss_mb("VmRSS")
    _reset_peak_rss()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    fit = train_streaming(
        view, y, PrototypeMILConfig(n_prototypes=args.prototypes),
        TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr_prototypes=1e-3, lr_classifier=1e-3),
        seed=0, chunk_size=args.chunk_size, autocast=args.autocast, device=args.device,
    )
    epochs = [h["seconds"] for h in fit.history]
    timed = epochs[1:] if len(epochs) > 1 else epochs
    peak = torch.tensor([_rss_mb("VmHWM"), _rss_mb("VmHWM") - baseline])
    if world > 1:
        torch.distributed.all_reduce(peak, op=torch.distributed.ReduceOp.MAX)
    if rank == 0:
        print("RESULT " + json.dumps({
            "procs": world, "bags": view.n, "instances_per_bag": args.run_instances,
            "instances": int(view.sizes.sum()), "s_per_epoch": float(np.mean(timed)),
            "standardize_s": fit.seconds - float(np.sum(epochs)), "peak_mb": float(peak[0]),
            "added_mb": float(peak[1]),
            "gpu_peak_mb": torch.cuda.max_memory_allocated() / 2**20 if cuda else None,
            "final_loss": fit.history[-1]["total"],
        }), flush=True)
    if world > 1:
        torch.distributed.destroy_process_group()


def _rss_mb(field: str) -> float:
    """VmRSS (now) or VmHWM (peak since the last reset) of this process, MiB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _reset_peak_rss() -> None:
    """Start VmHWM afresh, so the peak is training's and not the imports' (Linux >= 4.0)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(args, n_bags: int, n_instances: int, procs: int) -> dict:
    base = [__file__, "--worker", "--data-dir", str(args.data_dir), "--run-bags", str(n_bags),
            "--run-instances", str(n_instances), "--epochs", str(args.epochs), "--batch-size", str(args.batch_size),
            "--chunk-size", str(args.chunk_size), "--prototypes", str(args.prototypes), "--device", args.device]
    if args.autocast:
        base += ["--autocast", args.autocast]
    if procs == 1:
        cmd = [sys.executable] + base
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", str(procs),
               "--master_addr", "127.0.0.1", "--master_port", str(_free_port())] + base
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"run failed ({' '.join(cmd)}):\n{out.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def matmul_rate(chunk: int, n_features: int, n_prototypes: int, seconds: float = 1.0, threads: int = 1,
                device: str = "cpu") -> float:
    """FLOP/s of the distance product X (chunk x L) @ P^T (L x D), float32, on ``threads`` threads or a GPU.

    On a GPU the products are queued back to back and timed to the last one's end, so this is
    the rate of the product itself at this (small, launch-bound) shape, not the card's peak.
    """
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    try:
        X = torch.randn(chunk, n_features, device=device)
        P = torch.randn(n_prototypes, n_features, device=device)
        for _ in range(3):
            X @ P.T
        sync()
        reps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for _ in range(10):
                X @ P.T
            sync()
            reps += 10
        return 2.0 * chunk * n_features * n_prototypes * reps / (time.perf_counter() - t0)
    finally:
        torch.set_num_threads(previous)


def bf16_cv(names: list[str], repeats: int, epochs: int | None, device: str = "cpu") -> dict:
    """Accuracy and AUC of float32 vs bf16-autocast training, same folds, tensor engine on ``device``."""
    from minitorch_proto.data import load_benchmark
    from minitorch_proto.evaluation.cv import stratified_folds
    from minitorch_proto.evaluation.metrics import scores_from_proba
    from minitorch_proto.paper import paper_configs
    from minitorch_proto.training import train_batched

    out = {}
    print(f"{'data set':>8} {'precision':>9} {'accuracy':>9} {'AUC':>7} {'train s':>8}")
    for name in names:
        data = load_benchmark(name)
        folds = stratified_folds(data.y, repeats, 10, random_state=0)
        mconf, tconf = paper_configs(name, epochs=epochs)
        per = {}
        for precision in ("float32", "bf16"):
            t0 = time.perf_counter()
            fit = train_batched(data.bags, data.y, [f.train for f in folds], [f.seed for f in folds], mconf, tconf,
                                eval_sets=[f.test for f in folds], device=device, backend="tensor",
                                autocast=None if precision == "float32" else "bf16")
            seconds = time.perf_counter() - t0
            last = int(tconf.epochs)
            scores = np.array([scores_from_proba(np.asarray(data.y)[f.test], fit.evaluations[last][m])
                               for m, f in enumerate(folds)])
            per[precision] = {"accuracy": float(scores[:, 0].mean()), "auc": float(np.nanmean(scores[:, 1])),
                              "fold_accuracy": scores[:, 0].tolist(), "seconds": seconds}
            print(f"{name:>8} {precision:>9} {per[precision]['accuracy']:>9.3f} {per[precision]['auc']:>7.3f} "
                  f"{seconds:>8.1f}", flush=True)
        diff = np.array(per["bf16"]["fold_accuracy"]) - np.array(per["float32"]["fold_accuracy"])
        per["accuracy_change"] = float(diff.mean())
        per["folds_changed"] = int((diff != 0).sum())
        out[name] = per
    return out


def slope(x, y) -> float:
    return float(np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)[0])


def main() -> None:
    p = Parser(description=__doc__.split("\n")[0])
    p.add_argument("--bags", type=count(1), default=500)
    p.add_argument("--instances", type=count(1), default=2000, help="instances per bag in the written collection")
    p.add_argument("--features", type=count(1), default=512)
    p.add_argument("--prototypes", type=count(1), default=24)
    p.add_argument("--instance-sweep", type=count_list(1), default="250,500,1000,2000")
    p.add_argument("--bag-sweep", type=count_list(1), default="62,125,250,500")
    p.add_argument("--procs", type=count_list(1), default="1,2")
    p.add_argument("--epochs", type=count(1), default=2)
    p.add_argument("--batch-size", type=count(1), default=8, help="global minibatch (bags)")
    p.add_argument("--chunk-size", type=count(1), default=8192)
    p.add_argument("--autocast", default=None, choices=[None, "bf16"])
    p.add_argument("--device", default="cpu", help="cpu or cuda (one process per GPU: --procs 1 on one card)")
    p.add_argument("--data-dir", default=None, help="where the collection is written (default: a temp folder)")
    p.add_argument("--bf16-cv", default=None, help="comma-separated benchmarks: measure bf16's accuracy effect instead")
    p.add_argument("--cv-repeats", type=count(1), default=1)
    p.add_argument("--cv-epochs", type=count(1), default=None, help="epochs for --bf16-cv (default: Table 1's 100)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--run-bags", type=int, help=argparse.SUPPRESS)
    p.add_argument("--run-instances", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args)
        return
    if args.bf16_cv:
        import torch

        torch.set_num_threads(1)
        res = bf16_cv([n.strip() for n in args.bf16_cv.split(",")], args.cv_repeats, args.cv_epochs, args.device)
        print(json.dumps({"bf16_cv": res, "repeats": args.cv_repeats, "folds": 10, "epochs": args.cv_epochs or 100,
                          "device": args.device}))
        return
    isweep = sorted({min(v, args.instances) for v in args.instance_sweep})
    bsweep = sorted({min(v, args.bags) for v in args.bag_sweep})
    procs = args.procs
    tmp = None
    if args.data_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="bench_scale_")
        args.data_dir = tmp.name
    args.data_dir = Path(args.data_dir)
    t0 = time.perf_counter()
    write_collection(args.data_dir, args.bags, args.instances, args.features)
    write_s = time.perf_counter() - t0
    rate = matmul_rate(min(args.chunk_size, args.instances), args.features, args.prototypes, device=args.device)
    print(f"collection: {args.bags} bags x {args.instances} instances x {args.features} features (float32 .npy, "
          f"{args.bags * args.instances * args.features * 4 / 2**30:.2f} GiB) ready in {write_s:.1f} s; "
          f"matmul rate {rate / 1e9:.1f} GFLOP/s ({'1 thread' if args.device == 'cpu' else args.device}, float32)")

    plan = [(args.bags, k, 1) for k in isweep] + [(b, args.instances, 1) for b in bsweep if b != args.bags]
    plan += [(args.bags, args.instances, n) for n in procs if n != 1]
    rows = []
    for n_bags, k, n in plan:
        r = run(args, n_bags, k, n)
        flops = 2.0 * r["instances"] * args.features * args.prototypes
        r["floor_s"] = flops / (rate * n)
        r["ratio_to_floor"] = r["s_per_epoch"] / r["floor_s"]
        r["instances_per_s"] = r["instances"] / r["s_per_epoch"]
        rows.append(r)
        print(f"  done: {n} proc, {n_bags} bags x {k}: {r['s_per_epoch']:.2f} s/epoch", flush=True)

    header = f"{'procs':>5} {'bags':>5} {'inst/bag':>8} {'instances':>10} {'s/epoch':>8} {'inst/s':>10} " \
             f"{'peak MB':>8} {'+MB':>6} {'floor s':>8} {'x floor':>7}"
    print("\n" + header)
    for r in rows:
        print(f"{r['procs']:>5} {r['bags']:>5} {r['instances_per_bag']:>8} {r['instances']:>10} "
              f"{r['s_per_epoch']:>8.2f} {r['instances_per_s']:>10.0f} {r['peak_mb']:>8.0f} {r['added_mb']:>6.0f} "
              f"{r['floor_s']:>8.3f} "
              f"{r['ratio_to_floor']:>7.1f}")
    one = [r for r in rows if r["procs"] == 1]
    by_k = sorted((r for r in one if r["bags"] == args.bags), key=lambda r: r["instances_per_bag"])
    by_b = sorted((r for r in one if r["instances_per_bag"] == args.instances), key=lambda r: r["bags"])
    summary = {
        "bags": args.bags, "instances_per_bag": args.instances, "features": args.features,
        "prototypes": args.prototypes, "epochs": args.epochs, "batch_size": args.batch_size,
        "chunk_size": args.chunk_size, "autocast": args.autocast, "device": args.device, "matmul_gflops": rate / 1e9,
        "write_s": write_s,
        "slope_vs_instances_per_bag": slope([r["instances_per_bag"] for r in by_k], [r["s_per_epoch"] for r in by_k])
        if len(by_k) > 1 else None,
        "slope_vs_bags": slope([r["bags"] for r in by_b], [r["s_per_epoch"] for r in by_b]) if len(by_b) > 1 else None,
        "runs": rows,
    }
    full = {r["procs"]: r for r in rows if r["bags"] == args.bags and r["instances_per_bag"] == args.instances}
    if 1 in full and 2 in full:
        summary["speedup_2_procs"] = full[1]["s_per_epoch"] / full[2]["s_per_epoch"]
    print(f"\nlog-log slope of s/epoch: vs instances per bag {summary['slope_vs_instances_per_bag']}, "
          f"vs bags {summary['slope_vs_bags']}" + (f"; 2-process speed-up {summary['speedup_2_procs']:.2f}x"
                                                   if "speedup_2_procs" in summary else ""))
    print(json.dumps(summary))
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
