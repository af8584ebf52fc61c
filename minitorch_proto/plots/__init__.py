"""Figures for prototype MIL models, their training and their evaluation.

Every function draws with matplotlib's object API, never touches ``pyplot`` and never calls
``show``: it draws into the ``ax`` (or ``fig``) it is given, or into a new
:class:`matplotlib.figure.Figure`, and returns that Figure. That works under the Agg backend,
in scripts and in notebooks (Jupyter displays a returned Figure), and leaves no global state
behind. Save a figure with ``fig.savefig(path)``.

Colours: positive bags / positive evidence are red (``C3``), negative ones blue (``C0``).
"""
from ._common import NEG_COLOUR, POS_COLOUR, prototypes_in_input_space
from .neighbours import plot_nearest_images, plot_projection, plot_prototype_sources
from .prototypes import (
    plot_bag_explanation,
    plot_evidence_map,
    plot_prototype_images,
    plot_prototype_profiles,
    plot_prototype_trajectories,
    plot_toy_spaces,
)
from .results import (
    plot_ablation_deltas, plot_comparison, plot_cv_results, plot_rank, plot_training_history, plot_unit_tests,
)

__all__ = [
    "NEG_COLOUR",
    "POS_COLOUR",
    "prototypes_in_input_space",
    "plot_prototype_images",
    "plot_nearest_images",
    "plot_projection",
    "plot_prototype_sources",
    "plot_prototype_profiles",
    "plot_toy_spaces",
    "plot_bag_explanation",
    "plot_evidence_map",
    "plot_training_history",
    "plot_comparison",
    "plot_ablation_deltas",
    "plot_cv_results",
    "plot_rank",
    "plot_prototype_trajectories",
    "plot_unit_tests",
]
