"""Instance-level evidence of a fitted prototype MIL model, and how well it finds the key instances.

:func:`~minitorch_proto.evaluation.explain.explain_bag` splits a bag's logit into one share per
instance measured from "distance 0": without layer norm, a prototype with a negative coefficient
gives the instance nearest to it a *negative* share, the closer the smaller in size but never
positive. On MNIST-bags the target digit, the real evidence, then looks like evidence against the
target. This module measures evidence against a reference instead, in three ways:

Reference-relative evidence (:func:`instance_evidence`)
-------------------------------------------------------
For two classes the logit is ``f(X) = b + sum_j w_j z_j(X)`` with ``z(X)`` the bag's pooled
feature vector after layer norm (or the pooled vector itself without it). Given a reference set
of bags R (the training bags), let ``zbar`` be the mean of their z-vectors,

    zbar = mean_{X' in R} z(X'),         f_ref = b + sum_j w_j zbar_j = mean_{X' in R} f(X')

(the second equality is exact: the head is linear in z). Then

    f(X) = f_ref + sum_j w_j (z_j(X) - zbar_j)

and each term ``w_j (z_j(X) - zbar_j)`` goes, whole, to the instance that produces pooled
feature j (argmin for min pooling, argmax for max, first on ties; split equally over the K
instances for mean pooling) - the rule of ``explain_bag`` applied to the difference from the
reference. The instance evidences plus ``f_ref`` (the average training logit) add up to the bag's
logit exactly (up to floating-point rounding), with or without layer norm.

With layer norm the reference is the mean of the reference bags' *normalised* vectors ``z``,
not the normalisation of the mean pooled vector: that is what keeps the identity exact. The
normalisation couples all pooled features of a bag (its mean and spread), and the rule does not
split that coupling: an instance is credited with the change of the normalised features it
attains, as the network computes them.

Now a prototype with ``w_j < 0`` whose nearest instance is closer than usual (``z_j < zbar_j``)
gives that instance positive evidence, and one that is farther than usual gives it negative
evidence.

Giving each term whole to one instance (``split="attaining"``) leaves every other instance with
nothing from that feature: of two target digits in one bag only the nearer is credited, and an
instance is never credited for coming second. ``split="shapley"`` splits each min (max) feature's
``z_j - zbar_j`` by the exact Shapley values of the game "sub-bag S is worth its min (max)
normalised distance, the empty sub-bag ``zbar_j``" (closed form, O(K log K)): instances are
ranked by closeness within the bag, equally close instances are credited alike, and the identity
above still holds exactly.

With ``head_similarity=True`` the head also reads MILES's similarity block, ``s_j(X) = max_i
exp(-||x_i - p_j||^2 / sigma^2)`` (no layer norm). Its terms ``w_j (s_j - sbar_j)`` follow the same
rules as a max feature: whole to the instance nearest ``p_j``, or split by the Shapley values of the
max game over the kernel values; removal falls back to the second largest kernel value.

Removal evidence (:func:`removal_evidence`)
-------------------------------------------
For each instance i: ``p(X) - p(X without i)``, with p the positive-class probability. Positive:
the instance pushes the bag towards the positive class. Computed for all instances at once
from each pooled feature's two smallest / two largest distances and the per-prototype sums, so it
equals re-scoring the bag with the instance left out. A bag of one instance would become empty,
which the model cannot score: its evidence is ``p(X) - empty_probability``, NaN unless
``empty_probability`` is given (``evidence_auc`` leaves such instances out of the AUC).

Measuring localisation (:func:`evidence_auc`)
---------------------------------------------
Within the positive bags, the ROC AUC of an instance score against "is a key instance" (on
MNIST-bags: "is the target digit").

Ensembles
---------
A seed ensemble (``n_seeds > 1``, the recommended model) averages its members' probabilities.
:func:`instance_scores`, :func:`evidence_auc` and :func:`evidence_reference` read every member
and average: an ensemble's score of an instance is the mean of its members' scores. For
``"removal"`` that is exactly the change of the ensemble's probability (a mean of differences is
the difference of the means); the logit-unit scores are the members' mean: shares of the members' mean logit,
and for ``"singleton"`` the members' mean logit of the instance alone, which is not the ensemble's own logit
(the log-odds of its mean probability, :meth:`decision_function`) and may order a bag's instances otherwise.
:func:`instance_evidence` and :func:`removal_evidence` explain one model: pass ``clf.member(j)``.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..utils import progress_bar
from .explain import (_distances, _nearest_to_prototypes, _one_model, _require_binary, _similarity, _standardised,
                      ensemble_members, explain_bag)
from .metrics import binary_auc

__all__ = [
    "EVIDENCE_METHODS",
    "EVIDENCE_RULE",
    "SHAPLEY_RULE",
    "evidence_reference",
    "instance_evidence",
    "removal_evidence",
    "instance_scores",
    "evidence_auc",
    "evidence_table",
]

#: Instance scores :func:`evidence_auc` can measure (see :func:`instance_scores`).
EVIDENCE_METHODS = ("share", "reference", "shapley", "removal", "singleton")

#: Short statement of the rule of :func:`instance_evidence`.
EVIDENCE_RULE = (
    "logit = f_ref + sum_j w_j*(z_j - zbar_j), zbar the mean z-vector of the reference bags and "
    "f_ref = b + w.zbar their mean logit; each term goes to the instance attaining pooled feature j "
    "(argmin for min, argmax for max; first on ties), or 1/K to each of the K instances for mean"
)
#: Short statement of ``instance_evidence(..., split="shapley")``.
SHAPLEY_RULE = (
    "logit = f_ref + sum_j w_j*(z_j - zbar_j); a min (max) feature's z_j - zbar_j is split by the Shapley "
    "values of the game S -> min (max) over S of the instances' normalised distances, zbar_j for the empty "
    "sub-bag; a mean feature gives each instance (u_ij - zbar_j)/K"
)


# --------------------------------------------------------------------------- helpers
def _check_single_binary(clf: Any, what: str) -> None:
    _require_binary(clf, what)
    _one_model(clf, what)


def _members(clf: Any) -> list[Any] | None:
    """The members of a seed ensemble, or None for one model."""
    members = ensemble_members(clf)
    return members if len(members) > 1 else None


def _head(clf: Any) -> tuple[np.ndarray, float]:
    """(w, b) of the single logit, float64."""
    model = clf.model_
    w = model.weight.detach().cpu().double().numpy()[0]
    b = float(model.bias.detach().cpu().double().numpy()[0]) if model.bias is not None else 0.0
    return w, b


def _normalise(phi: np.ndarray, config: Any) -> np.ndarray:
    """Eq. 4 on the last axis (float64), or the identity without layer norm."""
    if not config.layer_norm:
        return phi
    mu = phi.mean(axis=-1, keepdims=True)
    var = ((phi - mu) ** 2).mean(axis=-1, keepdims=True)
    return (phi - mu) / np.sqrt(var + config.layer_norm_eps)


def _pool(dist: np.ndarray, pooling: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(K, D) distances -> pooled vector phi (F,) and attribution matrix A (K, F).

    ``A[i, j]`` is instance i's part of pooled feature j: 1 for the attaining instance of a min or
    max feature (first on ties), ``1/K`` for a mean feature. Columns sum to 1.
    """
    K, D = dist.shape
    phis, owners = [], []
    for how in pooling:
        if how == "mean":
            phis.append(dist.mean(axis=0))
            owners.append(np.full((K, D), 1.0 / K))
            continue
        idx = np.argmin(dist, axis=0) if how == "min" else np.argmax(dist, axis=0)
        phis.append(dist[idx, np.arange(D)])
        A = np.zeros((K, D))
        A[idx, np.arange(D)] = 1.0
        owners.append(A)
    return np.concatenate(phis), np.concatenate(owners, axis=1)


