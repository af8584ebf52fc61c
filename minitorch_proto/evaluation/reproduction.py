"""What ``minitorch-proto reproduce`` runs: registered methods over the benchmarks, each on its folds.

The prototype rows of the paper (paper-faithful, the published code's behaviour, the
monotone variant) train every data set's folds in one batched program
(:func:`~minitorch_proto.evaluation.cv.cross_validate_many`); the rows whose choices
happen on inner splits run their own harness (rates tuned on inner CV, the nested
search); every other registered method, the baselines and the recommended model
included, is an estimator cross-validated with
:func:`~minitorch_proto.evaluation.cv.cross_validate`.
"""
from __future__ import annotations

import sys
import time
from typing import Callable, Mapping, Sequence

import pandas as pd

from ..methods import (
    PROTOTYPE,
    PROTOTYPE_BEST,
    PROTOTYPE_COMPAT,
    PROTOTYPE_MONOTONE,
    PROTOTYPE_TUNED,
    TUNING_MULTIPLIERS,
    get,
    make,
)
from .cv import CVTask, Fold, cross_validate, cross_validate_many

__all__ = ["run_methods"]


def run_methods(
    methods: Sequence[str],
    data: Mapping[str, object],
    folds: Mapping[str, Sequence[Fold]],
    configs: Callable[[str, str], tuple],
    *,
    budgets: Sequence[str] = ("defaults",),
    seed: int = 0,
    device="auto",
    backend: str = "auto",
    progress: bool = False,
    n_jobs: int = 1,
) -> tuple[pd.DataFrame, list[dict], dict[str, str]]:
    """Cross-validate each method (a results label or key) on every data set's folds.

    Parameters
    ----------
    methods : labels or keys of :mod:`minitorch_proto.methods`
    data : name -> data set (``bags``, ``y``, ``name``)
    folds : name -> folds of that data set
    configs : ``configs(dataset, method) -> (model_config, train_config, standardization)`` of the
        paper's prototype rows (Table 1 plus the caller's overrides)
    budgets : for the baselines: "defaults" and/or "common"

    Returns
    -------
    results : per-fold rows of every method
    timings : one dict per method (method, datasets, wall_seconds)
    files : extra files to write beside the results (the inner choices of tuned rows)
    """
    from .baseline_cv import cross_validate_baseline

    frames, timings, files = [], [], {}
    for method in methods:
        entry = get(method)
        method = entry.label
        t0 = time.perf_counter()
        if method in (PROTOTYPE, PROTOTYPE_COMPAT, PROTOTYPE_MONOTONE):
            # Every data set's folds in one call: compatible ones train as one batched program.
            tasks = [CVTask(d.name, d.bags, d.y, folds[name], *configs(d.name, method), method)
                     for name, d in data.items()]
            evaluations = ("final", "test_selected") if method == PROTOTYPE_COMPAT else ("final",)
            res = cross_validate_many(tasks, evaluations=evaluations, device=device, progress=progress,
                                      backend=backend)
        elif method == PROTOTYPE_TUNED:
            from .cv import cross_validate_tuned

            parts, choices = [], []
            for name, d in data.items():
                mconf, tconf, std = configs(d.name, PROTOTYPE)
                grid = [dict(lr_prototypes=tconf.lr_prototypes * k, lr_classifier=tconf.lr_classifier * k)
                        for k in TUNING_MULTIPLIERS]
                r, c = cross_validate_tuned(CVTask(d.name, d.bags, d.y, folds[name], mconf, tconf, std, method),
                                            grid, device=device, progress=progress, backend=backend)
                parts.append(r)
                choices.append(c)
            res = pd.concat(parts, ignore_index=True)
            files["tuning_choices.csv"] = pd.concat(choices, ignore_index=True).to_csv(index=False)
        elif method == PROTOTYPE_BEST:
            from .tuning import SearchBudget, nested_cross_validate

            budget = SearchBudget(random_state=seed)
            parts, choices = [], []
            for name, d in data.items():
                t1 = time.perf_counter()
                r, c = nested_cross_validate(d.bags, d.y, folds[name], budget, dataset=d.name, method=method,
                                             backend=backend, device=device)
                c["dataset_wall_seconds"] = time.perf_counter() - t1
                print(f"{method}: {d.name} {r.accuracy.mean():.3f} ({c['dataset_wall_seconds'].iloc[0]:.0f} s)",
                      file=sys.stderr)
                parts.append(r)
                choices.append(c)
            res = pd.concat(parts, ignore_index=True)
            files["best_choices.csv"] = pd.concat(choices, ignore_index=True).to_csv(index=False)
        elif entry.family == "baseline":
            # All folds (and seeds and inner fits) of a baseline train together; see issue 17.
            parts, choices = [], []
            for budget in budgets:
                for name, d in data.items():
                    r, c = cross_validate_baseline(d.bags, d.y, folds[name], method, budget=budget, dataset=d.name,
                                                   n_jobs=n_jobs)
                    parts.append(r)
                    choices.append(c)
            res = pd.concat(parts, ignore_index=True)
            if any(not c.empty for c in choices):
                files[f"baseline_choices_{method}.csv"] = pd.concat(choices, ignore_index=True).to_csv(index=False)
        else:
            res = pd.concat([cross_validate(make(entry.key, seed, dataset=name), d.bags, d.y, folds[name],
                                            dataset=d.name, method=method, n_jobs=n_jobs)
                             for name, d in data.items()], ignore_index=True)
        wall = time.perf_counter() - t0
        timings.append({"method": method, "datasets": " ".join(data), "wall_seconds": wall})
        final = res[res.evaluation == "final"]
        print(f"{method}: " + ", ".join(f"{n} {final[final.dataset == n].accuracy.mean():.3f}" for n in data)
              + f" (accuracy; {wall:.1f} s)", file=sys.stderr)
        frames.append(res)
    return pd.concat(frames, ignore_index=True), timings, files
