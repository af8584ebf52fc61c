"""Thin orchestration for the interpretability notebooks: MNIST-bags, MIL unit tests, toy training.

Each function does one experiment end to end and returns plain data (dicts, DataFrames,
fitted estimators), so notebooks stay short and the logic stays testable.

One module per experiment: :mod:`.mnist` (the paper's MNIST-bags illustration),
:mod:`.unit_test_tables` (the MIL algorithmic unit tests for every model), :mod:`.toy` (training
snapshots on toy bags) and :mod:`.fitting` (what they share).
"""
from __future__ import annotations

# Each module's __all__ is the one list of its public names; the package re-exports them.
from . import fitting, mnist, toy, unit_test_tables
from .fitting import *  # noqa: F403
from .mnist import *  # noqa: F403
from .toy import *  # noqa: F403
from .unit_test_tables import *  # noqa: F403

__all__ = [*mnist.__all__, *unit_test_tables.__all__, *toy.__all__, *fitting.__all__]