def _min_game_shapley(u: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Shapley values of the games ``g_j(S) = min_{i in S} u[i, j]``, ``g_j(empty) = ref[j]``.

    ``u`` is (K, D); returns (K, D) whose columns sum to ``min_i u[i, j] - ref[j]``. With the
    column sorted, ``a_1 <= ... <= a_K``, the game is ``(a_K - ref) [S nonempty] - sum_k (a_{k+1} -
    a_k) [S meets {1..k}]``, and "S meets T" gives 1/|T| to each member of T, so the instance of
    rank m gets ``(a_K - ref) / K - sum_{k >= m} (a_{k+1} - a_k) / k``. Tied instances get equal
    values.
    """
    K, D = u.shape
    order = np.argsort(u, axis=0, kind="stable")
    a = np.take_along_axis(u, order, axis=0)
    c = np.diff(a, axis=0) / np.arange(1, K)[:, None]  # (K-1, D): Delta_k / k
    suffix = np.concatenate([np.cumsum(c[::-1], axis=0)[::-1], np.zeros((1, D))], axis=0)  # rank m: sum_{k>=m}
    ranked = (a[-1] - ref)[None, :] / K - suffix
    out = np.empty_like(ranked)
    np.put_along_axis(out, order, ranked, axis=0)
    return out


def _shapley_parts(dist: np.ndarray, z: np.ndarray, zbar: np.ndarray, config: Any) -> np.ndarray:
    """(K, F) split of ``z - zbar`` over the instances (``split="shapley"``).

    Each instance's distances are put on the bag's own layer-norm scale, ``u = (d - mu) / sigma``
    (``u = d`` without layer norm), so the instance attaining a min or max feature has ``u = z``.
    Min and max features: Shapley values of the min (max) game with ``zbar`` as the empty bag's
    value. Mean features: ``(u_i - zbar) / K`` to each instance.
    """
    K, D = dist.shape
    if config.layer_norm:
        phi = _pool(dist, config.pooling)[0]
        mu = phi.mean()
        u = (dist - mu) / np.sqrt(((phi - mu) ** 2).mean() + config.layer_norm_eps)
    else:
        u = dist
    parts = []
    for p, how in enumerate(config.pooling):
        ref = zbar[p * D : (p + 1) * D]
        if how == "mean":
            parts.append((u - ref[None, :]) / K)
        elif how == "min":
            parts.append(_min_game_shapley(u, ref))
        else:
            parts.append(-_min_game_shapley(-u, -ref))
    return np.concatenate(parts, axis=1)


def _bag_parts(clf: Any, std: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """One standardised bag's (K, D) model distances and (K, D) similarity-kernel values (None without the block)."""
    return _distances(clf, std), _similarity(clf, std)


def _z(dist: np.ndarray, sim: np.ndarray | None, config: Any) -> np.ndarray:
    """The head's feature vector of a bag: normalised pooled distances, then the similarity block (its max)."""
    z = _normalise(_pool(dist, config.pooling)[0], config)
    return z if sim is None else np.concatenate([z, sim.max(axis=0)])


def _raw_bag_parts(clf: Any, bag: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    return _bag_parts(clf, _standardised(clf, [bag])[0])


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=np.float64)))


