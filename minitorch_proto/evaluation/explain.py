"""Reading a fitted prototype MIL model: prototypes, their neighbours, and per-bag explanations.

Every function takes a fitted :class:`~minitorch_proto.estimator.PrototypeMILClassifier` and
works in the space the model works in: instances after ``clf.standardizer_`` (the
*standardised* space), distances measured with the model's own distance
(``clf.model_.config.distance``). Bags are always passed in their original (raw) units; the
functions standardise them with the fitted standardiser.

Attribution rule of :func:`explain_bag`
---------------------------------------
For two classes the model's decision value (the logit of the positive class) is

    f(X) = b + sum_j w_j * z_j,        z_j = (phi_j - mu) / sigma   (layer norm on)
                                        z_j = phi_j                   (layer norm off)

where ``phi_j`` is pooled feature j (one per prototype and pooling), ``mu`` and ``sigma`` are
the bag's mean and ``sqrt(variance + eps)`` over its pooled features (Eq. 4). The term
``t_j = w_j * z_j`` of each pooled feature is given, whole, to the instance(s) that produce
``phi_j``:

* ``min`` pooling: the instance that attains the minimum distance (the first one on a tie);
* ``max`` pooling: the instance that attains the maximum distance (the first one on a tie);
* ``mean`` pooling: every one of the bag's K instances gets ``t_j / K``.

The bias ``b`` is reported separately.

Reading the shares: distances are positive, so without layer norm a prototype with a negative
coefficient gives its argmin instance a negative term however close that instance is (the
closer, the less negative). Shares are measured from "distance 0", not from a typical bag;
compare an instance's share with what a farther instance would have received (on MNIST-bags the
target digit gets a negative share). For evidence measured against the training bags (positive =
towards the positive class), by removal, and its localisation AUC, see
:mod:`minitorch_proto.evaluation.evidence`. With layer norm
the reference is the bag's own mean pooled distance ``mu``. Because every term goes to exactly one place, the
instance shares plus the bias add up to the decision value exactly (up to floating-point
rounding). ``mu`` and ``sigma`` depend on all pooled features together; the rule does not try to
split that coupling, it keeps each feature's term as the network computes it.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch

from ..distances import pairwise_distance
from ..validation import check_bags, check_distance_range, frames_in_model_order

__all__ = [
    "ensemble_members",
    "prototype_coefficients",
    "closeness_coefficients",
    "instance_distances",
    "nearest_instances",
    "prototype_table",
    "decision_terms",
    "explain_bag",
    "ATTRIBUTION_RULE",
]

#: Short statement of the attribution rule used by :func:`explain_bag`.
ATTRIBUTION_RULE = (
    "logit = bias + sum_j w_j*z_j with z_j the (layer-normalised) pooled feature j; "
    "each term w_j*z_j goes to the instance attaining feature j (argmin for min, argmax for max; "
    "first on ties), or 1/K to each of the K instances for mean; bias reported separately"
)


# --------------------------------------------------------------------------- helpers
def _check_fitted(clf: Any) -> None:
    if not hasattr(clf, "model_") or not hasattr(clf, "standardizer_"):
        from sklearn.exceptions import NotFittedError  # a ValueError too, as scikit-learn's

        raise NotFittedError(
            "This function needs a fitted PrototypeMILClassifier (with model_ and standardizer_); "
            "call fit(bags, y) first."
        )


def ensemble_members(clf: Any) -> list[Any]:
    """The fitted single models an estimator's predictions average: ``[clf.member(j), ...]`` for a
    seed ensemble (``n_seeds > 1``), else ``[clf]``. Explanations of one model read one member at a time."""
    _check_fitted(clf)
    return clf._ensemble() or [clf]  # the estimator's own split, the one its predict_proba averages over


def _one_model(clf: Any, what: str = "This explanation") -> None:
    """Refuse a seed ensemble where one model's prototypes, distances or coefficients are read.

    ``clf.model_`` of an ensemble is its first member only: reading it would explain a model
    the estimator does not predict with. Functions that average the members
    (:func:`~minitorch_proto.evaluation.evidence.evidence_table`, ``instance_scores``) say so.

    Raises
    ------
    NotImplementedError
        For an estimator with more than one member.
    """
    models = getattr(clf, "models_", None)
    if models is not None and len(models) > 1:
        raise NotImplementedError(
            f"{what} reads one model; this estimator is an ensemble of {len(models)}: "
            "explain one member (clf.member(j), or ensemble_members(clf)) at a time."
        )


def _n_outputs(clf: Any) -> int:
    return int(clf.model_.weight.shape[0])


def _require_binary(clf: Any, what: str) -> None:
    if _n_outputs(clf) != 1:
        raise NotImplementedError(
            f"{what} is defined for two-class models (one logit); this model has "
            f"{len(clf.classes_)} classes and a softmax over {_n_outputs(clf)} logits."
        )


def _standardised(clf: Any, bags: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Raw bags -> float64 bags in the model's (standardised) input space."""
    _check_fitted(clf)
    checked = check_bags(frames_in_model_order(bags, getattr(clf, "feature_names_in_", None)), clf.n_features_in_)
    std = clf.standardizer_.transform(checked)
    # Explanations compute in float64; a bag the model itself cannot score (predict refuses it) has no
    # decision to explain.
    check_distance_range(std, clf.model_.prototypes.dtype, standardization=getattr(clf, "standardization", None))
    return std


