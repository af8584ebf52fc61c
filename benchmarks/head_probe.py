"""The exploratory probe behind round 5 of ``recommended_lodo.py`` (kept so it can be rerun; it saw test folds).

On 2 x 10 folds of one benchmark: the round-4 recipe with its prototypes left at their k-means++
start (``lr_prototypes=1e-30``, one epoch: training moves nothing), then the same pushed prototypes
and features under L1 heads refitted by ``fit_convex_head``: every feature ("all") or the similarity
block alone ("sim"), the strength chosen by inner log-loss or inner accuracy, and "pick", the
set whose best strength scores better on the same inner folds (``column_sets``). It prints the
accuracies and AUCs quoted at ``ROUND_5``; "all log_loss" is the round-4 head itself.

    MINITORCH_PROTO_DATA=../shared/data/mil python benchmarks/head_probe.py fox 2
"""
import time
import warnings

import numpy as np
from sklearn.metrics import roc_auc_score

from script_args import probe_arguments  # this folder is on sys.path
from recommended_lodo import BASE, ROUND_4  # this folder is on sys.path
from minitorch_proto import PrototypeMILClassifier, load_benchmark, stratified_folds
from minitorch_proto.convex_head import fit_convex_head

name, repeats = probe_arguments(__doc__)
warnings.filterwarnings("ignore")
#: The round-4 recipe, written out: RECOMMENDED has moved on since (two members, inner-accuracy choices),
#: and a rerun must probe the head the round-5 figures were measured on (one model: n_seeds=1).
ROUND_4_RECIPE = {**BASE, **ROUND_4["cosine, D1024, L1 head, similarity"]}
d = load_benchmark(name)
folds = stratified_folds(d.y, repeats, 10, random_state=0)
acc, auc = {}, {}
t0 = time.time()
for f in folds:
    btr, bte = [d.bags[i] for i in f.train], [d.bags[i] for i in f.test]
    ytr, yte = np.asarray(d.y)[f.train], np.asarray(d.y)[f.test]
    # The recipe shipped when the probe ran (round 4), its head log-loss-chosen on every feature.
    est = PrototypeMILClassifier(**{**ROUND_4_RECIPE, "epochs": 1, "lr_prototypes": 1e-30}, head_scoring="log_loss",
                                 head_features="all", n_seeds=1, random_state=f.seed).fit(btr, ytr)
    pos, yenc = yte == est.classes_[1], (ytr == est.classes_[1]).astype(int)
    ftr, fte = est.transform(btr), est.transform(bte)
    every = np.arange(ftr.shape[1])
    sim = every[-est.model_.prototypes.shape[0]:]
    for scoring in ("log_loss", "accuracy"):
        for key, sets in (("all", [every]), ("sim", [sim]), ("pick", [every, sim])):
            head = fit_convex_head(ftr, yenc, 2, penalty="l1", scoring=scoring, random_state=f.seed, column_sets=sets)
            s = fte @ head.weight[0] + head.bias[0]
            acc.setdefault(f"{key} {scoring}", []).append(((s > 0) == pos).mean())
            auc.setdefault(f"{key} {scoring}", []).append(roc_auc_score(pos, s))
print(name, f"{time.time() - t0:.0f}s", "accuracy", {k: round(float(np.mean(v)), 3) for k, v in acc.items()},
      "auc", {k: round(float(np.mean(v)), 3) for k, v in auc.items()}, flush=True)