# ------------------------------------------------------------------ reference evidence
def evidence_reference(clf: Any, bags: Sequence[np.ndarray]) -> np.ndarray:
    """The reference of :func:`instance_evidence`: the mean z-vector of a set of bags.

    Parameters
    ----------
    clf : PrototypeMILClassifier
        Fitted two-class model.
    bags : sequence of ndarray
        Reference bags in raw units, usually the training bags.

    Returns
    -------
    ndarray of shape (F,), or (n_members, F) for a seed ensemble (one row per member)
        ``zbar``: the mean over ``bags`` of each bag's pooled feature vector after layer norm
        (the pooled vector itself without layer norm), in float64. ``b + w @ zbar`` is the mean
        logit of ``bags``.
    """
    members = _members(clf)
    if members is not None:
        _require_binary(clf, "evidence_reference")
        return np.stack([evidence_reference(m, bags) for m in members])
    _check_single_binary(clf, "evidence_reference")
    if len(bags) == 0:
        raise ValueError("evidence_reference needs at least one bag.")
    config = clf.model_.config
    z = [_z(*_bag_parts(clf, std), config) for std in _standardised(clf, bags)]
    return np.mean(z, axis=0)


def _reference_vector(clf: Any, reference) -> np.ndarray:
    """A z-vector from either a precomputed vector or reference bags."""
    if reference is None:
        raise ValueError("reference-relative evidence needs reference=: the training bags, or "
                         "evidence_reference(clf, training_bags).")
    F = clf.model_.weight.shape[1]
    members = _members(clf)
    shape = (F,) if members is None else (len(members), F)
    # A numeric vector (or one per member); an object array holds bags (``bags_array[train_index]``).
    if isinstance(reference, np.ndarray) and reference.dtype != object and reference.ndim <= 2:
        if reference.shape != shape:
            per = "one entry per pooled feature" if members is None else \
                "one row per member, one entry per pooled feature"
            raise ValueError(f"reference has shape {reference.shape}; this model needs {shape}, {per} "
                             "(evidence_reference of the training bags).")
        return reference.astype(np.float64)
    return evidence_reference(clf, reference)


