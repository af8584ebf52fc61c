"""What ``minitorch-proto reproduce`` runs: registered methods over the benchmarks, each on its folds.

Every method is an estimator of the registry (:func:`minitorch_proto.methods.make`)
cross-validated with :func:`~minitorch_proto.evaluation.cv.cross_validate`; the
tuned ones (learning rates on inner CV, the nested search, the baselines' common
budget) are meta-estimators whose choices happen on inner splits of each training
fold, and their choices are written beside the results. The paper's three prototype
rows (paper-faithful, the published code's behaviour, the monotone variant) go one
step further for speed: all data sets' folds train as one batched program
(:func:`~minitorch_proto.evaluation.cv.evaluate_tasks`, the same models), which also
gives the published code's test-fold selection as a separately labelled evaluation.
``--device`` and ``--backend`` reach every row whose estimator takes them (:func:`placement`).
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
    get,
    make,
)
from .cv import CVTask, Fold, cross_validate, evaluate_tasks

__all__ = ["FLAGGED_METHODS", "PLACEMENT", "choice_rows", "flags_reach", "placement", "placement_reach",
           "run_methods"]

#: The rows that train every data set's folds as one batched program (:func:`~.cv.evaluate_tasks`).
BATCHED_METHODS = (PROTOTYPE, PROTOTYPE_COMPAT, PROTOTYPE_MONOTONE)
#: The run's options that reach every row whose estimator has a parameter of that name (a meta-estimator's
#: inner estimator's too): ``--device`` and ``--backend``.
PLACEMENT = ("device", "backend")

#: The rows that the model flags (``--prototypes``, ``--epochs``, ``--distance``, the rates and the
#: penalties) reach: Table 1's model and its variants. Baselines and the recommended and ladder-best
#: rows keep their own recipes.
FLAGGED_METHODS = (PROTOTYPE, PROTOTYPE_COMPAT, PROTOTYPE_MONOTONE, PROTOTYPE_TUNED)


def flags_reach(methods: Sequence[str], given: Sequence[str]) -> list[str]:
    """The ``methods`` (results labels) that the model flags ``given`` reach.

    Raises
    ------
    ValueError
        When flags were given and no method takes them: they would be recorded and change nothing.
    """
    reach = [m for m in methods if m in FLAGGED_METHODS]
    if given and not reach:
        raise ValueError(f"{', '.join(given)} set{'s' if len(given) == 1 else ''} only the paper's prototype rows "
                         f"({', '.join(FLAGGED_METHODS)}), and --methods has none; leave "
                         f"{'it' if len(given) == 1 else 'them'} out or add such a row.")
    return reach


def _own_placement(method: str) -> dict[str, object]:
    """The options of :data:`PLACEMENT` a row's estimator takes, each with its own setting (scikit-learn's
    estimators take neither; the batched rows take the run's value as is, so theirs is ``"auto"``; so is one
    whose nested estimators disagree)."""
    entry = get(method)
    if entry.label in BATCHED_METHODS:
        return dict.fromkeys(PLACEMENT, "auto")
    values: dict[str, set] = {}
    for p, v in make(entry.key).get_params(deep=True).items():
        if p.rsplit("__", 1)[-1] in PLACEMENT:
            values.setdefault(p.rsplit("__", 1)[-1], set()).add(v)
    return {o: vs.pop() if len(vs) == 1 else "auto" for o, vs in values.items()}


def _takes(method: str) -> tuple[str, ...]:
    """Which of :data:`PLACEMENT` a row's estimator takes."""
    return tuple(o for o in PLACEMENT if o in _own_placement(method))


def _placed(est, **run):
    """``est`` with every parameter named after a key of ``run`` (nested ones too) set to the run's value.

    ``"auto"`` (the options' default) leaves each estimator's own setting: some train on the CPU on
    purpose (the nested search's compiled engine, the neural baselines' batch-size-1 loops), and a
    run that names no device must not move them to a GPU.
    """
    run = {k: v for k, v in run.items() if v != "auto"}
    return est.set_params(**{p: run[p.rsplit("__", 1)[-1]] for p in est.get_params(deep=True)
                             if p.rsplit("__", 1)[-1] in run})


def placement(methods: Sequence[str], device="auto", backend: str = "auto",
              budgets: Sequence[str] = ("defaults",)) -> dict[str, dict]:
    """Where each row trains, for ``run.json`` (:func:`run_methods` places them so).

    Parameters
    ----------
    methods : labels or keys of :mod:`minitorch_proto.methods`
    device, backend : the run's ``--device`` and ``--backend``
    budgets : the baselines' budgets of the run; each budget's rows (their own results labels) are
        placed as the estimator they wrap

    Returns
    -------
    dict of str to dict
        Per results label, ``{"device": ..., "backend": ...}``: ``device`` as resolved for a row
        whose estimator takes one (with ``"auto"``, the estimator's own setting), else ``"cpu"``
        (scikit-learn's estimators compute with NumPy); ``backend``, or None for a row that has no
        choice of engine.
    """
    from ..utils import resolve_device
    from .baseline_cv import budget_label

    out = {}
    for m in methods:
        entry, own = get(m), _own_placement(m)  # "auto" leaves each option at the estimator's own setting
        dev, eng = ((given if given != "auto" else own[o]) if o in own else None
                    for o, given in (("device", device), ("backend", backend)))
        where = {"device": "cpu" if dev is None else str(resolve_device(dev)), "backend": eng}
        for label in ([budget_label(entry.key, b) for b in budgets] if entry.family == "baseline" else [entry.label]):
            out[label] = dict(where)
    return out


