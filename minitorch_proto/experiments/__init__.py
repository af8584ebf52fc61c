"""Thin orchestration for the interpretability notebooks: MNIST-bags, MIL unit tests, toy training.

Each function does one experiment end to end and returns plain data (dicts, DataFrames,
fitted estimators), so notebooks stay short and the logic stays testable.

One module per experiment: :mod:`.mnist` (the paper's MNIST-bags illustration),
:mod:`.unit_tests` (the MIL algorithmic unit tests for every model), :mod:`.toy` (training
snapshots on toy bags) and :mod:`.fitting` (what they share).
"""
from __future__ import annotations

from .fitting import fit_with_callback, training_objective
from .mnist import (
    MNIST_DEFAULTS,
    MNIST_EPOCHS,
    MNIST_TUNING_SEEDS,
    discriminative_prototypes,
    fit_from_prototypes,
    mnist_inner_validation,
    mnist_seed_sweep,
    mnist_sweep_verdict,
    run_mnist_experiment,
)
from .toy import toy_training_snapshots
from .unit_tests import (
    UNIT_TEST_MIN_SETTINGS,
    UNIT_TEST_MONOTONE_SETTINGS,
    default_mil_unit_test_models,
    mil_unit_test_table,
)

__all__ = [
    "MNIST_DEFAULTS",
    "MNIST_EPOCHS",
    "MNIST_TUNING_SEEDS",
    "run_mnist_experiment",
    "mnist_inner_validation",
    "discriminative_prototypes",
    "fit_from_prototypes",
    "mnist_seed_sweep",
    "mnist_sweep_verdict",
    "UNIT_TEST_MIN_SETTINGS",
    "UNIT_TEST_MONOTONE_SETTINGS",
    "mil_unit_test_table",
    "default_mil_unit_test_models",
    "toy_training_snapshots",
    "fit_with_callback",
    "training_objective",
]