def instance_evidence(clf: Any, bag: np.ndarray, reference: np.ndarray | Sequence[np.ndarray], *,
                      split: str = "attaining") -> pd.DataFrame:
    """Per-instance evidence of one bag's logit relative to a reference set of bags.

    See the module docstring for the rule. In short:

        ``ev["evidence"].sum() + ev.attrs["reference_logit"] == ev.attrs["decision_value"]``

    up to floating-point rounding, where ``reference_logit`` is the mean logit of the reference
    bags and ``decision_value`` equals ``clf.decision_function([bag])[0]`` (which runs in
    float32) up to its rounding.

    Parameters
    ----------
    clf : PrototypeMILClassifier
        Fitted two-class model (one model, not an ensemble).
    bag : ndarray of shape (n_instances, n_features)
        One bag in raw units.
    reference : ndarray of shape (F,) or sequence of ndarray
        The output of :func:`evidence_reference` (compute it once when explaining many bags), or
        the reference bags themselves (usually the training bags).
    split : {"attaining", "shapley"}, default="attaining"
        How each pooled feature's ``z_j - zbar_j`` is split over the instances.
        ``"attaining"``: whole to the instance attaining it (equally for mean pooling), as in
        ``explain_bag``; every other instance gets nothing from that feature, so of two equally
        good instances (two target digits in one bag) only the first is credited.
        ``"shapley"``: min and max features are split by the Shapley values of the game "value
        of the sub-bag S" (``min_{i in S}`` of the instances' distances on the bag's layer-norm
        scale, ``zbar_j`` for the empty sub-bag), computed exactly in O(K log K); every instance
        as close as the attaining one gets the same, farther ones less. Mean features give each
        instance ``(u_ij - zbar_j) / K``, its own normalised distance against the reference. With
        layer norm, the bag's own mean and spread are held fixed (the coupling is not split).
        Both satisfy the identity above.

    Returns
    -------
    pandas.DataFrame
        One row per instance (index ``instance``): ``nearest_prototype`` and ``distance`` (the
        prototype it is closest to, and its distance to it), ``evidence`` (its total; positive =
        towards the positive class, ``classes_[1]``) and ``evidence_<pooling>`` per pooling (and
        ``evidence_similarity`` for a head that reads the similarity block). ``attrs``:
        ``reference_logit`` (``b + w @ zbar``), ``decision_value`` (float64 recomputation),
        ``bias``, ``split``, ``rule``.

    Raises
    ------
    NotImplementedError
        For more than two classes, or an ensemble.
    """
    _check_single_binary(clf, "instance_evidence")
    if split not in ("attaining", "shapley"):
        raise ValueError(f"split must be 'attaining' or 'shapley', got {split!r}.")
    zbar = _reference_vector(clf, reference)
    config = clf.model_.config
    std = _standardised(clf, [bag])[0]  # once: the distances and the nearest instances read it
    dist, sim = _bag_parts(clf, std)
    phi, owner = _pool(dist, config.pooling)
    F = len(phi)
    z = _z(dist, sim, config)
    w, b = _head(clf)
    if split == "attaining":
        if sim is not None:
            # The similarity block is a max over the bag: its term goes to the instance attaining it.
            top = np.zeros_like(sim)
            top[_nearest_to_prototypes(clf, std), np.arange(sim.shape[1])] = 1.0
            owner = np.concatenate([owner, top], axis=1)
        parts = owner * (w * (z - zbar))[None, :]  # (K, F)
    else:
        parts = _shapley_parts(dist, z[:F], zbar[:F], config)
        if sim is not None:
            parts = np.concatenate([parts, -_min_game_shapley(-sim, -zbar[F:])], axis=1)
        parts = parts * w[None, :]
    D = config.n_prototypes
    frame = pd.DataFrame({"nearest_prototype": np.argmin(dist, axis=1).astype(int), "distance": dist.min(axis=1)})
    frame["evidence"] = parts.sum(axis=1)
    for p, how in enumerate(list(config.pooling) + (["similarity"] if sim is not None else [])):
        frame[f"evidence_{how}"] = parts[:, p * D : (p + 1) * D].sum(axis=1)
    frame.index.name = "instance"
    frame.attrs.update({"reference_logit": float(b + w @ zbar), "decision_value": float(b + w @ z), "bias": b,
                        "split": split, "rule": EVIDENCE_RULE if split == "attaining" else SHAPLEY_RULE})
    return frame


