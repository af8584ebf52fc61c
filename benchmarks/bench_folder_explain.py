"""What a whole-slide user waits for after training: predict, explain and draw a folder of bags.

A folder of float32 ``.h5`` bags with patch coordinates (CLAM's layout; default 100 bags of
1,000 x 512 on a 32 x 32 grid of patches) is written once; ``PrototypeMILClassifier.recommended()``
(two members, as shipped, one training epoch as shipped) is fitted on 40% of them; then, each
timed on the whole folder:

- ``predict``: ``predict_proba`` (every member scored from one read of each group of bags);
- ``explain``: ``evidence_table(..., "removal")`` (one bag at a time, float64, both members);
- ``draw``: ``plot_evidence_map`` and ``savefig`` of every bag (what ``explain --heatmaps`` adds).

It prints seconds per bag and the ratio of each step to ``predict``. The same script runs on
older code (``git worktree add /tmp/old <commit>; cd /tmp/old; PYTHONPATH=. python
/path/to/bench_folder_explain.py``), except ``draw`` before ``plot_evidence_map`` existed.
The LAST line of output is a JSON object.
"""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bags", type=int, default=100, help="slides (at least 10: the model trains on 40%% of them)")
    ap.add_argument("--grid", type=int, default=32, help="patches per side (bag size: grid squared)")
    ap.add_argument("--features", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.bags < 10:  # the convex head needs two training bags of each class
        ap.error(f"--bags must be at least 10, got {args.bags}")
    # Checked here, not with the package's argparse types: this script also runs on older checkouts.
    for name in ("grid", "features"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if not 0 <= args.seed < 2**32:
        ap.error(f"--seed must be from 0 to 2**32 - 1, got {args.seed}")

    import torch

    from minitorch_proto.data.disk import DiskBagDataset, write_bag_folder
    from minitorch_proto.estimator import PrototypeMILClassifier
    from minitorch_proto.evaluation.evidence import evidence_table

    rng = np.random.default_rng(args.seed)
    n = args.grid**2
    gx, gy = np.meshgrid(np.arange(args.grid), np.arange(args.grid))
    xy = np.c_[gx.ravel(), gy.ravel()] * 256
    y = np.arange(args.bags) % 2
    bags = [rng.normal(size=(n, args.features)).astype(np.float32) for _ in range(args.bags)]
    for bag, label in zip(bags, y):  # a positive bag holds a few shifted patches
        if label:
            bag[rng.choice(n, 10, replace=False)] += 1.5
    root = Path(tempfile.mkdtemp(prefix="bench_folder_"))
    try:
        has_coords = "instance_arrays" in write_bag_folder.__code__.co_varnames
        extra = {"instance_arrays": {"coords": [xy] * args.bags}} if has_coords else {}
        labels = write_bag_folder(root, bags, y, fmt="h5", **extra)
        folder = DiskBagDataset(root, labels)
        del bags
        clf = PrototypeMILClassifier.recommended(random_state=args.seed)
        n_train = max(2, int(0.4 * args.bags))
        clf.fit([folder[i] for i in range(n_train)], y[:n_train])
        times = {}
        t = time.perf_counter()
        proba = clf.predict_proba(folder)
        times["predict"] = time.perf_counter() - t
        t = time.perf_counter()
        table = evidence_table(clf, folder, folder.bag_ids, "removal")
        times["explain"] = time.perf_counter() - t
        if has_coords:
            from minitorch_proto.plots import plot_evidence_map

            t = time.perf_counter()
            limit = float(table["evidence"].abs().max())
            where = {bag: i for i, bag in enumerate(folder.bag_ids)}
            for bag, rows in table.groupby("bag", sort=False):
                fig = plot_evidence_map(folder.instance_array(where[bag], "coords"),
                                        rows.sort_values("instance")["evidence"].to_numpy(), top=3, limit=limit)
                fig.savefig(root / f"{bag}.png", dpi=110)
            times["draw"] = time.perf_counter() - t
    finally:
        shutil.rmtree(root, ignore_errors=True)  # the folder is hundreds of MB at the default shape
    for name, sec in times.items():
        print(f"{name:8s} {sec:7.2f} s  {sec / args.bags * 1000:7.1f} ms per bag  {sec / times['predict']:5.2f}x predict")
    result = {"bags": args.bags, "instances_per_bag": n, "features": args.features, "members": len(clf.models_),
              "threads": torch.get_num_threads(), "seconds": {k: round(v, 3) for k, v in times.items()},
              "proba_gap": float(np.mean(proba[y == 1, 1]) - np.mean(proba[y == 0, 1]))}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
