"""Shared pieces of the figures: axes handling, colours, coefficient labels."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

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
    """Per-prototype coefficients for two-class models, else None (a seed ensemble is refused)."""
    from ..evaluation.explain import _one_model, prototype_coefficients

    _one_model(clf, "The prototype figures")
    if int(clf.model_.weight.shape[0]) != 1:
        return None
    return prototype_coefficients(clf)


def _coef_text(coefs: pd.Series) -> str:
    return ", ".join(f"{name[5:]} {value:+.2f}" for name, value in coefs.items())


#: Prototypes whose direction of evidence a figure cannot tell from the coefficients alone.
UNKNOWN_COLOUR = "0.45"


def _evidence_colour(coefs: pd.Series) -> str:
    """Red when being CLOSE to the prototype raises the positive logit: the distance coefficients sum below 0.

    Grey with a similarity block: a similarity and a distance coefficient are in different units
    (a kernel value near 0 in most bags can carry a huge coefficient), so their signs are weighed
    only over the training bags, by
    :func:`~minitorch_proto.evaluation.explain.closeness_coefficients`.
    """
    if any(str(k).startswith("coef_similarity") for k in coefs.index):
        return UNKNOWN_COLOUR
    return POS_COLOUR if sum(float(v) for v in coefs.to_numpy()) < 0 else NEG_COLOUR


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
    from ..evaluation.explain import _one_model

    _one_model(clf, "prototypes_in_input_space")
    return clf.standardizer_.to_input_units(clf.model_.prototypes.detach().cpu().numpy())


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


#: Colours of the classes beyond two (one each; red and blue stay the two-class convention).
CLASS_COLOURS = ("C0", "C3", "C2", "C1", "C5", "C6", "C7", "C8", "C9", "C4")


def _bag_colours(y: np.ndarray, positive) -> tuple[list[str], list[tuple[str, str]]]:
    """A colour per bag and the legend's (colour, text) entries: positive red and negative blue for two
    classes, one colour per class beyond (a three-class problem had drawn two of its classes alike)."""
    classes = list(np.unique(y))
    if len(classes) <= 2:
        return ([POS_COLOUR if label == positive else NEG_COLOUR for label in y],
                [(POS_COLOUR, "positive bag"), (NEG_COLOUR, "negative bag")])
    palette = {c: CLASS_COLOURS[i % len(CLASS_COLOURS)] for i, c in enumerate(classes)}
    return [palette[label] for label in y], [(palette[c], f"class {c}") for c in classes]


def _check_bags_labels(bags: Sequence, y: Sequence) -> None:
    if len(bags) == 0 or len(bags) != len(y):
        raise ValueError(f"{len(bags)} bags and {len(y)} labels: give one label per bag, and at least one bag.")


def _draw_bags_2d(ax: Axes, bags: Sequence[np.ndarray], y: np.ndarray, positive) -> None:
    _check_bags_labels(bags, y)
    colours, legend = _bag_colours(y, positive)
    for bag, colour in zip(bags, colours):
        _bag_outline(ax, bag, colour)
        ax.scatter(bag[:, 0], bag[:, 1], s=18, color=colour, edgecolor="white", linewidth=0.4, zorder=3)
    for colour, text in legend:
        ax.scatter([], [], s=18, color=colour, label=text)


def _positive_label(y: np.ndarray, clf: Any | None = None):
    if clf is not None and hasattr(clf, "classes_") and len(clf.classes_) == 2:
        return clf.classes_[1]
    return np.unique(y)[-1]  # the second class in sorted order, as an estimator's classes_[1]