# -------------------------------------------------------------------- removal evidence
def _removed_pooled(dist: np.ndarray, pooling: Sequence[str]) -> np.ndarray:
    """(K, D) distances -> (K, F): the pooled vector of the bag without instance i, row i (K >= 2)."""
    K, D = dist.shape
    cols = np.arange(D)
    out = []
    for how in pooling:
        if how == "mean":
            out.append((dist.sum(axis=0)[None, :] - dist) / (K - 1))
            continue
        # The best instance per prototype (first of ties) and the best value among the others: two passes
        # over the bag, where sorting it would cost K log K per prototype.
        first = np.argmin(dist, axis=0) if how == "min" else np.argmax(dist, axis=0)
        is_best = np.arange(K)[:, None] == first[None, :]
        rest = np.where(is_best, np.inf if how == "min" else -np.inf, dist)
        second = rest.min(axis=0) if how == "min" else rest.max(axis=0)
        out.append(np.where(is_best, second[None, :], dist[first, cols][None, :]))
    return np.concatenate(out, axis=1)


def removal_evidence(clf: Any, bag: np.ndarray, *, empty_probability: float | None = None) -> np.ndarray:
    """For each instance, how much the positive-class probability drops when it is left out.

    Parameters
    ----------
    clf : PrototypeMILClassifier
        Fitted two-class model (one model, not an ensemble).
    bag : ndarray of shape (n_instances, n_features)
        One bag in raw units.
    empty_probability : float, optional
        Only for a one-instance bag, whose removal leaves an empty bag the model cannot score:
        the probability to give the empty bag (for instance the share of positive training
        bags). Default: NaN, so the evidence is NaN.

    Returns
    -------
    ndarray of shape (n_instances,)
        ``p(X) - p(X without instance i)``, float64: positive when the instance is evidence for
        the positive class. Equal (up to float32 rounding) to ``clf.predict_proba([bag])[0, 1]
        - clf.predict_proba([np.delete(bag, i, 0)])[0, 1]``, computed without re-running the
        model K times: each min (max) feature falls back to its second smallest (largest)
        distance when its argmin (argmax) instance is removed, each mean to the mean of the rest.

    Raises
    ------
    NotImplementedError
        For more than two classes, or an ensemble.
    """
    _check_single_binary(clf, "removal_evidence")
    config = clf.model_.config
    dist, sim = _raw_bag_parts(clf, bag)
    w, b = _head(clf)
    p_full = float(_sigmoid(b + w @ _z(dist, sim, config)))
    if len(dist) == 1:
        empty = float("nan") if empty_probability is None else float(empty_probability)
        return np.array([p_full - empty])
    z = _normalise(_removed_pooled(dist, config.pooling), config)
    if sim is not None:
        z = np.concatenate([z, _removed_pooled(sim, ("max",))], axis=1)
    return p_full - _sigmoid(b + z @ w)


