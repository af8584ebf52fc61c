"""The MIL algorithmic unit tests (Raff & Holt 2023) run for every model of the package."""
from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..convex_head import RECOMMENDED
from ..estimator import PrototypeMILClassifier
from ..utils import EstimatorFactory
from ..evaluation.mil_unit_tests import run_mil_unit_tests
from .params import as_choices

__all__ = ["UNIT_TEST_MIN_SETTINGS", "UNIT_TEST_MONOTONE_SETTINGS", "SLOW_SECONDS", "default_mil_unit_test_models",
           "slow_unit_test_models", "QUICK_UNIT_TEST_MODELS", "page_unit_test_models", "mil_unit_test_table"]

#: Settings of the "min pooling" prototype model of the unit-test table: a few prototypes
#: started on training instances, rates large enough to converge in 30 epochs.
UNIT_TEST_MIN_SETTINGS: dict[str, Any] = {
    "n_prototypes": 4,
    "pooling": ("min",),
    "init": "kmeans++",
    "lr_prototypes": 1e-2,
    "lr_classifier": 1e-2,
    "epochs": 30,
    "batch_size": 4,
    "device": "cpu",
}

#: The monotone variant in the unit tests (``book/monotone.md``): the settings above with
#: min pooling only, no layer norm, weights <= 0, 32 prototypes and no prototype or distance
#: penalty. Chosen on seeds 100-119, disjoint from the seeds the book reports (0-9): with
#: 4 prototypes, or with the two penalties, Adam pulls every prototype to the background's
#: centre in some runs and none reaches the concept.
UNIT_TEST_MONOTONE_SETTINGS: dict[str, Any] = dict(
    UNIT_TEST_MIN_SETTINGS, n_prototypes=32, lambda_p=0.0, lambda_d=0.0, layer_norm=False, monotone=True
)


def default_mil_unit_test_models(include_baselines: bool = True) -> dict[str, Callable[[int], Any]]:
    """Model factories ``seed -> estimator`` for :func:`mil_unit_test_table`.

    Parameters
    ----------
    include_baselines : bool, default=True
        Add every entry of ``minitorch_proto.baselines.BASELINES`` (as ``"baseline: <name>"``)
        when that module can be imported; silently skipped otherwise.

    Returns
    -------
    dict
        * ``"prototype (min pooling)"``: :data:`UNIT_TEST_MIN_SETTINGS` (min pooling only,
          layer norm on, 4 prototypes, k-means++ start, 30 epochs);
        * ``"prototype (min+mean+max)"``: the same with all three poolings (mean pooling sees
          how many instances are near a prototype, which is what the false-frequency test
          punishes);
        * ``"prototype (paper defaults)"``: ``PrototypeMILClassifier()`` as the paper writes
          it (D = 24, min pooling, layer norm, Table 1 Musk1 rates, batch 1, 100 epochs);
        * ``"prototype (monotone)"``: :data:`UNIT_TEST_MONOTONE_SETTINGS`, the variant that
          respects the standard MIL assumption by construction;
        * ``"prototype (recommended)"``: ``PrototypeMILClassifier.recommended()`` unchanged (the
          recipe chosen on the benchmarks, checked here on data it never saw);
        * the baselines, when available.
    """
    models: dict[str, Callable[[int], Any]] = {
        "prototype (min pooling)": EstimatorFactory(PrototypeMILClassifier, **UNIT_TEST_MIN_SETTINGS),
        "prototype (min+mean+max)": EstimatorFactory(PrototypeMILClassifier, **dict(UNIT_TEST_MIN_SETTINGS, pooling=("min", "mean", "max"))),
        "prototype (paper defaults)": EstimatorFactory(PrototypeMILClassifier, device="cpu"),
        "prototype (monotone)": EstimatorFactory(PrototypeMILClassifier, **UNIT_TEST_MONOTONE_SETTINGS),
        "prototype (recommended)": EstimatorFactory(PrototypeMILClassifier, **RECOMMENDED, device="cpu"),
    }
    if include_baselines:
        try:
            from ..baselines import BASELINES
        except Exception:  # noqa: BLE001 - the module is optional and may be mid-development
            BASELINES = {}
        for name, factory in BASELINES.items():
            models[f"baseline: {name}"] = factory
    return models


#: A model is slow for a live page when one seed of the three tests took longer than this (median
#: over the seeds of the frozen full run, ``mil_unit_tests_seeds``).
SLOW_SECONDS = 30.0


