"""Figures of the prototypes themselves: images, profiles, toy spaces, bag explanations, evidence maps,
trajectories."""
from __future__ import annotations

import textwrap
from typing import Any, Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..validation import frames_in_model_order

from ._common import (
    NEG_COLOUR,
    POS_COLOUR,
    _axes_list,
    _bag_colours,
    _check_bags_labels,
    _coef_frame,
    _coef_text,
    _draw_bags_2d,
    _evidence_colour,
    _positive_label,
    _single_axes,
    prototypes_in_input_space,
)


# ------------------------------------------------------------------ prototype images
def plot_prototype_images(
    clf: Any,
    image_shape: tuple[int, int] = (28, 28),
    *,
    axes: Sequence[Axes] | np.ndarray | None = None,
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
    Title colour (two-class models): red when the distance coefficients of the prototype sum
    to a negative number, i.e. being close to it raises the logit of the positive class (it
    looks like the positive concept); blue otherwise; grey for a head with a similarity block,
    whose direction only :func:`~minitorch_proto.evaluation.explain.closeness_coefficients`
    can weigh (it needs the training bags). One model: for a seed ensemble pass
    ``clf.member(j)``.
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
    # Its own width in inches (a SubFigure has no get_figwidth; its share of the root figure's).
    width_chars = max(30, int(fig.bbox.width / fig.dpi * 9))
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
    from ..evaluation.explain import prototype_coefficients

    coefs = _coef_frame(clf)  # refuses a seed ensemble before its first member is drawn
    P = clf.model_.prototypes.detach().cpu().double().numpy()
    D, L = P.shape
    if feature_names is not None and len(feature_names) != L:
        raise ValueError(f"{len(feature_names)} feature names for {L} features.")
    order = np.arange(D)
    if top is not None and (not isinstance(top, (int, np.integer)) or isinstance(top, bool) or top < 1):
        raise ValueError(f"top must be a whole number of at least 1 (prototypes to show); got {top!r}.")
    if top is not None:  # every class's coefficients count: the total |coef| exists for any number of classes
        weight = prototype_coefficients(clf).abs().sum(axis=1).to_numpy()
        order = np.argsort(-weight, kind="stable")[: int(top)]
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
    bag connected, prototypes as stars (mapped back to input units; for an instance-standardised
    model, which cannot be mapped back, bags and prototypes alike in z-scores). Right: each bag as the
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

    from ..evaluation.explain import instance_distances
    from ..model import head_logits, normalize_features

    y = np.asarray(y).reshape(-1)
    if clf.n_features_in_ != 2:
        raise ValueError(f"plot_toy_spaces needs bags with 2 features; the model has {clf.n_features_in_}.")
    positive = _positive_label(y, clf)
    raw = [np.asarray(b, dtype=float) for b in bags]
    _check_bags_labels(raw, y)
    fig, (left, right) = _axes_list(axes, fig, 2, 2, (4.6, 4.2))
    P, units = prototypes_in_input_space(clf)
    # The bags in the prototypes' units: an instance-standardised model's prototypes cannot be mapped back
    # to the input, and had been drawn in z-scores over the raw bags.
    _draw_bags_2d(left, raw if units == "input" else clf.standardizer_.transform(raw), y, positive)
    D = len(P)
    coefs = _coef_frame(clf)
    for d in range(D):
        colour = _evidence_colour(coefs.loc[d]) if coefs is not None else "k"
        left.scatter(P[d, 0], P[d, 1], marker="*", s=260, color=colour, edgecolor="k", zorder=5)
        left.annotate(f"P{d + 1}", P[d], textcoords="offset points", xytext=(7, 7), fontsize=10, weight="bold")
    left.scatter([], [], marker="*", s=120, color="0.5", edgecolor="k", label="prototype")
    left.set_xlabel("feature 1" + ("" if units == "input" else f" ({units})"))
    left.set_ylabel("feature 2" + ("" if units == "input" else f" ({units})"))
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
        if len(pair) != 2 or pair[0] == pair[1] or not all(0 <= i < D for i in pair):
            raise ValueError(f"prototypes must be two different indices in 0..{D - 1}; got {prototypes!r}.")
    a, b = pair
    mins = np.stack([d.min(axis=0) for d in instance_distances(clf, raw)])
    colours = _bag_colours(y, positive)[0]
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
        # The boundary is drawn in the plane of the two min distances; a similarity block adds dimensions.
        if (boundary and D == 2 and tuple(config.pooling) == ("min",) and coefs is not None
                and not clf.model_.has_similarity):
            hi = float(mins.max()) * 1.1 + 1e-9
            xs = np.linspace(0, hi, 200)
            gx, gy = np.meshgrid(xs, xs)
            phi = np.stack([gx.ravel(), gy.ravel()], axis=1)
            if (a, b) == (1, 0):
                phi = np.ascontiguousarray(phi[:, ::-1])  # torch refuses numpy's negative strides
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
    reference: np.ndarray | Sequence[np.ndarray] | None = None,
    split: str = "shapley",
) -> Figure:
    """Instances of one bag ranked by their share of the logit (see :func:`~minitorch_proto.evaluation.explain_bag`).

    With ``reference`` (the training bags, or ``evidence_reference`` of them) the bars are the
    instances' evidence against that reference instead
    (:func:`minitorch_proto.evaluation.evidence.instance_evidence` with ``split``), which adds up
    with the average training logit to the bag's logit; positive = towards the positive class.

    Parameters
    ----------
    clf : PrototypeMILClassifier
        Fitted two-class model.
    bag : ndarray of shape (n_instances, n_features)
        One bag in raw units.
    image_shape : (int, int), optional
        When given, a thumbnail of each shown instance is drawn left of its bar.
    top : int, default=10
        Number of instances shown (largest absolute share first).
    ax : Axes, optional
    fig : Figure, optional
    cmap : str, default="gray_r"
    reference : ndarray or sequence of ndarray, optional
    split : {"shapley", "attaining"}, default="shapley"
        Used with ``reference`` only.

    Returns
    -------
    Figure
        The bar axes plus one inset axes per thumbnail.
    """
    from ..evaluation.evidence import instance_evidence
    from ..evaluation.explain import explain_bag

    # Columns by name, as predict reads them (the thumbnails show the same values the bars explain).
    bag = np.asarray(frames_in_model_order([bag], getattr(clf, "feature_names_in_", None))[0], dtype=float)
    if reference is None:
        ex = explain_bag(clf, bag)
        base, base_name, xlabel = ex.attrs["bias"], "bias", "instance's share of the logit (see explain.explain_bag)"
    else:
        ex = instance_evidence(clf, bag, reference, split=split).rename(columns={"evidence": "share"})
        base, base_name = ex.attrs["reference_logit"], "average training logit"
        xlabel = f"instance's evidence against the reference (split={split!r})"
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
    ax.set_xlabel(xlabel)
    value = ex.attrs["decision_value"]
    rest = float(shares.sum())
    title = (f"logit {value:+.3f} = {base_name} {base:+.3f} + shown {rest:+.3f}"
             + (f" + other {value - base - rest:+.3f}" if n < len(ex) else ""))
    # Two lines when the identity is wider than the figure holds at this size (the reference's name is long).
    ax.set_title(title if len(title) <= 70 else title.replace(" + shown", "\n+ shown", 1), fontsize=9)
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


