"""One-at-a-time ablations against the paper-faithful model, and their paired accuracy changes.

:data:`ABLATIONS` lists every setting the book measures: the paper's own design choices
(pooling, layer norm, number of prototypes, penalties, distance, initialisation) and each
departure of the authors' published code, one at a time and all together. :func:`run_ablations`
cross-validates them on shared folds, and :func:`paired_deltas` turns the per-fold results
into changes against the baseline, fold by fold (a paired comparison, whose standard error is
that of the per-fold differences).
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..model import compat_config
from ..paper import paper_configs
from ..training.config import compat_train_config
from .cv import CVTask, evaluate_tasks, mean_standard_error, stratified_folds

__all__ = ["Ablation", "ABLATIONS", "BASELINE", "DELTA_COLUMNS", "REACH_PROBES", "ablation_configs", "select_ablations",
           "run_ablations", "paired_deltas", "parameter_reach"]

#: The setting every change is measured against.
BASELINE = "paper-faithful"


class Ablation(NamedTuple):
    """One setting: changes to the model and training configurations, and the standardisation."""

    group: str
    setting: str
    model_changes: Mapping | str
    train_changes: Mapping | str
    standardization: str = "feature"


#: Every setting of the ablation page. ``"compat"`` stands for all published-code changes at once.
#: Two settings belong to two groups (they are the paper's choices and the code's departures at
#: once); :func:`run_ablations` trains them once and lists them in both.
ABLATIONS: tuple[Ablation, ...] = (
    Ablation("baseline", BASELINE, {}, {}),
    Ablation("pooling", "pooling=mean", {"pooling": ("mean",)}, {}),
    Ablation("pooling", "pooling=max", {"pooling": ("max",)}, {}),
    Ablation("pooling", "pooling=min+mean", {"pooling": ("min", "mean")}, {}),
    Ablation("pooling", "pooling=min+max", {"pooling": ("min", "max")}, {}),
    Ablation("pooling", "pooling=min+max+mean", {"pooling": ("min", "max", "mean")}, {}),
    Ablation("layer norm", "layer_norm=False", {"layer_norm": False}, {}),
    Ablation("prototypes", "D=4", {"n_prototypes": 4}, {}),
    Ablation("prototypes", "D=8", {"n_prototypes": 8}, {}),
    Ablation("prototypes", "D=16", {"n_prototypes": 16}, {}),
    Ablation("prototypes", "D=48", {"n_prototypes": 48}, {}),
    Ablation("regulariser", "lambda_w=0", {"lambda_w": 0.0}, {}),
    Ablation("regulariser", "lambda_p=0", {"lambda_p": 0.0}, {}),
    Ablation("regulariser", "lambda_d=0", {"lambda_d": 0.0}, {}),
    Ablation("distance", "distance=sqeuclidean", {"distance": "sqeuclidean"}, {}),
    Ablation("distance", "distance=manhattan", {"distance": "manhattan"}, {}),
    Ablation("distance", "distance=cosine", {"distance": "cosine"}, {}),
    Ablation("init", "init=kmeans++", {"init": "kmeans++"}, {}),
    Ablation("published-code deviation", "distance=pseudo", {"distance": "pseudo"}, {}),
    Ablation("published-code deviation", "pooling=min+max+mean", {"pooling": ("min", "max", "mean")}, {}),
    Ablation("published-code deviation", "layer_norm=False", {"layer_norm": False}, {}),
    Ablation("published-code deviation", "bias=False", {"bias": False}, {}),
    Ablation("published-code deviation", "prototype_penalty=pairwise", {"prototype_penalty": "pairwise"}, {}),
    Ablation("published-code deviation", "distance_penalty=pooled", {"distance_penalty": "pooled"}, {}),
    Ablation("published-code deviation", "standardization=instance", {}, {}, "instance"),
    Ablation("published-code deviation", "sampling=replacement", {}, {"sampling": "replacement"}),
    Ablation("published-code deviation", "lr_halving_every=40", {}, {"lr_halving_every": 40}),
    Ablation("published-code deviation", "accumulate_gradients=True", {}, {"accumulate_gradients": True}),
    Ablation("all deviations", "published code (all at once)", "compat", "compat", "instance"),
)

#: Columns of :func:`paired_deltas` (and of the frozen five-data-set table).
DELTA_COLUMNS = ("group", "setting", "dataset", "accuracy", "delta", "delta_se", "n_folds")


def ablation_configs(dataset: str, ablation: Ablation, epochs: int | None = None):
    """The paper's Table 1 configurations for ``dataset`` with one ablation's changes applied.

    Returns
    -------
    (PrototypeMILConfig, TrainConfig)
    """
    model_cfg, train_cfg = paper_configs(dataset, epochs=epochs)
    if ablation.model_changes == "compat":
        model_cfg = compat_config(model_cfg)
    else:
        model_cfg = replace(model_cfg, **dict(ablation.model_changes))
    if ablation.train_changes == "compat":
        train_cfg = compat_train_config(train_cfg)
    else:
        train_cfg = replace(train_cfg, **dict(ablation.train_changes))
    return model_cfg, train_cfg


def select_ablations(settings: Iterable[str] | None = None) -> list[Ablation]:
    """The ablations named in ``settings`` (all when None), always with the baseline first.

    Raises
    ------
    ValueError
        If a name is not a setting of :data:`ABLATIONS`, or the names hold no setting but the baseline.
    """
    if settings is None:
        return list(ABLATIONS)
    wanted = set(settings)
    unknown = wanted - {a.setting for a in ABLATIONS}
    if unknown:
        raise ValueError(f"unknown ablation setting(s) {sorted(unknown)}; see ABLATIONS for the names.")
    if not wanted:
        raise ValueError("settings is empty; name at least one ablation setting (or pass None for all).")
    if wanted <= {BASELINE}:  # the baseline alone has nothing to be compared with (it failed after training)
        raise ValueError(f"settings names only the baseline {BASELINE!r}; add at least one other setting.")
    return [a for a in ABLATIONS if a.setting in wanted or a.setting == BASELINE]


def run_ablations(
    data: Mapping[str, object],
    ablations: Sequence[Ablation] = ABLATIONS,
    *,
    repeats: int = 1,
    folds: int = 10,
    epochs: int | None = None,
    seed: int = 0,
    device="auto",
) -> tuple[pd.DataFrame, float]:
    """Cross-validate every ablation on every data set, all on the same folds and seeds.

    Parameters
    ----------
    data : mapping
        Benchmark name -> data set with ``bags`` and ``y`` (e.g. ``load_benchmark``).
    ablations : sequence of Ablation
        The settings; must include the baseline for :func:`paired_deltas`.
    repeats, folds : int
        Repeated stratified k-fold cross-validation.
    epochs : int, optional
        Epochs per model (default: Table 1's 100).
    seed : int
        Seeds the folds and every model.
    device : str
        Passed to :func:`~minitorch_proto.evaluation.cv.evaluate_tasks`.

    Returns
    -------
    results : DataFrame
        Per-fold results with ``group`` and ``setting`` columns added.
    seconds : float
        Wall time of the whole run.
    """
    trained: dict[tuple[str, str], pd.DataFrame] = {}
    rows, t0 = [], time.perf_counter()
    # Every data set's folds first: a fold count one of them cannot take fails before any training.
    all_folds = {name: stratified_folds(d.y, n_repeats=repeats, n_folds=folds, random_state=seed)
                 for name, d in data.items()}
    for name, d in data.items():
        cv_folds = all_folds[name]
        for ablation in ablations:
            key = (name, ablation.setting)
            if key not in trained:  # a setting listed in two groups trains once
                model_cfg, train_cfg = ablation_configs(name, ablation, epochs=epochs)
                task = CVTask(name, d.bags, d.y, cv_folds, model_cfg, train_cfg, ablation.standardization,
                              ablation.setting)
                trained[key] = evaluate_tasks([task], device=device)
            rows.append(trained[key].assign(group=ablation.group, setting=ablation.setting))
    return pd.concat(rows, ignore_index=True), time.perf_counter() - t0


def paired_deltas(results: pd.DataFrame, baseline: str = BASELINE) -> pd.DataFrame:
    """Mean paired change in accuracy of every setting against ``baseline``, per data set.

    Parameters
    ----------
    results : DataFrame
        Output of :func:`run_ablations` (``group``, ``setting``, ``dataset``, ``repeat``,
        ``fold``, ``accuracy``).
    baseline : str
        The setting subtracted fold by fold.

    Returns
    -------
    DataFrame
        Columns :data:`DELTA_COLUMNS`: ``delta`` is the mean over folds of (accuracy of the
        setting minus accuracy of the baseline on the same fold), ``delta_se`` its standard
        error: over the repetition means of those differences when there are several
        repetitions, else over the folds (optimistic: folds share training bags; NaN for one fold).

    Raises
    ------
    ValueError
        If the baseline is not among the settings.
    """
    if baseline not in set(results["setting"]):
        raise ValueError(f"the baseline setting {baseline!r} is not in the results.")
    key = ["dataset", "repeat", "fold"]
    base = results.loc[results["setting"] == baseline, key + ["accuracy"]].drop_duplicates(key)
    paired = results.merge(base, on=key, suffixes=("", "_baseline"))
    paired["delta"] = paired["accuracy"] - paired["accuracy_baseline"]
    deltas = (
        paired.groupby(["group", "setting", "dataset"], sort=False)
        .agg(accuracy=("accuracy", "mean"), delta=("delta", "mean"), n_folds=("delta", "size"))
        .reset_index()
    )
    # Over repetition means when there are several (folds of one repetition are not independent).
    se = {key: mean_standard_error(g["delta"], g["repeat"])
          for key, g in paired.groupby(["group", "setting", "dataset"], sort=False)}
    deltas["delta_se"] = [se[k] for k in zip(deltas["group"], deltas["setting"], deltas["dataset"])]
    return deltas[list(DELTA_COLUMNS)]


#: The fits of :func:`parameter_reach`: (row label, ablation setting, the ladder's "+ rates" regime).
REACH_PROBES = (("paper-faithful", BASELINE, False), ("lambda_w=0", "lambda_w=0", False),
                ("init=kmeans++", "init=kmeans++", False),
                ("accumulate_gradients=True", "accumulate_gradients=True", False),
                ("rates 1e-2", BASELINE, True), ("rates 1e-2 + init=kmeans++", "init=kmeans++", True))


def parameter_reach(dataset: str, bags: Sequence[np.ndarray], y, fold, epochs: int | None = None,
                    device: str = "cpu") -> tuple[pd.DataFrame, dict]:
    """How far training moves the parameters from their start, per ablation, on one fold.

    Six fits (:data:`REACH_PROBES`) of Table 1's model on ``fold``'s training bags: the
    paper-faithful one, three single deviations, and the ladder's "+ rates" regime (both rates
    1e-2, half the epochs) from the normal and the k-means++ start. Why an ablation changes
    little or much is read from these distances: a prototype that stays where it started keeps
    what its start measured.

    Parameters
    ----------
    dataset : str
        The benchmark whose Table 1 settings the fits use.
    bags, y : sequence of arrays, array-like
        The benchmark's bags and labels.
    fold : Fold
        Its ``train`` bags are fitted, its ``test`` bags scored; its ``seed`` seeds every fit.
    epochs : int, default=None
        Table 1's epochs when None (the "+ rates" probes run half as many).
    device : str, default="cpu"
        Where the fits train ("auto": CUDA when available); the distances are measured on the CPU.

    Returns
    -------
    reach : DataFrame, one row per probe: train and test accuracy, the median distance from a
        starting prototype to its nearest training instance (standardised space), the mean
        distance each prototype moved, the largest starting |weight| and the largest weight move
    penalty : dict, ``max_logit_change`` and ``flips``: what dropping the weight penalty changed
        in the test bags' logits and predictions
    """
    import torch

    from ..estimator import PrototypeMILClassifier

    y = np.asarray(y)
    train_bags, y_train = [bags[i] for i in fold.train], y[fold.train]
    test_bags, y_test = [bags[i] for i in fold.test], y[fold.test]
    by_name = {a.setting: a for a in select_ablations(["lambda_w=0", "init=kmeans++", "accumulate_gradients=True"])}
    rows, scores = [], {}
    for label, setting, fast in REACH_PROBES:
        model_cfg, train_cfg = ablation_configs(dataset, by_name[setting], epochs=epochs)
        if fast:  # the ladder's "+ rates" rung: both rates 1e-2, half the epochs
            train_cfg = replace(train_cfg, lr_prototypes=1e-2, lr_classifier=1e-2, epochs=max(1, train_cfg.epochs // 2))
        start: dict = {}

        def keep_start(epoch, model, start=start):
            if epoch == 0:  # called once before training, with the initial parameters
                # On the CPU, where the fitted model ends, whatever device trained it.
                start.update(P=model.prototypes.detach().cpu().clone(), W=model.weight.detach().cpu().clone())

        est = PrototypeMILClassifier.from_configs(model_cfg, train_cfg, random_state=fold.seed, device=device,
                                                  standardization=by_name[setting].standardization)
        est.fit(train_bags, y_train, on_epoch_end=keep_start)
        P, W = est.model_.prototypes.detach(), est.model_.weight.detach()
        instances = torch.as_tensor(np.concatenate(est.standardizer_.transform(train_bags)), dtype=P.dtype)
        scores[label] = est.decision_function(test_bags)
        rows.append({
            "setting": label,
            "train accuracy": est.score(train_bags, y_train),
            "test accuracy": est.score(test_bags, y_test),
            "start: prototype to nearest instance": float(torch.cdist(start["P"], instances).min(1).values.median()),
            "prototype moved (mean)": float((P - start["P"]).norm(dim=1).mean()),
            "start: largest |weight|": float(start["W"].abs().max()),
            "weight moved (largest)": float((W - start["W"]).abs().max()),
        })
    base, dropped = scores[BASELINE], scores["lambda_w=0"]
    penalty = {"max_logit_change": float(np.abs(base - dropped).max()), "flips": int(((base > 0) != (dropped > 0)).sum())}
    return pd.DataFrame(rows).set_index("setting"), penalty