def _prototypes64(clf: Any) -> np.ndarray:
    _one_model(clf, "Reading the prototypes")
    return clf.model_.prototypes.detach().cpu().double().numpy().copy()


def _distances(clf: Any, std_instances: np.ndarray) -> np.ndarray:
    """(N, L) standardised instances -> (N, D) model distances, computed in float64."""
    X = torch.as_tensor(np.asarray(std_instances, dtype=np.float64))
    P = torch.as_tensor(_prototypes64(clf))
    return pairwise_distance(X, P, clf.model_.config.distance).numpy()


def _sqdistances(clf: Any, std_instances: np.ndarray) -> torch.Tensor:
    """(N, L) standardised instances -> (N, D) squared Euclidean distances to the prototypes (float64)."""
    X = torch.as_tensor(np.asarray(std_instances, dtype=np.float64))
    return pairwise_distance(X, torch.as_tensor(_prototypes64(clf)), "sqeuclidean")


def _nearest_to_prototypes(clf: Any, std_instances: np.ndarray) -> np.ndarray:
    """(D,) the instance nearest each prototype: the one attaining the similarity block's max, read from the
    distances (far from p_j every kernel value underflows to 0, and an argmax of the kernel gives instance 0)."""
    return np.argmin(_sqdistances(clf, std_instances).numpy(), axis=0)


def _similarity(clf: Any, std_instances: np.ndarray) -> np.ndarray | None:
    """(N, L) standardised instances -> (N, D) kernel values exp(-||x - p||^2 / sigma^2) of the head's
    similarity block (float64; a bag's block is their max over its instances), None without one."""
    model = clf.model_
    if not getattr(model, "has_similarity", False):
        return None
    return model.similarity_from_sqdist(_sqdistances(clf, std_instances)).numpy()


def prototype_coefficients(clf: Any) -> pd.DataFrame:
    """Classifier weight of every (prototype, pooling) feature.

    Parameters
    ----------
    clf : PrototypeMILClassifier
        Fitted.

    Returns
    -------
    pandas.DataFrame
        One row per prototype (index ``d`` = 0..D-1). For two classes the columns are
        ``coef_<pooling>`` for each pooling in the model's order (the weights of the single
        logit), then ``coef_similarity`` with ``head_similarity=True``. For C > 2 classes they
        are ``coef_<pooling>_<class label>``.
    """
    _check_fitted(clf)
    _one_model(clf, "prototype_coefficients")
    config = clf.model_.config
    D = config.n_prototypes
    W = clf.model_.weight.detach().cpu().double().numpy()  # (O, F)
    cols: dict[str, np.ndarray] = {}
    blocks = list(config.pooling) + (["similarity"] if clf.model_.has_similarity else [])
    for b, how in enumerate(blocks):
        block = W[:, b * D : (b + 1) * D]
        if W.shape[0] == 1:
            cols[f"coef_{how}"] = block[0]
        else:
            for c, label in enumerate(clf.classes_):
                cols[f"coef_{how}_{label}"] = block[c]
    frame = pd.DataFrame(cols)
    frame.index.name = "prototype"
    return frame