# -------------------------------------------------------------------------- measuring
def instance_scores(clf: Any, bag: np.ndarray, method: str = "reference", *,
                    reference: np.ndarray | Sequence[np.ndarray] | None = None,
                    empty_probability: float | None = None) -> np.ndarray:
    """One evidence score per instance of a bag (larger = more evidence for the positive class).

    Parameters
    ----------
    clf : PrototypeMILClassifier
        Fitted two-class model.
    bag : ndarray of shape (n_instances, n_features)
        Raw units.
    method : {"share", "reference", "shapley", "removal", "singleton"}, default="reference"
        ``"share"``: :func:`~minitorch_proto.evaluation.explain.explain_bag`'s share (measured from
        distance 0); ``"reference"`` (the default) and ``"shapley"``: :func:`instance_evidence` with
        ``split="attaining"`` or ``"shapley"``, which need ``reference`` (without it, use ``"removal"``);
        ``"removal"``: :func:`removal_evidence`; ``"singleton"``: the logit of the bag holding the
        instance alone (the score of ``benchmarks/mnist_localisation.py``).
    reference : optional
        For ``"reference"`` and ``"shapley"``: :func:`evidence_reference` output or the reference bags.
    empty_probability : float, optional
        For ``"removal"``, see :func:`removal_evidence`.

    Returns
    -------
    ndarray of shape (n_instances,)
        For a seed ensemble, the mean of its members' scores (module docstring, "Ensembles").
    """
    members = _members(clf)
    if members is not None:
        _require_binary(clf, "instance_scores")
        if method in ("reference", "shapley"):
            refs = _reference_vector(clf, reference)
            return np.mean([instance_scores(m, bag, method, reference=r) for m, r in zip(members, refs)], axis=0)
        return np.mean([instance_scores(m, bag, method, empty_probability=empty_probability) for m in members],
                       axis=0)
    if method == "share":
        return explain_bag(clf, bag)["share"].to_numpy()
    if method in ("reference", "shapley"):
        split = "attaining" if method == "reference" else "shapley"
        return instance_evidence(clf, bag, reference, split=split)["evidence"].to_numpy()
    if method == "removal":
        return removal_evidence(clf, bag, empty_probability=empty_probability)
    if method == "singleton":
        _check_single_binary(clf, "instance_scores")
        config = clf.model_.config
        w, b = _head(clf)
        dist, sim = _raw_bag_parts(clf, bag)  # one instance per bag: every pooling gives its distance
        z = _normalise(np.concatenate([dist] * len(config.pooling), axis=1), config)
        if sim is not None:
            z = np.concatenate([z, sim], axis=1)
        return b + z @ w
    raise ValueError(f"method must be one of {EVIDENCE_METHODS}, got {method!r}.")


def evidence_auc(
    clf: Any,
    bags: Sequence[np.ndarray],
    instance_labels: Sequence[np.ndarray],
    method: str = "reference",
    *,
    reference: np.ndarray | Sequence[np.ndarray] | None = None,
    average: str = "pooled",
    empty_probability: float | None = None,
) -> float:
    """How well an instance evidence score finds the key instances of the positive bags.

    Only bags holding at least one key instance (``instance_labels`` true) are read; negative
    bags have nothing to localise.

    Parameters
    ----------
    clf : PrototypeMILClassifier
        Fitted two-class model.
    bags : sequence of ndarray
        Bags in raw units (usually test bags).
    instance_labels : sequence of array-like
        Per bag, one truth value per instance: is it a key instance (MNIST-bags: the target
        digit; ``SyntheticBags.instance_labels``).
    method : {"share", "reference", "shapley", "removal", "singleton"}, default="reference"
        The score (see :func:`instance_scores`).
    reference : optional
        Needed by ``"reference"`` and ``"shapley"``: the training bags or :func:`evidence_reference` of them
        (computed once here when bags are given).
    average : {"pooled", "bag"}, default="pooled"
        ``"pooled"``: one ROC AUC over all instances of the positive bags (scores compared across
        bags too; as the instance AUC of ``benchmarks/mnist_localisation.py``). ``"bag"``: the
        mean of each positive bag's own AUC, over the bags that also hold a non-key instance
        (only the ranking within a bag counts).
    empty_probability : float, optional
        For ``"removal"`` (one-instance bags). Instances whose score is NaN are left out.

    Returns
    -------
    float
        The AUC; NaN when no key instance or no other instance is left to compare.
    """
    if method not in EVIDENCE_METHODS:
        raise ValueError(f"method must be one of {EVIDENCE_METHODS}, got {method!r}.")
    if average not in ("pooled", "bag"):
        raise ValueError(f"average must be 'pooled' or 'bag', got {average!r}.")
    if len(bags) != len(instance_labels):
        raise ValueError(f"{len(bags)} bags but {len(instance_labels)} instance label arrays.")
    if method in ("reference", "shapley"):
        reference = _reference_vector(clf, reference)
    scores, labels = [], []
    for bag, lab in zip(bags, instance_labels):
        lab = np.asarray(lab).reshape(-1).astype(bool)
        if len(lab) != len(bag):
            raise ValueError(f"a bag of {len(bag)} instances has {len(lab)} instance labels.")
        if not lab.any():
            continue
        s = instance_scores(clf, bag, method, reference=reference, empty_probability=empty_probability)
        keep = np.isfinite(s)
        scores.append(s[keep])
        labels.append(lab[keep])
    if not scores:
        return float("nan")
    if average == "pooled":
        return binary_auc(np.concatenate(labels), np.concatenate(scores))
    per_bag = [binary_auc(lab, s) for lab, s in zip(labels, scores) if 0 < lab.sum() < len(lab)]
    return float(np.mean(per_bag)) if per_bag else float("nan")


