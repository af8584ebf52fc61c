"""The exploratory probe behind round 4 of ``recommended_lodo.py`` (kept so it can be rerun; it saw test folds).

On 2 x 10 folds of one benchmark: the shipped recipe with its prototypes left at their k-means++
start (``lr_prototypes=1e-30``, one epoch: the variants had shown training moves nothing), then the
same pushed prototypes under three L1 heads refitted by ``fit_convex_head``: the pooled distances
and MILES's similarity block ("phi+simE"), the similarity block alone ("simE"), and the average of
the shipped head's and the similarity-only head's probabilities ("avg"). It printed the
accuracies and AUCs quoted at ``ROUND_4``. Written before ``head_similarity`` existed, so it builds
the block with ``miles_embedding`` on the standardised bags, its sigma^2 the median squared distance of
1,000 training instances drawn by ``default_rng(0)`` (the package's rule draws them by the fold's seed,
so the variant's numbers differ a little).

    MINITORCH_PROTO_DATA=../shared/data/mil python benchmarks/similarity_probe.py fox 2
"""
import time
import warnings
import numpy as np, torch
from sklearn.metrics import roc_auc_score
from script_args import probe_arguments  # this folder is on sys.path
from recommended_lodo import BASE, ROUND_3  # this folder is on sys.path
from minitorch_proto import PrototypeMILClassifier, load_benchmark, stratified_folds
from minitorch_proto.baselines.miles import miles_embedding
from minitorch_proto.convex_head import fit_convex_head

name, repeats = probe_arguments(__doc__)
warnings.filterwarnings("ignore")
#: The round-3 recipe, written out (RECOMMENDED has moved on since: a similarity head, two members).
ROUND_3_RECIPE = {**BASE, **ROUND_3["cosine, D1024, L1 head"]}
d = load_benchmark(name)
folds = stratified_folds(d.y, repeats, 10, random_state=0)
res = {k: [] for k in ["base", "phi+simE", "simE", "avg"]}
auc = {k: [] for k in res}
t0 = time.time()
for f in folds:
    tr, te = f.train, f.test
    btr = [d.bags[i] for i in tr]; bte = [d.bags[i] for i in te]
    ytr, yte = np.asarray(d.y)[tr], np.asarray(d.y)[te]
    # The recipe shipped when the probe ran (round 3), without the block it probes.
    est = PrototypeMILClassifier(**{**ROUND_3_RECIPE, "epochs": 1, "lr_prototypes": 1e-30}, head_similarity=False,
                                 head_features="all", head_scoring="log_loss", n_seeds=1,
                                 random_state=f.seed).fit(btr, ytr)
    p = est.predict_proba(bte)[:, 1]
    pos = (yte == est.classes_[1])
    res["base"].append(((p > .5) == pos).mean()); auc["base"].append(roc_auc_score(pos, p))
    ftr, fte = est.transform(btr), est.transform(bte)
    str_, ste = est.standardizer_.transform(btr), est.standardizer_.transform(bte)
    P = est.model_.prototypes.detach().double().numpy()
    flat = np.concatenate(str_)
    rng = np.random.default_rng(0); s = flat[rng.choice(len(flat), min(1000, len(flat)), replace=False)]
    sigma2 = np.median(torch.pdist(torch.as_tensor(s)).pow(2).numpy())
    eTr, eTe = miles_embedding(str_, P, np.sqrt(sigma2)), miles_embedding(ste, P, np.sqrt(sigma2))
    yenc = (ytr == est.classes_[1]).astype(int)
    for key, A, B in [("phi+simE", np.hstack([ftr, eTr]), np.hstack([fte, eTe])), ("simE", eTr, eTe)]:
        w, b, C, _ = fit_convex_head(A, yenc, 2, penalty="l1", random_state=f.seed)
        s_ = B @ w[0] + b[0]
        res[key].append(((s_ > 0) == pos).mean()); auc[key].append(roc_auc_score(pos, s_))
        if key == "simE":
            q = (p + 1 / (1 + np.exp(-s_))) / 2
            res["avg"].append(((q > .5) == pos).mean()); auc["avg"].append(roc_auc_score(pos, q))
print(name, f"{time.time()-t0:.0f}s", {k: round(float(np.mean(v)), 3) for k, v in res.items()}, "auc", {k: round(float(np.mean(v)), 3) for k, v in auc.items()}, flush=True)