def closeness_coefficients(clf: Any, bags: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """Per prototype of a two-class model: how much coming close to it moves the logit (negative: evidence for the positive class).

    Without a similarity block this is the min-pooling coefficient. With one, the min-pooling and
    similarity features both read the bag's instance nearest the prototype, with opposite signs (a
    distance shrinks, a similarity grows as the instance comes closer), but in different units: a
    layer-normalised distance, and a kernel value in (0, 1] that is near 0 in most bags for most
    prototypes, so its raw coefficient can be huge and still move few logits. The L1 head chose
    both on standardised features, so they are compared there: each coefficient times its
    feature's standard deviation over ``bags`` (the training bags), min minus similarity.

    Parameters
    ----------
    clf : PrototypeMILClassifier, fitted, two classes, one model, min pooling
    bags : the training bags; needed when the head has a similarity block
    """
    coefs = prototype_coefficients(clf)
    if "coef_min" not in coefs:
        raise ValueError("closeness_coefficients needs a two-class model with min pooling.")
    if "coef_similarity" not in coefs:
        return coefs["coef_min"].to_numpy()
    if bags is None:
        raise ValueError("closeness_coefficients needs the training bags when the head has a similarity block "
                         "(its two blocks are compared in the head's standardised units).")
    D = clf.model_.config.n_prototypes
    sd = clf.transform(bags).std(axis=0)
    p = list(clf.model_.config.pooling).index("min")
    return coefs["coef_min"].to_numpy() * sd[p * D:(p + 1) * D] - coefs["coef_similarity"].to_numpy() * sd[-D:]


def instance_distances(clf: Any, bags: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Model distance of every instance to every prototype, per bag.

    Parameters
    ----------
    clf : PrototypeMILClassifier
        Fitted.
    bags : sequence of ndarray
        Bags in raw units; standardised with ``clf.standardizer_``.

    Returns
    -------
    list of ndarray
        One ``(n_instances_i, D)`` float64 array per bag.
    """
    _one_model(clf, "instance_distances")
    std = _standardised(clf, bags)
    sizes = [len(b) for b in std]
    dist = _distances(clf, np.concatenate(std, axis=0))
    return np.split(dist, np.cumsum(sizes)[:-1])


def nearest_instances(clf: Any, bags: Sequence[np.ndarray], k: int = 5) -> dict[int, list[tuple[int, int, float]]]:
    """The k instances (over all bags) nearest to each prototype.

    Distances are the model's distance in the standardised space.

    Parameters
    ----------
    clf : PrototypeMILClassifier
        Fitted.
    bags : sequence of ndarray
        Bags in raw units (usually the training bags).
    k : int, default=5
        Neighbours per prototype (fewer when there are fewer instances).

    Returns
    -------
    dict
        ``d -> [(bag_index, instance_index, distance), ...]`` sorted by increasing distance
        (ties broken by bag, then instance index).
    """
    _one_model(clf, "nearest_instances")
    if int(k) < 1:
        raise ValueError(f"k must be >= 1, got {k}.")
    per_bag = instance_distances(clf, bags)
    dist = np.concatenate(per_bag, axis=0)
    bag_of = np.concatenate([np.full(len(d), i) for i, d in enumerate(per_bag)])
    inst_of = np.concatenate([np.arange(len(d)) for d in per_bag])
    kk = min(int(k), len(dist))
    out: dict[int, list[tuple[int, int, float]]] = {}
    for d in range(dist.shape[1]):
        order = np.argsort(dist[:, d], kind="stable")[:kk]
        out[d] = [(int(bag_of[n]), int(inst_of[n]), float(dist[n, d])) for n in order]
    return out


# ---------------------------------------------------------------------------- table
def prototype_table(
    clf: Any,
    bags: Sequence[np.ndarray] | None = None,
    y: Sequence | np.ndarray | None = None,
    k: int = 5,
) -> pd.DataFrame:
    """One row per prototype: coefficients, norm and (given bags) what it stands for.

    Parameters
    ----------
    clf : PrototypeMILClassifier
        Fitted.
    bags : sequence of ndarray, optional
        Training bags in raw units.
    y : array-like, optional
        Labels of ``bags`` (in ``clf.classes_``).
    k : int, default=5
        Number of nearest instances, and of nearest bags, per prototype.

    Returns
    -------
    pandas.DataFrame
        Columns:

        * ``prototype``: index d;
        * ``coef_<pooling>`` (see :func:`prototype_coefficients`);
        * ``norm``: Euclidean norm of the prototype in the standardised space.

        With ``bags``:

        * ``nearest``: list of ``(bag, instance)`` of its k nearest instances;
        * ``nearest_distances``: their distances (model distance, standardised space);
        * ``min_distance``: distance to the nearest instance.

        With ``bags`` and ``y`` (two classes; "positive" is ``clf.classes_[1]``):

        * ``nearest_bags_positive_share``: share of positive bags among the k bags whose
          min-distance to this prototype is smallest, i.e. what the prototype "represents";
        * ``n_bags_assigned``, ``assigned_positive_share``: the bags for which this
          prototype is the closest one (smallest min-distance over all prototypes) and the
          share of positives among them (NaN when none).

        For more than two classes the two share columns are replaced by
        ``nearest_bags_majority_class`` / ``nearest_bags_majority_share``.
    """
    _check_fitted(clf)
    _one_model(clf, "prototype_table")
    table = prototype_coefficients(clf).reset_index()
    P = _prototypes64(clf)
    table["norm"] = np.linalg.norm(P, axis=1)
    if bags is None:
        return table
    per_bag = instance_distances(clf, bags)
    neigh = nearest_instances(clf, bags, k=k)
    D = P.shape[0]
    table["nearest"] = [[(b, i) for b, i, _ in neigh[d]] for d in range(D)]
    table["nearest_distances"] = [[dist for _, _, dist in neigh[d]] for d in range(D)]
    table["min_distance"] = [neigh[d][0][2] for d in range(D)]
    if y is None:
        return table
    y_arr = np.asarray(y).reshape(-1)
    if len(y_arr) != len(per_bag):
        raise ValueError(f"{len(per_bag)} bags but {len(y_arr)} labels.")
    bag_min = np.stack([d.min(axis=0) for d in per_bag])  # (n_bags, D)
    kb = min(int(k), len(per_bag))
    nearest_bags = [np.argsort(bag_min[:, d], kind="stable")[:kb] for d in range(D)]
    if len(clf.classes_) == 2:
        positive = clf.classes_[1]
        is_pos = y_arr == positive
        table["nearest_bags_positive_share"] = [float(is_pos[idx].mean()) for idx in nearest_bags]
        assigned = np.argmin(bag_min, axis=1)
        table["n_bags_assigned"] = [int(np.sum(assigned == d)) for d in range(D)]
        table["assigned_positive_share"] = [
            float(is_pos[assigned == d].mean()) if np.any(assigned == d) else float("nan") for d in range(D)
        ]
    else:
        majority, share = [], []
        for idx in nearest_bags:
            labels, counts = np.unique(y_arr[idx], return_counts=True)
            majority.append(labels[np.argmax(counts)])
            share.append(float(counts.max() / len(idx)))
        table["nearest_bags_majority_class"] = majority
        table["nearest_bags_majority_share"] = share
    return table


# ---------------------------------------------------------------------- explanations
def decision_terms(clf: Any, bag: np.ndarray) -> pd.DataFrame:
    """The decision value of one bag, split into one term per pooled feature.

    Computed in float64 from the model's parameters, so that ``bias + terms.sum()`` equals the
    decision value up to rounding.

    Parameters
    ----------
    clf : PrototypeMILClassifier
        Fitted two-class model.
    bag : ndarray of shape (n_instances, n_features)
        One bag in raw units.

    Returns
    -------
    pandas.DataFrame
        One row per pooled feature j: ``prototype``, ``pooling``, ``phi`` (pooled distance),
        ``z`` (after layer norm, or ``phi`` without it), ``weight``, ``term`` (``weight * z``)
        and ``instance`` (the instance attaining it; -1 for mean pooling, shared by all). With
        ``head_similarity=True`` the similarity block follows as rows of pooling
        ``"similarity"``: ``phi = z`` the bag's largest kernel value (no layer norm), attained by the
        instance nearest the prototype in squared Euclidean distance.
        ``attrs`` holds ``bias``, ``decision_value``, ``mu`` and ``sigma`` (NaN without layer
        norm).

    Raises
    ------
    NotImplementedError
        For models with more than two classes.
    """
    _check_fitted(clf)
    _one_model(clf, "decision_terms (and explain_bag)")
    _require_binary(clf, "decision_terms")
    config = clf.model_.config
    std = _standardised(clf, [bag])[0]
    dist = _distances(clf, std)  # (K, D)
    D = config.n_prototypes
    phi_parts, inst_parts, proto_parts, pool_parts = [], [], [], []
    for how in config.pooling:
        if how == "min":
            idx = np.argmin(dist, axis=0)
            phi_parts.append(dist[idx, np.arange(D)])
        elif how == "max":
            idx = np.argmax(dist, axis=0)
            phi_parts.append(dist[idx, np.arange(D)])
        else:
            idx = np.full(D, -1)
            phi_parts.append(dist.mean(axis=0))
        inst_parts.append(idx)
        proto_parts.append(np.arange(D))
        pool_parts.append(np.full(D, how, dtype=object))
    phi = np.concatenate(phi_parts)
    if config.layer_norm:
        mu = float(phi.mean())
        sigma = float(np.sqrt(((phi - mu) ** 2).mean() + config.layer_norm_eps))
        z = (phi - mu) / sigma
    else:
        mu = sigma = float("nan")
        z = phi
    sim = _similarity(clf, std)
    if sim is not None:
        idx = _nearest_to_prototypes(clf, std)
        top = sim.max(axis=0)
        phi, z = np.concatenate([phi, top]), np.concatenate([z, top])
        inst_parts.append(idx)
        proto_parts.append(np.arange(D))
        pool_parts.append(np.full(D, "similarity", dtype=object))
    w = clf.model_.weight.detach().cpu().double().numpy()[0]
    b = float(clf.model_.bias.detach().cpu().double().numpy()[0]) if clf.model_.bias is not None else 0.0
    terms = w * z
    frame = pd.DataFrame(
        {
            "prototype": np.concatenate(proto_parts).astype(int),
            "pooling": np.concatenate(pool_parts),
            "phi": phi,
            "z": z,
            "weight": w,
            "term": terms,
            "instance": np.concatenate(inst_parts).astype(int),
        }
    )
    frame.attrs.update(
        {"bias": b, "decision_value": float(b + terms.sum()), "mu": mu, "sigma": sigma, "n_instances": len(std)}
    )
    return frame


def explain_bag(clf: Any, bag: np.ndarray) -> pd.DataFrame:
    """Per-instance explanation of one bag's decision value.

    See the module docstring for the attribution rule; in short, each pooled feature's term
    ``w_j * z_j`` goes to the instance attaining it (argmin for min, argmax for max), mean terms
    are split equally, and the bias is kept apart, so that

        ``explanation["share"].sum() + explanation.attrs["bias"] == clf.decision_function([bag])[0]``

    up to floating-point rounding (the decision function runs in float32).

    Parameters
    ----------
    clf : PrototypeMILClassifier
        Fitted two-class model.
    bag : ndarray of shape (n_instances, n_features)
        One bag in raw units.

    Returns
    -------
    pandas.DataFrame
        One row per instance (index = instance position in the bag) with columns
        ``nearest_prototype``, ``distance`` (to it, model distance in the standardised
        space), ``share`` (its total share of the logit), ``share_<pooling>`` per pooling (and
        ``share_similarity`` with the similarity block), and
        ``attains_min`` (list of prototypes whose min distance this instance attains).
        ``attrs``: ``bias``, ``decision_value`` (float64 recomputation), ``rule``.

    Raises
    ------
    NotImplementedError
        For models with more than two classes.
    """
    terms = decision_terms(clf, bag)
    K = int(terms.attrs["n_instances"])
    std = _standardised(clf, [bag])[0]
    dist = _distances(clf, std)
    frame = pd.DataFrame(
        {"nearest_prototype": np.argmin(dist, axis=1).astype(int), "distance": dist.min(axis=1)}
    )
    total = np.zeros(K)
    for how in dict.fromkeys(terms["pooling"]):
        part = np.zeros(K)
        sel = terms[terms["pooling"] == how]
        for inst, term in zip(sel["instance"], sel["term"]):
            if inst < 0:
                part += term / K
            else:
                part[inst] += term
        frame[f"share_{how}"] = part
        total += part
    frame.insert(2, "share", total)
    mins = terms[terms["pooling"] == "min"]
    if len(mins):
        frame["attains_min"] = [sorted(mins.loc[mins["instance"] == i, "prototype"].tolist()) for i in range(K)]
    else:
        # no min pooling: still report who attains each minimum distance
        arg = np.argmin(dist, axis=0)
        frame["attains_min"] = [sorted(np.nonzero(arg == i)[0].tolist()) for i in range(K)]
    frame.index.name = "instance"
    frame.attrs.update(
        {"bias": terms.attrs["bias"], "decision_value": terms.attrs["decision_value"], "rule": ATTRIBUTION_RULE}
    )
    return frame