def placement_reach(methods: Sequence[str], given: Sequence[str]) -> dict[str, list[str]]:
    """Per option of ``given`` (``"device"``, ``"backend"``): the ``methods`` (results labels) it reaches.

    Raises
    ------
    ValueError
        When an option reaches no row: as the model flags (:func:`flags_reach`), it would be
        recorded and change nothing.
    """
    reach = {o: [get(m).label for m in methods if o in _takes(m)] for o in given}
    for o, rows in reach.items():
        if not rows:
            what = ("the rows that train with torch (prototype and neural)" if o == "device"
                    else "the prototype rows' training engine")
            raise ValueError(f"--{o} sets only {what}, and --methods has none; leave it out or add such a row.")
    return reach


def choice_rows(fitted: Sequence, folds: Sequence[Fold], dataset: str, method: str) -> pd.DataFrame:
    """What each fold's meta-estimator chose on its inner splits, one row per outer fold (empty if nothing)."""
    rows = []
    for fold, est in zip(folds, fitted):
        head = dict(dataset=dataset, method=method, repeat=fold.repeat, fold=fold.fold)
        if hasattr(est, "choices"):  # the nested search
            rows.append({**head, **est.choices()})
        elif hasattr(est, "best_params_"):  # a grid on inner folds
            scores = est.inner_scores_
            rows.append({**head, **{k.split("__", 1)[-1]: v for k, v in est.best_params_.items()},
                         **{f"inner_accuracy_{g}": scores[g, 0] for g in range(len(scores))},
                         **{f"inner_auc_{g}": scores[g, 1] for g in range(len(scores))}})
    return pd.DataFrame(rows)


def _prototype_params(mconf, tconf, standardization: str) -> dict:
    """Estimator parameters of a (model config, train config, standardisation) triple."""
    from ..estimator import PrototypeMILClassifier

    params = PrototypeMILClassifier.from_configs(mconf, tconf, standardization=standardization).get_params()
    del params["random_state"]  # each fold's copy gets the fold's seed
    return params


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
    budgets : for the baselines: "defaults" and/or "common" (refused without a baseline among ``methods``)
    device, backend : where every row whose estimator takes them trains (:func:`placement`)

    Returns
    -------
    results : per-fold rows of every method
    timings : one dict per results label (method, datasets, wall_seconds): a baseline under
        ``budgets=("defaults", "common")`` has a row for each budget
    files : extra files to write beside the results: ``predictions.csv`` (every test bag's
        probabilities, :func:`~minitorch_proto.evaluation.cv.prediction_rows`) and the inner
        choices of tuned rows
    """
    from ..methods import common_budget_reach
    from .baseline_cv import budget_label

    if any(b != "defaults" for b in budgets):
        common_budget_reach(methods, "common")
    frames, predictions, timings, files = [], [], [], {}
    for method in methods:
        entry = get(method)
        method = entry.label
        t0 = time.perf_counter()
        if method in BATCHED_METHODS:
            # Every data set's folds in one call: compatible ones train as one batched program.
            tasks = [CVTask(d.name, d.bags, d.y, folds[name], *configs(d.name, method), method,
                            getattr(d, "bag_ids", None)) for name, d in data.items()]
            evaluations = ("final", "test_selected") if method == PROTOTYPE_COMPAT else ("final",)
            res, pred = evaluate_tasks(tasks, evaluations=evaluations, device=device, progress=progress,
                                       backend=backend, return_predictions=True)
            predictions.append(pred)
            walls = {method: time.perf_counter() - t0}
        else:
            parts, choices, walls = [], [], {}
            for budget in (budgets if entry.family == "baseline" else ("defaults",)):
                label = budget_label(entry.key, budget) if entry.family == "baseline" else method
                t_label = time.perf_counter()
                for name, d in data.items():
                    # The tuned rates start from Table 1 with the caller's overrides (e.g. --epochs).
                    params = _prototype_params(*configs(d.name, PROTOTYPE)) if method == PROTOTYPE_TUNED else {}
                    est = _placed(make(entry.key, seed, dataset=name, budget=budget, **params),
                                  device=device, backend=backend)
                    t1 = time.perf_counter()
                    r, pred, fitted = cross_validate(est, d.bags, d.y, folds[name], dataset=d.name,
                                                     method=label, n_jobs=n_jobs, return_predictions=True,
                                                     return_estimators=True, bag_ids=getattr(d, "bag_ids", None))
                    predictions.append(pred)
                    c = choice_rows(fitted, folds[name], d.name, label)
                    if not c.empty:
                        c["dataset_wall_seconds"] = time.perf_counter() - t1
                    parts.append(r)
                    choices.append(c)
                walls[label] = time.perf_counter() - t_label  # --budget both: one row per budget
            res = pd.concat(parts, ignore_index=True)
            if any(not c.empty for c in choices):
                name = {PROTOTYPE_TUNED: "tuning_choices.csv", PROTOTYPE_BEST: "best_choices.csv"}.get(
                    method, f"baseline_choices_{entry.key}.csv")
                files[name] = pd.concat(choices, ignore_index=True).to_csv(index=False)
        wall = time.perf_counter() - t0
        timings += [{"method": label, "datasets": " ".join(data), "wall_seconds": w} for label, w in walls.items()]
        final = res[res.evaluation == "final"]
        if progress:  # --quiet: nothing on stderr but errors and notes
            print(f"{method}: " + ", ".join(f"{n} {final[final.dataset == n].accuracy.mean():.3f}" for n in data)
                  + f" (accuracy; {wall:.1f} s)", file=sys.stderr)
        frames.append(res)
    files["predictions.csv"] = pd.concat(predictions, ignore_index=True).to_csv(index=False)
    return pd.concat(frames, ignore_index=True), timings, files