def evidence_table(clf: Any, bags: Sequence[np.ndarray], bag_ids: Sequence | None = None,
                   method: str = "removal", *, reference: np.ndarray | Sequence[np.ndarray] | None = None,
                   top: int | None = None, empty_probability: float | None = None,
                   progress: bool = False) -> pd.DataFrame:
    """Every instance's evidence, bag by bag: which instances (patches, images) drive each prediction.

    Parameters
    ----------
    clf : PrototypeMILClassifier
        Fitted two-class model (an ensemble's scores are its members' mean).
    bags : sequence of ndarray, or a lazy collection (:class:`~minitorch_proto.data.disk.DiskBagDataset`)
        Raw units; read one bag at a time, so memory is bounded by the largest bag.
    bag_ids : optional, one id per bag (default: the bag positions)
    method : one of :data:`EVIDENCE_METHODS`, default="removal"
        The score of :func:`instance_scores`. ``"removal"`` needs nothing but the model: how much the
        bag's positive-class probability drops without the instance.
    reference : needed by ``"reference"`` and ``"shapley"`` (the training bags or :func:`evidence_reference`)
    top : int, optional
        Keep only the ``top`` instances of largest evidence in each bag.
    empty_probability : float, optional
        For ``"removal"`` (one-instance bags, whose evidence is otherwise NaN).
    progress : bool, default=False
        A progress bar over the bags (a folder of slides takes minutes).

    Returns
    -------
    pandas.DataFrame
        One row per instance kept: ``bag``, ``instance`` (position in the bag), ``evidence``
        and ``rank`` (1 = the most evidence for the positive class in its bag; NaN scores last),
        bags in order, each bag's rows by rank.
    """
    if method not in EVIDENCE_METHODS:
        raise ValueError(f"method must be one of {EVIDENCE_METHODS}, got {method!r}.")
    if top is not None and (isinstance(top, bool) or int(top) != top or top < 1):
        raise ValueError(f"top must be a positive integer, got {top!r}.")
    ids = list(range(len(bags))) if bag_ids is None else list(bag_ids)
    if len(ids) != len(bags):
        raise ValueError(f"{len(bags)} bags but {len(ids)} bag ids.")
    if method in ("reference", "shapley"):
        reference = _reference_vector(clf, reference)
    frames = []
    for i, bag_id in enumerate(progress_bar(ids, progress, "explaining bags", unit="bag")):
        try:
            s = instance_scores(clf, bags[i], method, reference=reference, empty_probability=empty_probability)
        except ValueError as exc:  # scored one bag at a time: name the bag by its place in ``bags``
            raise ValueError(str(exc).replace("bags[0]", f"bags[{i}]")) from None
        order = np.argsort(np.where(np.isnan(s), np.inf, -s), kind="stable")[:top]
        frames.append(pd.DataFrame({"bag": [bag_id] * len(order), "instance": order, "evidence": s[order],
                                    "rank": np.arange(1, len(order) + 1)}))
    if not frames:  # no bags: the table's columns, no rows
        return pd.DataFrame({"bag": pd.Series([], dtype=object), "instance": np.array([], dtype=np.int64),
                             "evidence": [],
                             "rank": np.array([], dtype=np.int64)})
    return pd.concat(frames, ignore_index=True)
