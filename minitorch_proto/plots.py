"""Figures for prototype MIL models, their training and their evaluation.

Every function draws with matplotlib's object API, never touches ``pyplot`` and never calls
``show``: it draws into the ``ax`` (or ``fig``) it is given, or into a new
:class:`matplotlib.figure.Figure`, and returns that Figure. That works under the Agg backend,
in scripts and in notebooks (Jupyter displays a returned Figure), and leaves no global state
behind. Save a figure with ``fig.savefig(path)``.

Colours: positive bags / positive evidence are red (``C3``), negative ones blue (``C0``).
"""
from __future__ import annotations

import textwrap
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

__all__ = [
    "prototypes_in_input_space",
    "plot_prototype_images",
    "plot_prototype_profiles",
    "plot_toy_spaces",
    "plot_bag_explanation",
    "plot_training_history",
    "plot_cv_results",
    "plot_rank",
    "plot_prototype_trajectories",
]

POS_COLOUR = "C3"
NEG_COLOUR = "C0"


# --------------------------------------------------------------------------- helpers
def _figure(fig: Figure | None, figsize: tuple[float, float]) -> Figure:
    return fig if fig is not None else Figure(figsize=figsize, layout="constrained")


def _single_axes(ax: Axes | None, fig: Figure | None, figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    if ax is not None:
        return ax.figure, ax
    fig = _figure(fig, figsize)
    return fig, fig.add_subplot(1, 1, 1)


def _axes_list(axes, fig: Figure | None, n: int, ncols: int, panel: tuple[float, float]) -> tuple[Figure, list[Axes]]:
    """``n`` axes: the ones given (at least n), or a new grid in ``fig`` / a new figure."""
    if axes is not None:
        flat = list(np.ravel(axes))
        if len(flat) < n:
            raise ValueError(f"Need {n} axes, got {len(flat)}.")
        return flat[0].figure, flat[:n]
    ncols = max(1, min(ncols, n))
    nrows = int(np.ceil(n / ncols))
    fig = _figure(fig, (panel[0] * ncols, panel[1] * nrows))
    grid = fig.add_gridspec(nrows, ncols)
    return fig, [fig.add_subplot(grid[i // ncols, i % ncols]) for i in range(n)]


def _coef_frame(clf: Any) -> pd.DataFrame | None:
    """Per-prototype coefficients for two-class models, else None."""
    from .evaluation.explain import prototype_coefficients

    if int(clf.model_.weight.shape[0]) != 1:
        return None
    return prototype_coefficients(clf)


def _coef_text(coefs: pd.Series) -> str:
    return ", ".join(f"{name[5:]} {value:+.2f}" for name, value in coefs.items())


def _evidence_colour(coefs: pd.Series) -> str:
    """Red when being CLOSE to the prototype raises the positive logit (coefficients sum < 0)."""
    return POS_COLOUR if float(coefs.sum()) < 0 else NEG_COLOUR


def prototypes_in_input_space(clf: Any) -> tuple[np.ndarray, str]:
    """The prototypes mapped back from the standardised space to the input units.

    Parameters
    ----------
    clf : PrototypeMILClassifier
        Fitted.

    Returns
    -------
    prototypes : ndarray of shape (D, L)
        ``P * scale + mean`` for ``standardization="feature"``; unchanged for ``"none"``; and,
        for ``"instance"`` (a per-instance z-score that cannot be inverted), the prototypes in
        standardised units.
    units : str
        ``"input"`` or ``"instance-standardised"``.
    """
    P = clf.model_.prototypes.detach().cpu().double().numpy().copy()
    std = clf.standardizer_
    if std.mode == "feature":
        return P * std.scale_ + std.mean_, "input"
    if std.mode == "none":
        return P, "input"
    return P, "instance-standardised"


def _bag_outline(ax: Axes, bag: np.ndarray, colour: str) -> None:
    """Connect a bag's instances: a segment for two, a closed polygon (by angle) for more."""
    if len(bag) < 2:
        return
    if len(bag) == 2:
        ax.plot(bag[:, 0], bag[:, 1], "-", color=colour, alpha=0.35, lw=1)
        return
    centre = bag.mean(axis=0)
    order = np.argsort(np.arctan2(bag[:, 1] - centre[1], bag[:, 0] - centre[0]))
    ring = bag[np.r_[order, order[:1]]]
    ax.plot(ring[:, 0], ring[:, 1], "-", color=colour, alpha=0.35, lw=1)


def _draw_bags_2d(ax: Axes, bags: Sequence[np.ndarray], y: np.ndarray, positive) -> None:
    for bag, label in zip(bags, y):
        colour = POS_COLOUR if label == positive else NEG_COLOUR
        _bag_outline(ax, bag, colour)
        ax.scatter(bag[:, 0], bag[:, 1], s=18, color=colour, edgecolor="white", linewidth=0.4, zorder=3)
    ax.scatter([], [], s=18, color=POS_COLOUR, label="positive bag")
    ax.scatter([], [], s=18, color=NEG_COLOUR, label="negative bag")


def _positive_label(y: np.ndarray, clf: Any | None = None):
    if clf is not None and hasattr(clf, "classes_") and len(clf.classes_) == 2:
        return clf.classes_[1]
    values = np.unique(y)
    return values.max()


# ------------------------------------------------------------------ prototype images
def plot_prototype_images(
    clf: Any,
    image_shape: tuple[int, int] = (28, 28),
    *,
    axes=None,
    fig: Figure | None = None,
    ncols: int = 6,
    cmap: str = "gray_r",
    title: str | None = None,
) -> Figure:
    """Each prototype as an image, annotated with its classifier coefficient(s).

    Prototypes are mapped back to pixel space with :func:`prototypes_in_input_space`
    (inverse of the feature z-score; unchanged for ``standardization="none"``).

    Parameters
    ----------
    clf : PrototypeMILClassifier
        Fitted on bags whose instances are flattened images.
    image_shape : (int, int), default=(28, 28)
        Shape of one image; its product must equal the number of features.
    axes : array of Axes, optional
        At least D axes to draw into.
    fig : Figure, optional
        Figure to add a grid of axes to (ignored when ``axes`` is given).
    ncols : int, default=6
        Columns of the grid.
    cmap : str, default="gray_r"
        Colour map (dark = high pixel value).
    title : str, optional
        Figure title.

    Returns
    -------
    Figure

    Notes
    -----
    Title colour (two-class models): red when the coefficients of the prototype sum to a
    negative number, i.e. being close to it raises the logit of the positive class (it looks
    like the positive concept); blue otherwise.
    """
    P, units = prototypes_in_input_space(clf)
    if int(np.prod(image_shape)) != P.shape[1]:
        raise ValueError(f"image_shape {image_shape} holds {int(np.prod(image_shape))} pixels, "
                         f"but the prototypes have {P.shape[1]} features.")
    coefs = _coef_frame(clf)
    fig, ax_list = _axes_list(axes, fig, len(P), ncols, (2.2, 2.5))
    for d, ax in enumerate(ax_list):
        ax.imshow(P[d].reshape(image_shape), cmap=cmap, interpolation="nearest")
        ax.set_xticks([])
        ax.set_yticks([])
        if coefs is not None:
            row = coefs.loc[d]
            ax.set_title(f"P{d + 1}\ncoef {_coef_text(row)}", fontsize=9, color=_evidence_colour(row))
        else:
            ax.set_title(f"P{d + 1}", fontsize=9)
    if title is None:
        title = "Prototypes" + ("" if units == "input" else " (instance-standardised units)")
    width_chars = max(30, int(fig.get_figwidth() * 9))
    fig.suptitle("\n".join(textwrap.wrap(title, width_chars)), fontsize=10)
    return fig


def plot_prototype_profiles(
    clf: Any,
    feature_names: Sequence[str] | None = None,
    top: int | None = None,
    *,
    ax: Axes | None = None,
    fig: Figure | None = None,
    cmap: str = "RdBu_r",
) -> Figure:
    """Prototypes of tabular data as a D x L heat map in standardised units.

    Parameters
    ----------
    clf : PrototypeMILClassifier
        Fitted.
    feature_names : sequence of str, optional
        Column labels (shown when there are at most 40 features).
    top : int, optional
        Show only the ``top`` prototypes with the largest total |coefficient|, in that order.
    ax : Axes, optional
    fig : Figure, optional
    cmap : str, default="RdBu_r"
        Diverging map, centred at 0 (the training mean of each feature under
        ``standardization="feature"``).

    Returns
    -------
    Figure
    """
    P = clf.model_.prototypes.detach().cpu().double().numpy()
    D, L = P.shape
    if feature_names is not None and len(feature_names) != L:
        raise ValueError(f"{len(feature_names)} feature names for {L} features.")
    coefs = _coef_frame(clf)
    order = np.arange(D)
    if coefs is not None:
        order = np.argsort(-coefs.abs().sum(axis=1).to_numpy(), kind="stable")
        if top is None:
            order = np.arange(D)
    if top is not None:
        order = order[: int(top)]
    fig, ax = _single_axes(ax, fig, (min(5 + 0.25 * L, 16), 1.6 + 0.4 * len(order)))
    rows = P[order]
    vmax = float(np.max(np.abs(rows))) or 1.0
    image = ax.imshow(rows, aspect="auto", cmap=cmap, vmin=-vmax, vmax=vmax, interpolation="nearest")
    labels = []
    for d in order:
        labels.append(f"P{d + 1}" + (f" ({_coef_text(coefs.loc[d])})" if coefs is not None else ""))
    ax.set_yticks(np.arange(len(order)))
    ax.set_yticklabels(labels, fontsize=8)
    if coefs is not None:
        for tick, d in zip(ax.get_yticklabels(), order):
            tick.set_color(_evidence_colour(coefs.loc[d]))
    if feature_names is not None and L <= 40:
        ax.set_xticks(np.arange(L))
        ax.set_xticklabels(list(feature_names), rotation=90, fontsize=7)
    ax.set_xlabel("feature")
    units = "standardised units" if clf.standardizer_.mode != "none" else "input units"
    fig.colorbar(image, ax=ax, label=f"prototype value ({units})")
    ax.set_title("Prototype profiles" + (f" (top {len(order)} by |coef|)" if top is not None else ""))
    return fig


# ------------------------------------------------------------------------- toy spaces
def plot_toy_spaces(
    clf: Any,
    bags: Sequence[np.ndarray],
    y: Sequence | np.ndarray,
    *,
    prototypes: tuple[int, int] | None = None,
    axes=None,
    fig: Figure | None = None,
    boundary: bool = True,
) -> Figure:
    """The paper's Figure 1 for a model fitted on two-feature bags.

    Left: the feature space, instances coloured by their bag's label, the instances of each
    bag connected, prototypes as stars (mapped back to input units). Right: each bag as the
    point (min distance to prototype a, min distance to prototype b) - the distance space the
    classifier sees before layer normalisation.

    Parameters
    ----------
    clf : PrototypeMILClassifier
        Fitted on bags with two features.
    bags : sequence of ndarray
        Bags in raw units.
    y : array-like
        Their labels.
    prototypes : (int, int), optional
        The two prototypes of the right panel (0-based). Default: 0 and 1 for D <= 2, else the
        two with the largest |min coefficient| (two classes) or the first two.
    axes : pair of Axes, optional
    fig : Figure, optional
    boundary : bool, default=True
        Draw the decision boundary in the right panel when it is exact there (min pooling only
        and D = 2).

    Returns
    -------
    Figure
    """
    import torch

    from .evaluation.explain import instance_distances
    from .model import head_logits, normalize_features

    y = np.asarray(y).reshape(-1)
    if clf.n_features_in_ != 2:
        raise ValueError(f"plot_toy_spaces needs bags with 2 features; the model has {clf.n_features_in_}.")
    positive = _positive_label(y, clf)
    fig, (left, right) = _axes_list(axes, fig, 2, 2, (4.6, 4.2))
    raw = [np.asarray(b, dtype=float) for b in bags]
    _draw_bags_2d(left, raw, y, positive)
    P, units = prototypes_in_input_space(clf)
    D = len(P)
    coefs = _coef_frame(clf)
    for d in range(D):
        colour = _evidence_colour(coefs.loc[d]) if coefs is not None else "k"
        left.scatter(P[d, 0], P[d, 1], marker="*", s=260, color=colour, edgecolor="k", zorder=5)
        left.annotate(f"P{d + 1}", P[d], textcoords="offset points", xytext=(7, 7), fontsize=10, weight="bold")
    left.scatter([], [], marker="*", s=120, color="0.5", edgecolor="k", label="prototype")
    left.set_xlabel("feature 1")
    left.set_ylabel("feature 2")
    left.set_title("Feature space" + ("" if units == "input" else f" ({units})"))
    left.legend(fontsize=8, loc="best")

    if prototypes is None:
        if D <= 2 or coefs is None:
            pair = (0, min(1, D - 1))
        else:
            col = "coef_min" if "coef_min" in coefs else coefs.columns[0]
            pair = tuple(int(i) for i in np.argsort(-coefs[col].abs().to_numpy(), kind="stable")[:2])
    else:
        pair = tuple(int(i) for i in prototypes)
    a, b = pair
    mins = np.stack([d.min(axis=0) for d in instance_distances(clf, raw)])
    colours = [POS_COLOUR if label == positive else NEG_COLOUR for label in y]
    if D == 1:
        rng = np.random.default_rng(0)
        right.scatter(mins[:, 0], rng.uniform(-0.2, 0.2, len(mins)), c=colours, s=30, edgecolor="k", lw=0.4)
        right.set_yticks([])
        right.set_xlabel("min distance to P1")
    else:
        right.scatter(mins[:, a], mins[:, b], c=colours, s=30, edgecolor="k", linewidth=0.4, zorder=3)
        right.set_xlabel(f"min distance to P{a + 1}")
        right.set_ylabel(f"min distance to P{b + 1}")
        config = clf.model_.config
        if boundary and D == 2 and tuple(config.pooling) == ("min",) and coefs is not None:
            hi = float(mins.max()) * 1.1 + 1e-9
            xs = np.linspace(0, hi, 200)
            gx, gy = np.meshgrid(xs, xs)
            phi = np.stack([gx.ravel(), gy.ravel()], axis=1)
            if (a, b) == (1, 0):
                phi = phi[:, ::-1]
            with torch.no_grad():
                z = normalize_features(torch.as_tensor(phi, dtype=torch.float64), config)
                w = clf.model_.weight.detach().double()
                bias = clf.model_.bias.detach().double() if clf.model_.bias is not None else None
                logit = head_logits(z, w, bias)[:, 0].numpy().reshape(gx.shape)
            if logit.min() < 0 < logit.max():
                right.contour(gx, gy, logit, levels=[0.0], colors="k", linestyles="--", linewidths=1)
                right.plot([], [], "k--", lw=1, label="decision boundary")
                right.legend(fontsize=8, loc="best")
    right.set_title("Distance space (bags)")
    return fig


# ------------------------------------------------------------------- bag explanation
def plot_bag_explanation(
    clf: Any,
    bag: np.ndarray,
    image_shape: tuple[int, int] | None = None,
    top: int = 10,
    *,
    ax: Axes | None = None,
    fig: Figure | None = None,
    cmap: str = "gray_r",
) -> Figure:
    """Instances of one bag ranked by their share of the logit (see :func:`explain.explain_bag`).

    Parameters
    ----------
    clf : PrototypeMILClassifier
        Fitted two-class model.
    bag : ndarray of shape (n_instances, n_features)
        One bag in raw units.
    image_shape : (int, int), optional
        When given, a thumbnail of each shown instance is drawn left of its bar.
    top : int, default=10
        Number of instances shown (largest |share| first).
    ax : Axes, optional
    fig : Figure, optional
    cmap : str, default="gray_r"

    Returns
    -------
    Figure
        The bar axes plus one inset axes per thumbnail.
    """
    from .evaluation.explain import explain_bag

    bag = np.asarray(bag, dtype=float)
    ex = explain_bag(clf, bag)
    order = np.argsort(-ex["share"].abs().to_numpy(), kind="stable")[: int(top)]
    n = len(order)
    fig, ax = _single_axes(ax, fig, (6.5, 0.8 + 0.45 * n))
    ypos = np.arange(n)[::-1]  # largest at the top
    shares = ex["share"].to_numpy()[order]
    colours = [POS_COLOUR if s > 0 else NEG_COLOUR for s in shares]
    ax.barh(ypos, shares, color=colours, height=0.7)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_ylim(-0.5, n - 0.5)
    labels = [
        f"instance {i} (nearest P{int(ex.loc[i, 'nearest_prototype']) + 1}, d={ex.loc[i, 'distance']:.2f})" for i in order
    ]
    ax.set_yticks(ypos)
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlabel("instance's share of the logit (see explain.explain_bag)")
    bias, value = ex.attrs["bias"], ex.attrs["decision_value"]
    rest = float(shares.sum())
    ax.set_title(
        f"logit {value:+.3f} = bias {bias:+.3f} + shown {rest:+.3f}"
        + (f" + other {value - bias - rest:+.3f}" if n < len(ex) else ""),
        fontsize=9,
    )
    if image_shape is not None:
        if int(np.prod(image_shape)) != bag.shape[1]:
            raise ValueError(f"image_shape {image_shape} does not match {bag.shape[1]} features.")
        ax.yaxis.tick_right()
        for row, i in zip(ypos, order):
            # a box left of the axes, one bar row high; the square image hugs the axes edge
            inset = ax.inset_axes([-0.26, (row + 0.05) / n, 0.25, 0.9 / n])
            inset.set_anchor("E")
            inset.imshow(bag[i].reshape(image_shape), cmap=cmap, interpolation="nearest")
            inset.set_xticks([])
            inset.set_yticks([])
    return fig


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
    from .model import LOSS_TERMS

    frame = pd.DataFrame(list(history)) if not isinstance(history, pd.DataFrame) else history
    if frame.empty:
        raise ValueError("history is empty.")
    x = frame["epoch"].to_numpy() if "epoch" in frame else np.arange(1, len(frame) + 1)
    if terms is None:
        terms = [t for t in (*LOSS_TERMS, "total") if t in frame]
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
    if evaluation == "final":
        return method
    if evaluation == "test_selected":
        return f"{method} (test-fold selection, optimistic)"
    return f"{method} ({evaluation})"


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
    from .evaluation.cv import summarize
    from .paper import DATASET_ORDER, PAPER_TABLE2
    from .evaluation.report import SPREADS

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
    ax.set_xticklabels(datasets)
    ax.set_ylabel(f"{metric}: mean\n(error bar: {SPREADS[spread]})", fontsize=8)
    lo = np.nanmin([v[0] for _, vals, _ in series for v in vals.values()] + [1.0])
    ax.set_ylim(max(0.0, lo - 0.15), 1.0)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, frameon=False)
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
    from .evaluation.report import average_ranks

    ranks = average_ranks(results, metric=metric)
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


# ---------------------------------------------------------------------- trajectories
def plot_prototype_trajectories(
    snapshots: Sequence[np.ndarray],
    bags: Sequence[np.ndarray],
    y: Sequence | np.ndarray,
    *,
    ax: Axes | None = None,
    fig: Figure | None = None,
    epochs: Sequence[int] | None = None,
) -> Figure:
    """Paths of 2-D prototypes over training, over the bags they were trained on.

    Parameters
    ----------
    snapshots : sequence of ndarray of shape (D, 2)
        Prototype positions, one array per recorded epoch (first = initial), in the same
        units as ``bags`` (see :func:`minitorch_proto.experiments.toy_training_snapshots`).
    bags : sequence of ndarray of shape (n_i, 2)
    y : array-like
        Bag labels (the larger value is drawn as positive).
    ax, fig : optional
    epochs : sequence of int, optional
        Epoch of each snapshot, for the legend (default 0, 1, ...).

    Returns
    -------
    Figure
    """
    traj = np.stack([np.asarray(s, dtype=float) for s in snapshots])  # (T, D, 2)
    if traj.ndim != 3 or traj.shape[2] != 2:
        raise ValueError(f"snapshots must be (D, 2) arrays; got stacked shape {traj.shape}.")
    y = np.asarray(y).reshape(-1)
    fig, ax = _single_axes(ax, fig, (5.2, 4.6))
    _draw_bags_2d(ax, [np.asarray(b, dtype=float) for b in bags], y, _positive_label(y))
    first = 0 if epochs is None else int(epochs[0])
    last = len(traj) - 1 if epochs is None else int(epochs[-1])
    for d in range(traj.shape[1]):
        colour = f"C{(d + 4) % 10}"
        ax.plot(traj[:, d, 0], traj[:, d, 1], "-", color=colour, lw=1.4, alpha=0.9)
        ax.scatter(traj[0, d, 0], traj[0, d, 1], marker="o", s=40, facecolor="white", edgecolor=colour, zorder=4)
        ax.scatter(traj[-1, d, 0], traj[-1, d, 1], marker="*", s=220, color=colour, edgecolor="k", zorder=5,
                   label=f"P{d + 1}")
    ax.scatter([], [], marker="o", s=40, facecolor="white", edgecolor="k", label=f"epoch {first}")
    ax.scatter([], [], marker="*", s=120, color="0.6", edgecolor="k", label=f"epoch {last}")
    ax.set_xlabel("feature 1")
    ax.set_ylabel("feature 2")
    ax.set_title("Prototype trajectories during training")
    ax.legend(fontsize=8, loc="best")
    return fig
