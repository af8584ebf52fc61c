"""Prototypes beside real instances, for image data: the training images nearest each prototype,
and a learned prototype beside the real image it is projected (pushed) onto."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..validation import frames_in_model_order
from ._common import _axes_list, prototypes_in_input_space


def _check_shape(n_features: int, image_shape: tuple[int, int]) -> None:
    if int(np.prod(image_shape)) != n_features:
        raise ValueError(f"image_shape {tuple(image_shape)} holds {int(np.prod(image_shape))} pixels, "
                         f"but the instances have {n_features} features.")


def plot_nearest_images(
    clf: Any,
    bags: Sequence[np.ndarray],
    image_shape: tuple[int, int] = (28, 28),
    k: int = 5,
    *,
    neighbours: Mapping[int, Sequence[tuple[int, int, float]]] | None = None,
    instance_labels: Sequence[Sequence] | None = None,
    fig: Figure | None = None,
    cmap: str = "gray_r",
    title: str | None = None,
) -> Figure:
    """The ``k`` training images nearest to each prototype: one row per prototype, nearest first.

    Parameters
    ----------
    clf : PrototypeMILClassifier
        Fitted, one model (a seed ensemble: ``clf.member(j)``).
    bags : sequence of ndarray
        The training bags in raw units, each instance a flattened image.
    image_shape : (int, int), default=(28, 28)
    k : int, default=5
        Images per prototype (when ``neighbours`` is given, all of its images are drawn instead).
    neighbours : dict, optional
        :func:`~minitorch_proto.evaluation.explain.nearest_instances`'s result, if already computed, or
        a part of it (some prototypes only).
    instance_labels : sequence of sequences, optional
        A label per instance of each bag (e.g. the digit), shown above its image with the distance.
    fig : Figure, optional
    cmap : str, default="gray_r"
    title : str, optional

    Returns
    -------
    Figure
    """
    from ..evaluation.explain import nearest_instances

    # Columns by name, as predict reads them; bags[b][i] of a DataFrame would be a column, not instance i.
    bags = frames_in_model_order(bags, getattr(clf, "feature_names_in_", None))
    if len(bags) == 0:
        raise ValueError("no bags: the nearest instances are looked for in the bags given.")
    _check_shape(int(np.asarray(bags[0]).shape[1]), image_shape)
    if neighbours is None:
        neighbours = nearest_instances(clf, bags, k=k)
    if not neighbours:
        raise ValueError("neighbours is empty: no prototype to draw.")
    n_rows = len(neighbours)
    k = max(len(row) for row in neighbours.values())  # the neighbours given are drawn whole
    fig, axes = _axes_list(None, fig, n_rows * k, k, (1.15, 1.35))
    # Rows by position: neighbours of some prototypes only ({2: ...}) had indexed past the axes.
    for r, (d, row) in enumerate(neighbours.items()):
        for j in range(k):
            ax = axes[r * k + j]
            ax.set_xticks([])
            ax.set_yticks([])
            if j >= len(row):
                ax.set_axis_off()
                continue
            bag, instance, distance = row[j]
            ax.imshow(np.asarray(bags[bag])[instance].reshape(image_shape), cmap=cmap, interpolation="nearest")
            what = f"{instance_labels[bag][instance]} " if instance_labels is not None else ""
            ax.set_title(f"{what}(d={distance:.1f})", fontsize=7)
        axes[r * k].set_ylabel(f"P{d + 1}", rotation=0, labelpad=14)
    fig.suptitle(title or f"The {k} training images nearest to "
                 + ("each prototype" if n_rows == clf.model_.config.n_prototypes else
                    ", ".join(f"P{d + 1}" for d in neighbours)), fontsize=10)
    return fig


def plot_projection(
    clf: Any,
    projected: Any,
    image_shape: tuple[int, int] = (28, 28),
    *,
    fig: Figure | None = None,
    cmap: str = "gray_r",
    title: str | None = None,
) -> Figure:
    """Each learned prototype (top row) above the real training image it was projected onto (bottom row).

    Parameters
    ----------
    clf : PrototypeMILClassifier
        The fitted model, one model.
    projected : PrototypeMILClassifier
        Its projected copy (:func:`~minitorch_proto.evaluation.projection.project_prototypes`).
    image_shape : (int, int), default=(28, 28)
    fig : Figure, optional
    cmap : str, default="gray_r"
    title : str, optional

    Returns
    -------
    Figure
        Both rows in input units (:func:`~minitorch_proto.plots.prototypes_in_input_space`).
    """
    learned, _ = prototypes_in_input_space(clf)
    real, _ = prototypes_in_input_space(projected)
    if learned.shape != real.shape:
        raise ValueError(f"clf has prototypes of shape {learned.shape} and projected {real.shape}: "
                         "pass the model and its own projected copy.")
    _check_shape(learned.shape[1], image_shape)
    D = len(learned)
    fig, axes = _axes_list(None, fig, 2 * D, D, (1.8, 1.9))
    for row, (images, what) in enumerate(((learned, "learned"), (real, "nearest real"))):
        for d in range(D):
            ax = axes[row * D + d]
            ax.imshow(images[d].reshape(image_shape), cmap=cmap, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(f"P{d + 1}: {what}", fontsize=8)
    fig.suptitle(title or "Learned prototypes and the training images they project onto", fontsize=10)
    return fig


def plot_prototype_sources(
    clf: Any,
    bags: Sequence[np.ndarray],
    prototypes: Sequence[int],
    *,
    bag_ids: Sequence | None = None,
    scores: Sequence[float] | None = None,
    score_name: str = "coefficient",
    standardized: bool = False,
    ax: Axes | None = None,
    fig: Figure | None = None,
) -> Figure:
    """The real instances a pushed model's prototypes are, as feature profiles.

    For tabular or patch-feature data, where an instance is not a picture: each chosen prototype's
    source instance (``prototype_sources_``) drawn as a line over the feature index.

    Parameters
    ----------
    clf : PrototypeMILClassifier
        Fitted with ``push=True``, one model (a seed ensemble: ``clf.member(j)``).
    bags : sequence of ndarray
        The training bags it was fitted on, in the order given to ``fit`` (the sources index them).
    prototypes : sequence of int
        0-based prototype indices to draw.
    bag_ids : sequence, optional
        Names of ``bags`` for the legend (default: their positions).
    scores : sequence of float, optional
        One value per prototype of the model (e.g.
        :func:`~minitorch_proto.evaluation.closeness_coefficients`), shown in the legend as ``score_name``.
    score_name : str, default="coefficient"
    standardized : bool, default=False
        Draw the instances as the model compares them, through its fitted ``standardizer_``, instead
        of in raw units (where a few large-valued features can flatten all the others).
    ax, fig : optional

    Returns
    -------
    Figure
    """
    from ._common import _single_axes

    sources = getattr(clf, "prototype_sources_", None)
    if sources is None:
        raise ValueError("the model has no prototype_sources_: only a model fitted with push=True has real "
                         "instances behind its prototypes.")
    sources = np.asarray(sources)
    if sources.shape[0] != 1:
        raise NotImplementedError(f"a seed ensemble of {sources.shape[0]} members: draw one member, clf.member(j).")
    n_protos = sources.shape[1]
    bad = [int(j) for j in prototypes if not 0 <= int(j) < n_protos]
    if bad:
        raise ValueError(f"prototype indices {bad} outside 0..{n_protos - 1}.")
    if scores is not None and len(scores) != n_protos:
        raise ValueError(f"{len(scores)} scores for {n_protos} prototypes.")
    fig, ax = _single_axes(ax, fig, (7, 2.6))
    for j in prototypes:
        b, i = (int(v) for v in sources[0, int(j)])
        name = bag_ids[b] if bag_ids is not None else b
        extra = f", {score_name} {float(scores[int(j)]):+.2f}" if scores is not None else ""
        # Columns by name, as fit aligned them: a bag stored in another column order drew another instance.
        bag = frames_in_model_order([bags[b]], getattr(clf, "feature_names_in_", None))[0]
        values = np.asarray(bag, dtype=np.float64)[i:i + 1]
        if standardized:
            values = clf.standardizer_.transform_instances(values)
        ax.plot(values[0], lw=0.8, label=f"prototype {int(j) + 1}: bag {name}, instance {i}{extra}")
    ax.set_xlabel("feature")
    mode = clf.standardizer_.mode
    ax.set_ylabel("value (raw)" if not standardized or mode == "none"
                  else f"value ({mode}-standardised, as the model sees it)")
    ax.legend(fontsize=7, loc="upper right")
    ax.set_title("the real instances behind the prototypes")
    return fig
