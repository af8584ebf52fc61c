"""Figures of training and evaluation: loss histories, cross-validation results, ranks."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ._common import _single_axes


# --------------------------------------------------------------------------- history
def plot_training_history(
    history: Sequence[Mapping[str, float]] | pd.DataFrame,
    *,
    terms: Sequence[str] | None = None,
    log: bool | None = None,
    ax: Axes | None = None,
    fig: Figure | None = None,
) -> Figure:
    """Each loss term of Eq. 1 per epoch.

    Parameters
    ----------
    history : list of dict or DataFrame
        ``clf.history_`` (columns ``epoch`` and the loss terms).
    terms : sequence of str, optional
        Columns to draw; default every loss term present and ``total``.
    log : bool, optional
        Log-scale y; default when every drawn value is positive. Terms that are zero at every
        epoch (a weight of 0) are left out and named in the title.
    ax, fig : optional

    Returns
    -------
    Figure
    """
    from ..model import LOSS_TERMS

    frame = pd.DataFrame(list(history)) if not isinstance(history, pd.DataFrame) else history
    if frame.empty:
        raise ValueError("history is empty.")
    x = frame["epoch"].to_numpy() if "epoch" in frame else np.arange(1, len(frame) + 1)
    if terms is None:
        terms = [t for t in (*LOSS_TERMS, "total") if t in frame]
        if not terms:  # e.g. an ensemble's histories_, one history per member: not "every term is zero"
            raise ValueError(f"history has none of the loss terms {', '.join((*LOSS_TERMS, 'total'))}; pass one "
                             "model's history (a seed ensemble's member j: clf.histories_[j]).")
    unknown = [t for t in terms if t not in frame]
    if unknown:
        raise ValueError(f"history has no term {', '.join(map(repr, unknown))}; it has "
                         f"{', '.join(c for c in frame.columns if c != 'epoch')}.")
    zero = [t for t in terms if np.all(frame[t].to_numpy() == 0)]
    drawn = [t for t in terms if t not in zero]
    if not drawn:
        raise ValueError("Every requested term is zero at every epoch; nothing to draw.")
    fig, ax = _single_axes(ax, fig, (6, 3.8))
    for t in drawn:
        ax.plot(x, frame[t].to_numpy(), label=t.replace("_", " "), lw=2 if t == "total" else 1.3,
                color="k" if t == "total" else None)
    if log is None:
        log = bool(np.all(frame[drawn].to_numpy() > 0))
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("mean over the epoch's steps" + (" (log scale)" if log else ""))
    ax.set_title("Training loss terms" + (f" (zero, not drawn: {', '.join(zero)})" if zero else ""), fontsize=10)
    ax.legend(fontsize=8)
    return fig


# -------------------------------------------------------------------------------- CV
def _series_label(method: str, evaluation: str) -> str:
    from ..evaluation.report import display_name

    name = display_name(method)
    if evaluation == "final":
        return name
    if evaluation == "test_selected":
        return f"{name} (test-fold selection, optimistic)"
    return f"{name} ({evaluation})"


def plot_cv_results(
    summary_or_results: pd.DataFrame,
    paper: bool | Mapping[str, Mapping[str, float | tuple[float, float | None]]] | None = None,
    *,
    metric: str = "accuracy",
    spread: str = "se_repeats",
    ax: Axes | None = None,
    fig: Figure | None = None,
) -> Figure:
    """Grouped bars per data set and method, measured next to (optionally) reported numbers.

    Parameters
    ----------
    summary_or_results : DataFrame
        Per-fold results of :mod:`minitorch_proto.evaluation.cv` (columns dataset, method, evaluation,
        repeat, fold, accuracy, auc), or their :func:`~minitorch_proto.evaluation.cv.summarize`.
    paper : bool or mapping, optional
        ``True``: add the paper's Table 2 row (accuracy, with its printed "+-"). A mapping
        ``label -> {dataset: value or (value, spread)}`` adds any reported rows. Reported bars
        are hatched and labelled "(reported)".
    metric : {"accuracy", "auc"}
    spread : {"se_repeats", "std_folds"}
        Error bar of measured bars: standard error over the repetition means (default), or
        standard deviation over all folds. The y label says which.
    ax, fig : optional

    Returns
    -------
    Figure
    """
    from ..evaluation.cv import summarize
    from ..paper import DATASET_ORDER, PAPER_TABLE2
    from ..evaluation.report import DATASET_NAMES, SPREADS

    if spread not in SPREADS:
        raise ValueError(f"spread must be one of {sorted(SPREADS)}, got {spread!r}.")
    if metric not in ("accuracy", "auc"):
        raise ValueError(f"metric must be 'accuracy' or 'auc', got {metric!r}.")
    frame = summary_or_results
    summ = frame if f"{metric}_mean" in frame.columns else summarize(frame)
    present = set(summ["dataset"])
    datasets = [d for d in DATASET_ORDER if d in present] + sorted(present - set(DATASET_ORDER))
    series: list[tuple[str, dict[str, tuple[float, float]], bool]] = []
    for (method, evaluation), g in summ.groupby(["method", "evaluation"], sort=False):
        vals = {r["dataset"]: (r[f"{metric}_mean"], r.get(f"{metric}_{spread}", np.nan)) for _, r in g.iterrows()}
        series.append((_series_label(method, evaluation), vals, False))
    reported: dict[str, Mapping] = {}
    if paper is True:
        if metric == "accuracy":
            reported["Prototype learning (paper)"] = {d: PAPER_TABLE2[d] for d in datasets if d in PAPER_TABLE2}
    elif isinstance(paper, Mapping):
        reported.update(paper)
    for label, vals in reported.items():
        norm = {}
        for d, v in vals.items():
            value, err = (v if isinstance(v, (tuple, list)) else (v, None))
            norm[d] = (float(value), np.nan if err is None else float(err))
        series.append((f"{label} (reported)", norm, True))
    if not series:
        raise ValueError("Nothing to plot.")
    fig, ax = _single_axes(ax, fig, (max(5.0, 1.6 * len(datasets) + 1.5), 4.6))
    n = len(series)
    width = 0.8 / n
    x = np.arange(len(datasets))
    for s, (label, vals, is_reported) in enumerate(series):
        means = np.array([vals.get(d, (np.nan, np.nan))[0] for d in datasets], dtype=float)
        errs = np.array([vals.get(d, (np.nan, np.nan))[1] for d in datasets], dtype=float)
        offs = x - 0.4 + width * (s + 0.5)
        ax.bar(offs, means, width=width * 0.95, label=label, hatch="//" if is_reported else None,
               alpha=0.6 if is_reported else 1.0, edgecolor="k", linewidth=0.5,
               yerr=np.where(np.isnan(errs), 0.0, errs), capsize=2, error_kw={"linewidth": 0.8})
    ax.set_xticks(x)
    ax.set_xticklabels([DATASET_NAMES.get(d, d) for d in datasets])
    ax.set_ylabel(f"{metric}: mean\n(error bar: {SPREADS[spread]})", fontsize=8)
    lo = np.nanmin([v[0] for _, vals, _ in series for v in vals.values()] + [1.0])
    # The top must hold every error bar (the paper's printed spreads reach past 1.0).
    tops = [v[0] + (v[1] if np.isfinite(v[1]) else 0.0) for _, vals, _ in series for v in vals.values()]
    ax.set_ylim(max(0.0, lo - 0.15), max(1.0, np.nanmax(tops + [1.0]) + 0.02))
    # Long method names get one legend column, so the legend never squeezes the axes away.
    ncol = 2 if max(len(label) for label, _, _ in series) <= 32 else 1
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=ncol, frameon=False)
    if reported:
        ax.set_title("measured (solid) vs reported (hatched, with the printed ±)", fontsize=9)
    return fig


def plot_rank(
    results: pd.DataFrame,
    *,
    metric: str = "accuracy",
    ax: Axes | None = None,
    fig: Figure | None = None,
) -> Figure:
    """Average rank of each measured method across data sets (1 = best; final evaluation).

    Parameters
    ----------
    results : DataFrame
        Per-fold results of :mod:`minitorch_proto.evaluation.cv` with several methods.
    metric : {"accuracy", "auc"}
    ax, fig : optional

    Returns
    -------
    Figure
    """
    from ..evaluation.report import average_ranks

    ranks = average_ranks(results, metric=metric).dropna()  # methods measured on every data set
    n_sets = results.loc[results["evaluation"] == "final", "dataset"].nunique()
    fig, ax = _single_axes(ax, fig, (5.5, 0.6 + 0.4 * len(ranks)))
    ypos = np.arange(len(ranks))[::-1]
    ax.barh(ypos, ranks.to_numpy(), color="0.55", edgecolor="k", linewidth=0.5)
    for yv, value in zip(ypos, ranks.to_numpy()):
        ax.text(value, yv, f" {value:.2f}", va="center", fontsize=8)
    ax.set_yticks(ypos)
    ax.set_yticklabels(list(ranks.index), fontsize=8)
    ax.set_xlabel(f"average rank of mean {metric} over {n_sets} data set(s) (1 = best)")
    ax.set_xlim(0, max(float(ranks.max()) * 1.15, 1.0))
    return fig


def plot_ablation_deltas(
    deltas: pd.DataFrame,
    *,
    baseline: str,
    names: Mapping[str, str] | None = None,
    ax: Axes | None = None,
    fig: Figure | None = None,
) -> Figure:
    """One-at-a-time changes against a baseline setting: a bar per (setting, data set), ± its SE.

    Parameters
    ----------
    deltas : DataFrame
        One row per (setting, dataset) with ``delta`` (mean paired change in accuracy) and
        ``delta_se`` (its standard error; NaN draws no error bar), as
        :func:`~minitorch_proto.evaluation.ablations.paired_deltas` returns.
    baseline : str
        The setting the changes are measured against (left out).
    names : mapping, optional
        Data set -> name in the legend.
    ax, fig : optional

    Returns
    -------
    Figure
    """
    shown = deltas[deltas["setting"] != baseline].drop_duplicates(["setting", "dataset"])
    if shown.empty:
        raise ValueError(f"deltas holds no setting other than the baseline {baseline!r}.")
    labels = list(dict.fromkeys(shown["setting"]))
    sets = list(dict.fromkeys(shown["dataset"]))
    fig, ax = _single_axes(ax, fig, (8, 0.32 * len(labels) * len(sets) + 1.5))
    height = 0.8 / len(sets)
    for j, name in enumerate(sets):
        part = shown[shown["dataset"] == name].set_index("setting").reindex(labels)
        se = part["delta_se"] if "delta_se" in part else pd.Series(np.nan, index=part.index)
        ax.barh(np.arange(len(labels)) + j * height, part["delta"], height=height, xerr=se.fillna(0).to_numpy(),
                label=(names or {}).get(name, name), capsize=2)
    ax.set_yticks(np.arange(len(labels)) + height * (len(sets) - 1) / 2, labels)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_ylim(len(labels) - 0.1, -0.6)  # the first setting at the top, as in the table
    ax.set_xlabel(f"change in accuracy vs {baseline} (per-fold paired mean ± SE)")
    ax.legend(title="data set", loc="lower right")
    return fig


def plot_comparison(results: pd.DataFrame, *, fig: Figure | None = None) -> Figure:
    """Accuracy and AUC of each method on the same folds: every fold as a dot, the mean with its spread.

    Parameters
    ----------
    results : DataFrame
        Per-fold rows of several methods on the same folds: :func:`~minitorch_proto.evaluation.cross_validate`
        rows of each, concatenated (a ``method`` column tells them apart), as ``minitorch-proto compare`` writes.
        The bar is the standard error over repetition means when there are several
        repetitions, else the standard deviation over folds; the axis label says which.
    fig : optional

    Returns
    -------
    Figure
    """
    from ..evaluation.cv import summarize
    from ..methods import display_name
    from ._common import _axes_list

    for column in ("dataset", "evaluation"):  # one panel reads one data set's folds
        if column in results and results[column].nunique() > 1:
            raise ValueError(f"plot_comparison draws one {column}; results hold "
                             f"{', '.join(map(str, results[column].unique()))}: pass one at a time.")
    summ = summarize(results)
    order = summ.sort_values("auc_mean", ascending=True, kind="stable")["method"].tolist()
    several = bool((summ["n_repeats"] > 1).all())
    spread, word = ("se_repeats", "SE over repeats") if several else ("std_folds", "SD over folds")
    fig, axes = _axes_list(None, fig, 2, 2, (4.2, 0.45 * len(order) + 1.4))
    rng = np.random.default_rng(0)
    for ax, metric, title in zip(axes, ("accuracy", "auc"), ("accuracy", "AUC")):
        for i, method in enumerate(order):
            vals = results.loc[results["method"] == method, metric].astype(float).to_numpy()
            ax.scatter(vals, i + rng.uniform(-0.15, 0.15, len(vals)), s=8, alpha=0.35, color="0.4")
            row = summ[summ["method"] == method].iloc[0]
            err = row[f"{metric}_{spread}"]
            ax.errorbar(row[f"{metric}_mean"], i, xerr=0.0 if np.isnan(err) else err, fmt="o", color="C0",
                        capsize=3)
        ax.set_yticks(range(len(order)))
        ax.set_yticklabels([display_name(m) for m in order] if ax is axes[0] else [])
        ax.set_xlabel(f"{title} per fold (dots); mean ± {word}", fontsize=8)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(f"{results['dataset'].iloc[0]}: {results.groupby('method').size().iloc[0]} folds per method, "
                 "the same folds for every method", fontsize=9)
    return fig


def plot_unit_tests(summary: pd.DataFrame, models: Sequence[str] | None = None, tests: Sequence[str] | None = None,
                    *, threshold: float | None = None, names: Mapping[str, str] | None = None,
                    ax: Axes | None = None, fig: Figure | None = None) -> Figure:
    """MIL unit tests as a grid: each model's mean test accuracy on each test, failed cells marked ✗.

    Parameters
    ----------
    summary : DataFrame
        :func:`minitorch_proto.evaluation.summarize_unit_tests`' table.
    models, tests : rows and columns in order (default: the summary's order)
    threshold : the pass threshold, named in the title
    names : shown names of the models
    ax, fig : optional

    Returns
    -------
    Figure
    """
    models = list(dict.fromkeys(summary["model"])) if models is None else list(models)
    tests = list(dict.fromkeys(summary["test"])) if tests is None else list(tests)
    accuracy = summary.pivot(index="model", columns="test", values="accuracy_mean").reindex(index=models, columns=tests)
    passed = summary.pivot(index="model", columns="test", values="passed").reindex(index=models, columns=tests)
    fig, ax = _single_axes(ax, fig, (1.6 * len(tests) + 3.5, 0.42 * len(models) + 1.2))
    values = accuracy.to_numpy(dtype=float)
    image = ax.imshow(values, cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(tests)), tests)
    ax.set_yticks(range(len(models)), [(names or {}).get(m, m) for m in models])
    for (r, c), value in np.ndenumerate(values):
        ax.text(c, r, f"{value:.2f}" + ("" if passed.iloc[r, c] is True or passed.iloc[r, c] == 1 else " ✗"),
                ha="center", va="center", fontsize=8)
    n_seeds = int(summary["n_seeds"].max()) if len(summary) else 0
    fig.colorbar(image, ax=ax, label=f"mean test accuracy over {n_seeds} seeds")
    below = f"below {threshold} " if threshold is not None else ""
    ax.set_title(f"MIL unit tests (✗: {below}on at least one seed)")
    return fig
