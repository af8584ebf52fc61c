"""The ladder: from the paper-faithful model to the tuned ensemble, one ingredient at a time.

Each rung changes one thing relative to the rung above it and is cross-validated on the
same folds, so the paired per-fold difference to the rung above measures that ingredient
alone (in that order: the worth of an ingredient can depend on the ones already in). One
rung changes two: ``+ rates`` also halves the epochs (100 to 50), so its difference is
that of the rates and the shorter training together.

The fixed rungs (:data:`LADDER_STEPS`) illustrate; their values were picked from the
regions that single 1 x 10 probes (issue 13) found promising, so they are *not* honest
estimates of a method one could have chosen blind. The last rung, nested tuning
(:class:`~minitorch_proto.evaluation.tuning.HalvingSearch`), is: it chooses every
setting on inner splits of each outer training fold.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..model import PrototypeMILConfig
from ..paper import paper_configs
from ..training import TrainConfig
from .cv import TIE_DIGITS, Fold, cross_validate, mean_standard_error

if TYPE_CHECKING:
    from .tuning import SearchBudget

__all__ = ["LADDER_STEPS", "NESTED_STEP", "TUNED_ENSEMBLE", "tuned_ensemble_rows", "ladder_configs",
           "run_ladder", "ladder_table", "best_baseline_comparison"]

#: (name, what changes) of each fixed rung, in order; each keeps everything above it.
LADDER_STEPS: tuple[tuple[str, str], ...] = (
    ("paper", "Table 1: Euclidean, D = 24, min, layer norm, normal init, Table 1 rates, 100 epochs"),
    ("+ rates", "both learning rates 1e-2 (100-333x Table 1's), and 50 epochs instead of 100"),
    ("+ distance", "cosine distance"),
    ("+ init", "k-means++ initialisation on training instances"),
    ("+ pooling", "min + mean + max pooling (layer norm kept)"),
    ("+ D", "D = 64 prototypes"),
    ("+ ensemble", "average of 5 seeds"),
)
#: The last rung's name: the whole nested search (tuning.py), refitted as a 5-seed ensemble.
NESTED_STEP = "+ nested tuning"
#: The same models as a method of their own, as ``minitorch-proto reproduce --methods prototype-best``
#: labels them: the prototype model with its largest honest budget.
TUNED_ENSEMBLE = "prototype (tuned ensemble)"


def tuned_ensemble_rows(results: pd.DataFrame) -> pd.DataFrame:
    """The nested rung's per-fold rows of a ladder run, relabelled :data:`TUNED_ENSEMBLE`.

    So the prototype model's largest honest budget (every setting chosen on inner folds, then a
    seed ensemble) can stand in a comparison table beside the baselines' budgets; the fixed
    rungs stay out, since their settings were not chosen blind.

    Raises
    ------
    ValueError
        When ``results`` holds no nested rung.
    """
    rows = results[results["method"] == NESTED_STEP]
    if rows.empty:
        raise ValueError(f"the ladder results hold no {NESTED_STEP!r} rung (run it without --no-nested).")
    return rows.assign(method=TUNED_ENSEMBLE).reset_index(drop=True)


def ladder_configs(dataset: str) -> list[tuple[str, PrototypeMILConfig, TrainConfig, int]]:
    """(name, model config, train config, n_seeds) of every fixed rung for a benchmark."""
    mconf, tconf = paper_configs(dataset)
    rungs = [("paper", mconf, tconf, 1)]
    tconf = replace(tconf, lr_prototypes=1e-2, lr_classifier=1e-2, epochs=50)
    rungs.append(("+ rates", mconf, tconf, 1))
    mconf = replace(mconf, distance="cosine")
    rungs.append(("+ distance", mconf, tconf, 1))
    mconf = replace(mconf, init="kmeans++")
    rungs.append(("+ init", mconf, tconf, 1))
    mconf = replace(mconf, pooling=("min", "mean", "max"))
    rungs.append(("+ pooling", mconf, tconf, 1))
    mconf = replace(mconf, n_prototypes=64)
    rungs.append(("+ D", mconf, tconf, 1))
    rungs.append(("+ ensemble", mconf, tconf, 5))
    return rungs


def run_ladder(
    data: Mapping[str, tuple[Sequence[np.ndarray], np.ndarray]],
    folds: Mapping[str, Sequence[Fold]],
    *,
    steps: Sequence[str] | None = None,
    budget: SearchBudget | None = None,
    backend: str = "auto",
    progress: Callable[[str], object] | None = None,
) -> pd.DataFrame:
    """Every rung on every data set, on the same folds; per-fold rows, ``method`` = rung name.

    Parameters
    ----------
    data : mapping of str to (bags, y)
        Benchmarks by name, each known to :func:`~minitorch_proto.paper.paper_configs`.
    folds : mapping of str to sequence of Fold
        Per data set, the folds (the same for every rung).
    steps : sequence of str, optional
        Rung names to run; None (default) runs every fixed rung and the nested one.
    budget : :class:`~minitorch_proto.evaluation.tuning.SearchBudget`, optional
        Of the nested rung; None (default) gives ``SearchBudget()``.
    backend : {"auto", "compiled", "tensor"}, default="auto"
        How every rung trains (:func:`~minitorch_proto.training.batched.train_batched`), on the CPU.
    progress : callable(str), optional
        Told "<data set>: <rung>" when each rung starts.

    Returns
    -------
    DataFrame
        :func:`~minitorch_proto.evaluation.cross_validate`'s per-fold rows of every rung and data set.

    Raises
    ------
    ValueError
        When ``steps`` names an unknown rung.
    """
    from ..estimator import PrototypeMILClassifier
    from .tuning import HalvingSearch, SearchBudget

    wanted = list(steps) if steps is not None else [s for s, _ in LADDER_STEPS] + [NESTED_STEP]
    known = {s for s, _ in LADDER_STEPS} | {NESTED_STEP}
    unknown = [s for s in wanted if s not in known]
    if unknown:
        raise ValueError(f"Unknown ladder step(s) {unknown}; choose from {sorted(known)}.")
    frames = []
    for name, (bags, y) in data.items():
        for step, mconf, tconf, k in ladder_configs(name):
            if step in wanted:
                if progress:
                    progress(f"{name}: {step}")
                # Member s of fold f's ensemble is seeded f.seed + s; k = 1 is the single model.
                est = PrototypeMILClassifier.from_configs(mconf, tconf, n_seeds=k, backend=backend, device="cpu")
                frames.append(cross_validate(est, bags, y, folds[name], dataset=name, method=step))
        if NESTED_STEP in wanted:
            if progress:
                progress(f"{name}: {NESTED_STEP}")
            search = HalvingSearch(budget or SearchBudget(), backend=backend)
            frames.append(cross_validate(search, bags, y, folds[name], dataset=name, method=NESTED_STEP))
    return pd.concat(frames, ignore_index=True)


def ladder_table(results: pd.DataFrame, metric: str = "accuracy") -> pd.DataFrame:
    """Per data set and rung: mean, its standard error, the paired difference to the rung above and its SE, seconds.

    Rungs keep the order in which they first appear in ``results``. ``seconds`` is the
    rung's total fitting time over all folds (search included for the nested rung).
    ``against`` names the rung the difference is taken to and ``adds`` what that difference
    measures: a fixed rung keeps everything above it, so when a run skips rungs (``paper`` then
    ``+ distance``), the difference measures the skipped ingredients too (``+ rates + distance``).
    """
    order = list(dict.fromkeys(results["method"]))
    rows = []
    for ds, g in results.groupby("dataset", sort=False):
        prev, prev_step = None, None
        for step in order:
            r = g[g["method"] == step].sort_values(["repeat", "fold"])
            if r.empty:
                continue
            row = dict(dataset=ds, step=step, mean=r[metric].mean(), se=mean_standard_error(r[metric], r["repeat"]),
                       n_folds=len(r), n_repeats=r["repeat"].nunique(), seconds=r["fit_seconds"].sum(),
                       against=prev_step, adds=_ingredients(prev_step, step) if prev_step is not None else None)
            if prev is not None:
                m = r.merge(prev, on=["repeat", "fold"], suffixes=("", "_prev"))
                d = m[metric] - m[f"{metric}_prev"]
                row["diff"], row["diff_se"] = d.mean(), mean_standard_error(d, m["repeat"])
            else:
                row["diff"], row["diff_se"] = np.nan, np.nan
            rows.append(row)
            prev, prev_step = r[["repeat", "fold", metric]], step
    return pd.DataFrame(rows, columns=["dataset", "step", "mean", "se", "diff", "diff_se", "n_folds", "n_repeats",
                                       "seconds", "against", "adds"])


def _ingredients(before: str, step: str) -> str:
    """What the difference from rung ``before`` to fixed rung ``step`` measures: every fixed rung in between."""
    fixed = [name for name, _ in LADDER_STEPS]
    if before not in fixed or step not in fixed or fixed.index(step) <= fixed.index(before):
        return step  # the nested rung, or rows that are not fixed rungs: the step itself
    return " ".join(fixed[fixed.index(before) + 1:fixed.index(step) + 1])


def best_baseline_comparison(results: pd.DataFrame, baselines: pd.DataFrame, method: str,
                             exclude_prefix: str = "prototype") -> pd.DataFrame:
    """``method`` beside the best other method of ``baselines`` on each data set, on the same folds.

    The best baseline is the one with the highest mean accuracy over the (repeat, fold) pairs
    that ``method`` was run on (rows of ``baselines`` whose method starts with
    ``exclude_prefix`` are not baselines). ``diff`` is the paired per-fold difference
    (method - baseline), ``diff_se`` its standard error (see :func:`ladder_table`).
    """
    ours = results[(results["method"] == method) & (results["evaluation"] == "final")]
    base = baselines[(baselines["evaluation"] == "final") & ~baselines["method"].str.startswith(exclude_prefix)]
    rows = []
    for ds, g in ours.groupby("dataset", sort=False):
        b = base[base["dataset"] == ds].merge(g[["repeat", "fold", "accuracy"]], on=["repeat", "fold"],
                                             suffixes=("", "_ours"))
        if b.empty:
            continue
        means = b.groupby("method")["accuracy"].mean()
        best = means.round(TIE_DIGITS).idxmax()  # equal means tie (the first by name), not by rounding noise
        pair = b[b["method"] == best].sort_values(["repeat", "fold"])
        d = pair["accuracy_ours"] - pair["accuracy"]
        rows.append(dict(dataset=ds, ours=pair["accuracy_ours"].mean(), ours_se=mean_standard_error(pair["accuracy_ours"], pair["repeat"]),
                         best_baseline=best, baseline=pair["accuracy"].mean(),
                         baseline_se=mean_standard_error(pair["accuracy"], pair["repeat"]), diff=d.mean(), diff_se=mean_standard_error(d, pair["repeat"]),
                         n_folds=len(pair)))
    return pd.DataFrame(rows, columns=["dataset", "ours", "ours_se", "best_baseline", "baseline", "baseline_se", "diff",
                                       "diff_se", "n_folds"])