def slow_unit_test_models(seconds: float = SLOW_SECONDS) -> list[str]:
    """The models of :func:`default_mil_unit_test_models` that are slow to run live, by the frozen timings.

    Read from the frozen full run rather than listed by hand, so a new model cannot slip into a
    page's live run unnoticed (a test keeps every default model in that table).
    """
    from .frozen import load_frozen

    timed = load_frozen("mil_unit_tests_seeds")
    # Each of a seed's test rows repeats that seed's whole time (see mil_unit_test_table), so
    # one row per (model, seed) is the seed's time; a sum would count it once per test.
    per_seed = timed.groupby(["model", "seed"])["seconds"].first().groupby("model").median()
    return [m for m in default_mil_unit_test_models() if per_seed.get(m, 0.0) > seconds]


#: What page 06 runs with ``quick=True`` (the test suite's run): fast, and one of them fails a test.
QUICK_UNIT_TEST_MODELS = ["prototype (monotone)", "prototype (min pooling)", "baseline: bag_stats"]


def page_unit_test_models(models=None, include_slow: bool = False, quick: bool = False,
                          seeds: int = 10) -> tuple[dict[str, Callable[[int], Any]], int, str | None]:
    """Page 06's models and seed count from its parameters, every name checked before any training.

    Parameters
    ----------
    models : list of str, str or None, default=None
        Names from :func:`default_mil_unit_test_models`; None: every model but the slow ones
        (:func:`slow_unit_test_models`), or :data:`QUICK_UNIT_TEST_MODELS` with ``quick``.
    include_slow : bool, default=False
        With ``models=None`` (and not ``quick``): the slow models too.
    quick : bool, default=False
        With ``models=None``: the quick models and at most two seeds.
    seeds : int, default=10
        The seed count asked for.

    Returns
    -------
    chosen : dict
        Name to model factory, in the order given.
    seeds : int
        The seed count to run.
    notice : str or None
        A sentence naming the switches that had no effect (``models`` names the models to run;
        ``quick`` leaves ``include_slow`` nothing to add), so a run does not look like what it is not.

    Raises
    ------
    ValueError
        For an unknown or empty model name list (one line, listing the valid names).
    """
    available = default_mil_unit_test_models()
    if models is not None:
        ignored = [name for name, on in (("include_slow", include_slow), ("quick", quick)) if on]
        why = "models names the models to run"
    else:
        ignored, why = (["include_slow"] if quick and include_slow else []), "quick runs the quick models only"
        if quick:
            models, seeds = QUICK_UNIT_TEST_MODELS, min(seeds, 2)
        else:
            slow = set(slow_unit_test_models())
            models = [m for m in available if include_slow or m not in slow]
    chosen = {name: available[name] for name in as_choices(models, "models", available)}
    notice = f"{' and '.join(ignored)} had no effect: {why}." if ignored else None
    return chosen, seeds, notice


def mil_unit_test_table(
    models: Mapping[str, Callable[[int], Any]],
    random_state: int | Sequence[int] = 0,
    threshold: float = 0.75,
    generator_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    tests: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Run the algorithmic MIL unit tests for several models.

    Parameters
    ----------
    models : mapping
        ``name -> factory(seed)`` returning an unfitted estimator (``fit``/``predict``, and
        ``predict_proba`` for the AUC).
    random_state : int or sequence of int, default=0
        Seed of the data generators and of every model; a sequence runs every model once
        per seed and adds a ``seed`` column (summarise with
        :func:`~minitorch_proto.evaluation.mil_unit_tests.summarize_unit_tests`).
    threshold : float, default=0.75
        Minimum test accuracy for ``passed``
        (see :func:`~minitorch_proto.evaluation.mil_unit_tests.run_mil_unit_tests`).
    generator_kwargs : mapping, optional
        Per-test generator arguments, e.g. ``{"single_concept": {"n_train": 60}}``.
    tests : sequence of str, optional
        Subset of :data:`~minitorch_proto.data.synthetic.MIL_UNIT_TESTS` (default: all).

    Returns
    -------
    pandas.DataFrame
        One row per (model, test): ``model``, ``test``, ``accuracy``, ``auc``, ``passed``
        (bool), ``threshold``, ``seconds`` (fit and scoring of that model over all tests,
        repeated on each of its rows).
    """
    if not models:
        raise ValueError("models is empty.")
    if not np.isscalar(random_state):
        seeds = [int(s) for s in random_state]  # type: ignore[union-attr]
        if not seeds:
            raise ValueError("random_state is an empty sequence of seeds.")
        return pd.concat([mil_unit_test_table(models, s, threshold, generator_kwargs, tests).assign(seed=s)
                          for s in seeds], ignore_index=True)
    frames = []
    for name, factory in models.items():
        t0 = time.perf_counter()
        frame = run_mil_unit_tests(
            lambda factory=factory: factory(random_state),
            tests=tests,
            random_state=random_state,
            threshold=threshold,
            generator_kwargs=generator_kwargs,
        )
        frame.insert(0, "model", name)
        frame["seconds"] = time.perf_counter() - t0
        frames.append(frame)
    table = pd.concat(frames, ignore_index=True)
    table["passed"] = table["passed"].astype(bool)
    return table