# ---------------------------------------------------------------------- evidence map
def plot_evidence_map(
    coords: np.ndarray,
    evidence: np.ndarray,
    *,
    patch_size: float | None = None,
    outline: np.ndarray | None = None,
    top: int = 0,
    limit: float | None = None,
    label: str = "evidence (drop in P(positive) without the patch)",
    title: str | None = None,
    ax: Axes | None = None,
    fig: Figure | None = None,
    cmap: str = "RdBu_r",
    colorbar: bool = True,
) -> Figure:
    """A slide's patches where they lie, each coloured by its evidence: a heatmap of a prediction.

    Parameters
    ----------
    coords : array-like of shape (n_instances, 2)
        Each patch's top-left corner, x then y, in slide pixels (as CLAM and TRIDENT store
        ``coords``; ``minitorch-proto explain --coords-key coords`` writes them beside the evidence).
    evidence : array-like of shape (n_instances,)
        One score per patch, e.g. :func:`~minitorch_proto.evaluation.evidence_table`'s column;
        positive (red) pushes towards the positive class, negative (blue) away; NaN is grey.
    patch_size : float, optional
        Side of a patch in the units of ``coords``; default: the grid step, the smallest positive
        gap between two x or two y coordinates (1 for a single patch).
    outline : array-like of bool, shape (n_instances,), optional
        Patches to outline in black, such as an annotated tumour region.
    top : int, default=0
        Mark the ``top`` patches of most evidence with a dot.
    limit : float, optional
        The colour scale runs from ``-limit`` to ``limit`` (default: the largest absolute evidence),
        so that white is always zero; pass one limit to compare slides.
    label, title : str
        Colour bar label and axes title.
    ax, fig : optional
        Where to draw.
    cmap : str, default="RdBu_r"
        A diverging colour map.
    colorbar : bool, default=True
        Draw the colour bar (one is enough for several maps on one ``limit``).

    Returns
    -------
    Figure
    """
    from matplotlib import colormaps
    from matplotlib.collections import PolyCollection
    from matplotlib.colors import Normalize

    xy = np.asarray(coords, dtype=float)
    ev = np.asarray(evidence, dtype=float).reshape(-1)
    if xy.ndim != 2 or xy.shape[1] != 2 or len(xy) != len(ev) or not len(ev):
        raise ValueError(f"coords must have shape (n, 2) and evidence (n,), n >= 1; got {xy.shape} and {ev.shape}.")
    if not np.isfinite(xy).all():
        raise ValueError(f"coords hold NaN or infinite values (patch {int(np.flatnonzero(~np.isfinite(xy))[0] // 2)}).")
    if patch_size is None:
        gaps = [np.diff(np.unique(xy[:, k])) for k in (0, 1)]
        gaps = np.concatenate([g[g > 0] for g in gaps])
        patch_size = float(gaps.min()) if len(gaps) else 1.0
    finite = ev[np.isfinite(ev)]
    limit = float(limit) if limit is not None else float(np.abs(finite).max()) if len(finite) else 1.0
    norm = Normalize(-(limit or 1.0), limit or 1.0)
    fig, ax = _single_axes(ax, fig, (5.5, 4.5))
    # One array of squares, not a Rectangle object per patch: a slide has tens of thousands of patches.
    square = np.array([[0, 0], [1, 0], [1, 1], [0, 1]], dtype=float) * patch_size
    corners = xy[:, None, :] + square
    boxes = PolyCollection(corners, cmap=colormaps[cmap].with_extremes(bad="0.8"), norm=norm)
    boxes.set_array(np.ma.masked_invalid(ev))
    ax.add_collection(boxes)
    if outline is not None:
        mask = np.asarray(outline, dtype=bool).reshape(-1)
        if len(mask) != len(ev):
            raise ValueError(f"outline has {len(mask)} entries for {len(ev)} patches.")
        ax.add_collection(PolyCollection(corners[mask], facecolor="none", edgecolor="k", linewidth=0.8))
    if top:
        best = np.argsort(np.where(np.isnan(ev), np.inf, -ev), kind="stable")[: int(top)]
        best = best[np.isfinite(ev[best])]  # a patch without a value is not evidence
        ax.plot(xy[best, 0] + patch_size / 2, xy[best, 1] + patch_size / 2, "o", color="gold", mec="k", ms=5)
    ax.set_xlim(xy[:, 0].min(), xy[:, 0].max() + patch_size)
    ax.set_ylim(xy[:, 1].max() + patch_size, xy[:, 1].min())  # image coordinates: y grows downwards
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title, fontsize=9)
    if colorbar:
        fig.colorbar(boxes, ax=ax, shrink=0.8).set_label(label, fontsize=8)
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
        units as ``bags`` (see :func:`minitorch_proto.book.toy_training_snapshots`).
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
    if len(snapshots) == 0:
        raise ValueError("no snapshots to draw: give the prototypes of at least one epoch.")
    traj = np.stack([np.asarray(s, dtype=float) for s in snapshots])  # (T, D, 2)
    if traj.ndim != 3 or traj.shape[2] != 2:
        raise ValueError(f"snapshots must be (D, 2) arrays; got stacked shape {traj.shape}.")
    if epochs is not None and len(epochs) != len(traj):  # [0] for 3 snapshots had labelled start and end "epoch 0"
        raise ValueError(f"{len(epochs)} epochs for {len(traj)} snapshots: give the epoch of each snapshot.")
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
