"""The own-data page's heatmaps: toy whole slides, the recommended model, evidence drawn where it lies.

No slide features with patch-level annotations ship with the project, so the page makes its
own. A slide is a patch of tissue on a grid (each patch's top-left corner in pixels, as CLAM
and TRIDENT store ``coords``); in a positive slide a round tumour region moves its patches'
features along one direction. From there on it is what a user runs on their own folder: the
slides are written as ``.h5`` files with a ``coords`` dataset, read back lazily, the model
fitted on the training slides and the evidence of each held-out slide computed one bag at a
time (:func:`~minitorch_proto.evaluation.evidence_table`), then drawn where the patches lie
(:func:`~minitorch_proto.plots.plot_evidence_map`). Because the tumour is known, the page can
say how well the evidence finds it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split

from ..data.disk import DiskBagDataset, write_bag_folder
from ..estimator import PrototypeMILClassifier
from ..evaluation.evidence import evidence_table
from ..plots import plot_evidence_map

__all__ = ["MIN_SLIDES", "ToySlides", "check_slide_count", "make_toy_slides", "slide_evidence_demo", "plot_slide_maps"]


@dataclass
class ToySlides:
    """Slides as bags of patch features, with where each patch lies and whether it is tumour."""

    bags: list[np.ndarray]
    y: np.ndarray
    coords: list[np.ndarray]
    tumour: list[np.ndarray]
    ids: list[str]


def make_toy_slides(n_slides: int = 60, *, grid: int = 24, n_features: int = 32, patch_px: int = 256,
                    shift: float = 4.0, random_state: int = 0) -> ToySlides:
    """Half the slides positive; each a random ellipse of tissue, a positive one with a round tumour.

    Patch features are standard normal; a tumour patch's are moved by ``shift`` along one random
    unit direction (the same for every slide), so a single patch is recognisable but noisy.
    """
    rng = np.random.default_rng(random_state)
    direction = rng.normal(size=n_features)
    direction /= np.linalg.norm(direction)
    gx, gy = np.meshgrid(np.arange(grid), np.arange(grid))
    cells = np.c_[gx.ravel(), gy.ravel()].astype(float)
    bags, ys, coords, tumours = [], [], [], []
    for i in range(n_slides):
        centre, radii = rng.uniform(0.4, 0.6, 2) * grid, rng.uniform(0.25, 0.45, 2) * grid
        tissue = cells[(((cells - centre) / radii) ** 2).sum(axis=1) <= 1.0]
        label = i % 2
        tumour = np.zeros(len(tissue), dtype=bool)
        if label:
            seed_cell = tissue[rng.integers(len(tissue))]
            tumour = np.linalg.norm(tissue - seed_cell, axis=1) <= rng.uniform(1.5, 3.0)
        X = rng.normal(size=(len(tissue), n_features))
        X[tumour] += shift * direction
        bags.append(X.astype(np.float32))
        ys.append(label)
        coords.append((tissue * patch_px).astype(np.int64))
        tumours.append(tumour)
    return ToySlides(bags, np.array(ys), coords, tumours, [f"slide_{i:03d}" for i in range(n_slides)])


#: The fewest toy slides the demo takes: a third held out must hold a slide of each class, and two
#: thirds to train on must too (three of each).
MIN_SLIDES = 6


def check_slide_count(n_slides: int, name: str = "n_slides") -> int:
    """``n_slides`` if the demo can run on it; a one-line ValueError naming ``name`` otherwise
    (a notebook checks its parameter before any training)."""
    from .params import count_param

    try:
        return count_param(n_slides, name, MIN_SLIDES)
    except ValueError as exc:  # the rule is count_param's; the reason for the minimum is the demo's
        raise ValueError(f"{exc} (half of the slides have a tumour, a third is held out, each part needs both "
                         "kinds)") from None


def slide_evidence_demo(out_dir: str | Path, n_slides: int = 60, *, test_size: float = 1 / 3,
                        random_state: int = 0, **overrides) -> dict:
    """Write the toy slides as a bag folder, fit the recommended model on two thirds, explain the rest.

    Returns
    -------
    dict
        ``slides`` (:class:`ToySlides`), ``test`` (positions of the held-out slides), ``model``,
        ``table`` (the held-out slides' evidence, :func:`evidence_table`'s columns plus ``tumour``),
        ``proba`` (each held-out slide's positive probability, by position), ``bag_auc`` (their AUC)
        and ``evidence_auc`` (how well the evidence ranks tumour patches above the others, pooled
        over the held-out positive slides).
    """
    n_slides = check_slide_count(n_slides)
    slides = make_toy_slides(n_slides, random_state=random_state)
    labels = write_bag_folder(out_dir, slides.bags, slides.y, slides.ids, fmt="h5",
                              instance_arrays={"coords": slides.coords})
    folder = DiskBagDataset(out_dir, labels)
    train, test = train_test_split(np.arange(n_slides), test_size=test_size, stratify=slides.y,
                                   random_state=random_state)
    train, test = np.sort(train), np.sort(test)
    model = PrototypeMILClassifier.recommended(**{"random_state": random_state, **overrides})
    model.fit(folder.subset(train), slides.y[train])
    held_out = folder.subset(test)
    table = evidence_table(model, held_out, [slides.ids[i] for i in test])
    where = {slides.ids[i]: i for i in test}
    table["tumour"] = [bool(slides.tumour[where[b]][k]) for b, k in zip(table["bag"], table["instance"])]
    positive = table["bag"].map(lambda b: slides.y[where[b]] == 1)
    proba = model.predict_proba(held_out)[:, 1]
    return {
        "slides": slides,
        "test": test,
        "model": model,
        "table": table,
        "proba": dict(zip(test.tolist(), proba.tolist())),
        "bag_auc": float(roc_auc_score(slides.y[test], proba)),
        "evidence_auc": float(roc_auc_score(table.loc[positive, "tumour"], table.loc[positive, "evidence"])),
    }


def plot_slide_maps(demo: dict, n: int = 4) -> Figure:
    """``n - 1`` held-out positive slides and one negative: evidence where it lies, the tumour outlined."""
    slides, table = demo["slides"], demo["table"]
    order = [i for i in demo["test"] if slides.y[i] == 1][: n - 1] + [i for i in demo["test"] if slides.y[i] == 0][:1]
    limit = float(table["evidence"].abs().max())
    ncols = min(2, len(order))
    fig = Figure(figsize=(4.4 * ncols + 1.2, 4.0 * -(-len(order) // ncols)), layout="constrained")
    axes = [fig.add_subplot(-(-len(order) // ncols), ncols, k + 1) for k in range(len(order))]
    for ax, i in zip(axes, order):
        rows = table[table["bag"] == slides.ids[i]].sort_values("instance")
        truth = "tumour outlined" if slides.y[i] else "no tumour"
        plot_evidence_map(slides.coords[i], rows["evidence"].to_numpy(), outline=slides.tumour[i], top=3,
                          limit=limit, ax=ax, colorbar=False,
                          title=f"{slides.ids[i]} ({truth})\nP(positive) {demo['proba'][i]:.2f}")
    bar = fig.colorbar(axes[-1].collections[0], ax=axes, shrink=0.6)
    bar.set_label("evidence (drop in P(positive) without the patch)")
    return fig

