"""Algorithmic unit tests for MIL models (Raff & Holt, 2023), run on any estimator.

The generators live in :mod:`minitorch_proto.data.synthetic`; this module fits a
model on each test's training bags and scores it on the test bags, where the
training shortcut is reversed.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..data.synthetic import BACKGROUND, MIL_UNIT_TESTS, SyntheticBags
from .metrics import binary_auc

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["background_counts", "compare_unit_test_runs", "run_mil_unit_tests", "summarize_unit_tests",
           "unit_test_pass_table"]


def _positive_scores(estimator: Any, bags: list[np.ndarray]) -> np.ndarray | None:
    if hasattr(estimator, "predict_proba"):
        proba = np.asarray(estimator.predict_proba(bags), dtype=np.float64)
        if proba.ndim == 2:
            classes = getattr(estimator, "classes_", None)
            col = proba.shape[1] - 1
            if classes is not None and 1 in list(classes):
                col = list(classes).index(1)
            proba = proba[:, col]
        return proba.reshape(-1)
    if hasattr(estimator, "decision_function"):
        return np.asarray(estimator.decision_function(bags), dtype=np.float64).reshape(-1)
    return None


def run_mil_unit_tests(
    make_estimator: Callable[[], Any],
    tests: Iterable[str] | Mapping[str, Callable[..., tuple[SyntheticBags, SyntheticBags]]] | None = None,
    random_state: int | np.random.Generator | None = 0,
    threshold: float = 0.75,
    generator_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
) -> "pd.DataFrame":
    """Fit a fresh estimator on each unit test's training set and score it on its test set.

    Pass criterion: a test is ``passed`` when the test-set **accuracy is at least**
    ``threshold`` (default 0.75). With balanced test sets a constant or random model scores
    about 0.5, and a model that relies on the planted shortcut (poison, distractor frequency)
    scores about 0.5 or less, so 0.75 separates "follows the label rule" from "learned the
    shortcut" with room for ordinary estimation error. On ``multi_concept`` it is looser: a rule
    that found one of the two concepts only is right on every positive bag and on the negatives
    lacking that concept, about 0.75, and reaches the bar on about half the seeds.

    Parameters
    ----------
    make_estimator : callable
        Called with no arguments, once per test; must return an object with
        ``fit(bags, y)`` and ``predict(bags)`` (labels 0/1). When it also has
        ``predict_proba(bags)`` (or else ``decision_function``), the AUC is reported.
    tests : iterable of str or mapping, optional
        Names from :data:`MIL_UNIT_TESTS` (default: all of them), or a mapping of names to
        generators with the same call signature.
    random_state : int, Generator or None, default=0
        Passed to every generator (an ``int`` gives each test the same seed).
    threshold : float, default=0.75
        Minimum test accuracy for ``passed``.
    generator_kwargs : mapping, optional
        Extra keyword arguments per test name, e.g. ``{"single_concept": {"n_features": 5}}``.

    Returns
    -------
    pandas.DataFrame
        One row per test with columns ``test``, ``accuracy``, ``auc`` (NaN when the estimator
        gives no scores), ``passed`` and ``threshold``.
    """
    import pandas as pd

    if tests is None:
        selected: Mapping[str, Callable[..., Any]] = MIL_UNIT_TESTS
    elif isinstance(tests, Mapping):
        selected = tests
    else:
        names = [tests] if isinstance(tests, str) else list(tests)
        unknown = [t for t in names if t not in MIL_UNIT_TESTS]
        if unknown:
            raise ValueError(f"Unknown MIL unit test(s) {unknown}; choose from {sorted(MIL_UNIT_TESTS)}.")
        selected = {t: MIL_UNIT_TESTS[t] for t in names}
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must lie in [0, 1]; got {threshold}.")
    generator_kwargs = dict(generator_kwargs or {})
    rows = []
    for name, generator in selected.items():
        train, test = generator(random_state=random_state, **dict(generator_kwargs.get(name, {})))
        estimator = make_estimator()
        estimator.fit(train.bags, train.y)
        pred = np.asarray(estimator.predict(test.bags)).reshape(-1)
        if len(pred) != len(test.y):
            raise ValueError(f"{name}: predict returned {len(pred)} labels for {len(test.y)} bags.")
        accuracy = float(np.mean(pred.astype(np.int64) == test.y))
        scores = _positive_scores(estimator, test.bags)
        auc = binary_auc(test.y == 1, scores) if scores is not None else float("nan")
        rows.append(
            {"test": name, "accuracy": accuracy, "auc": auc, "passed": bool(accuracy >= threshold), "threshold": float(threshold)}
        )
    return pd.DataFrame(rows, columns=["test", "accuracy", "auc", "passed", "threshold"])


def summarize_unit_tests(table: "pd.DataFrame") -> "pd.DataFrame":
    """Mean and spread of each model's results on each test over seeds.

    Parameters
    ----------
    table : pandas.DataFrame
        Rows of :func:`~minitorch_proto.book.mil_unit_test_table` run over several
        seeds (columns ``model``, ``test``, ``seed``, ``accuracy``, ``auc``, ``passed``).

    Returns
    -------
    pandas.DataFrame
        One row per (model, test), in the table's order: ``n_seeds``, ``accuracy_mean``,
        ``accuracy_std`` (sample standard deviation over seeds), ``accuracy_min``,
        ``auc_mean``, ``auc_std``, ``seeds_passed`` and ``passed`` (every seed passed).
    """
    import pandas as pd

    missing = {"model", "test", "seed", "accuracy", "auc", "passed"} - set(table.columns)
    if missing:
        raise ValueError(f"the unit-test table lacks the column(s) {sorted(missing)}.")
    twice = table.duplicated(["model", "test", "seed"])
    if twice.any():  # one seed's pass and another run's failure would count as two passes of "n_seeds"
        first = table.loc[twice, ["model", "test", "seed"]].iloc[0].tolist()
        raise ValueError(f"the unit-test table has {int(twice.sum())} repeated (model, test, seed) row(s), e.g. "
                         f"{first}; keep one run per seed.")
    grouped = table.groupby(["model", "test"], sort=False)
    out = pd.DataFrame({
        "n_seeds": grouped["seed"].nunique(),
        "accuracy_mean": grouped["accuracy"].mean(),
        "accuracy_std": grouped["accuracy"].std(ddof=1),
        "accuracy_min": grouped["accuracy"].min(),
        "auc_mean": grouped["auc"].mean(),
        "auc_std": grouped["auc"].std(ddof=1),
        "seeds_passed": grouped["passed"].sum().astype(int),
    }).reset_index()
    out["passed"] = out["seeds_passed"] == out["n_seeds"]
    return out


def unit_test_pass_table(summary: "pd.DataFrame", models: Sequence[str] | None = None,
                         tests: Sequence[str] | None = None,
                         names: Mapping[str, str] | None = None) -> "pd.DataFrame":
    """One row per model, one column per test: "PASS k/n: acc mean ± sd, AUC mean ± sd" (or "fail ...").

    Parameters
    ----------
    summary : :func:`summarize_unit_tests`' table
    models, tests : the rows and columns in order (default: the summary's order); ones it lacks are left out
    names : shown names of the models (default: as given)
    """
    def spread(sd: float) -> str:  # one seed has no spread: leave it out rather than print ± 0.00
        return "" if np.isnan(sd) else f" ± {sd:.2f}"

    cell = [f"{'PASS' if p else 'fail'} {k}/{n}: acc {a:.2f}{spread(s)}, AUC {u:.2f}{spread(v)}"
            for p, k, n, a, s, u, v in zip(summary.passed, summary.seeds_passed, summary.n_seeds,
                                           summary.accuracy_mean, summary.accuracy_std,
                                           summary.auc_mean, summary.auc_std)]
    wide = summary.assign(result=cell).pivot(index="model", columns="test", values="result")
    models = list(dict.fromkeys(summary.model)) if models is None else models
    tests = list(dict.fromkeys(summary.test)) if tests is None else tests
    wide = wide.reindex(index=[m for m in models if m in wide.index], columns=[t for t in tests if t in wide.columns])
    wide.index = [(names or {}).get(m, m) for m in wide.index]
    wide.columns.name = None
    return wide


def compare_unit_test_runs(
    before: "pd.DataFrame",
    after: "pd.DataFrame",
    labels: tuple[str, str] = ("before", "after"),
    display: Mapping[str, str] | None = None,
) -> tuple["pd.DataFrame", str]:
    """Which (model, test) verdicts change between two runs of the unit tests.

    Parameters
    ----------
    before, after : pandas.DataFrame
        Summaries from :func:`summarize_unit_tests` (e.g. the same models on two variants of
        the generators); only the (model, test) pairs present in both are compared.
    labels : pair of str
        Names of the two runs in the table's columns and in the sentence.
    display : mapping, optional
        Model names to print (default: the names themselves).

    Returns
    -------
    table : pandas.DataFrame
        One row per shared (model, test): ``"seeds passed (<label>)"`` for both runs and
        ``changed`` (the pass verdict differs).
    sentence : str
        How many verdicts are unchanged, and each change as ``model on test (k/n -> k'/n')``.
    """
    name = (lambda m: display.get(m, m)) if display else (lambda m: m)
    keys = ["model", "test"]
    cols = ["seeds_passed", "n_seeds", "passed"]
    merged = before[keys + cols].merge(after[keys + cols], on=keys, suffixes=("_0", "_1"))
    if merged.empty:
        raise ValueError("the two unit-test summaries share no (model, test) pair.")
    merged["changed"] = merged["passed_0"] != merged["passed_1"]
    table = merged.assign(model=merged["model"].map(name)).rename(columns={
        "seeds_passed_0": f"seeds passed ({labels[0]})", "seeds_passed_1": f"seeds passed ({labels[1]})"})
    table = table[keys + [f"seeds passed ({labels[0]})", f"seeds passed ({labels[1]})", "changed"]]
    changes = [f"{name(r.model)} on {r.test} ({r.seeds_passed_0}/{r.n_seeds_0} -> {r.seeds_passed_1}/{r.n_seeds_1} seeds)"
               for r in merged.itertuples() if r.changed]
    head = (f"{len(merged) - len(changes)} of {len(merged)} pass/fail verdicts are the same with "
            f"{labels[0]} and with {labels[1]}")
    return table.reset_index(drop=True), head + (": changed " + "; ".join(changes) + "." if changes else ".")


def background_counts(
    tests: Iterable[str] | None = None,
    random_state: Iterable[int] = range(10),
    generator_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
) -> "pd.DataFrame":
    """Mean number of background instances and mean bag size per test, split and class.

    Shows whether the background count (or the bag size) carries the label, and whether
    that signal flips between the training and the test set.

    Parameters
    ----------
    tests : iterable of str, optional
        Names from :data:`MIL_UNIT_TESTS` (default: all).
    random_state : iterable of int, default=range(10)
        Seeds of the generators; the means pool all of them.
    generator_kwargs : mapping, optional
        Extra arguments per test name (e.g. ``{"single_concept": {"background": "independent"}}``).

    Returns
    -------
    pandas.DataFrame
        Index (test, split); columns ``background (positive)``, ``background (negative)``,
        ``size (positive)``, ``size (negative)``.
    """
    import pandas as pd

    names = [tests] if isinstance(tests, str) else list(tests or MIL_UNIT_TESTS)  # one name, as run_mil_unit_tests
    unknown = [t for t in names if t not in MIL_UNIT_TESTS]
    if unknown:
        raise ValueError(f"Unknown MIL unit test(s) {unknown}; choose from {sorted(MIL_UNIT_TESTS)}.")
    rows = []
    for name in names:
        for seed in random_state:
            sets = MIL_UNIT_TESTS[name](random_state=int(seed), **dict((generator_kwargs or {}).get(name, {})))
            for split, data in zip(("train", "test"), sets):
                for kind, label in zip(data.info["instance_kinds"], data.y):
                    rows.append({"test": name, "split": split, "label": "positive" if label == 1 else "negative",
                                 "background": int(np.sum(kind == BACKGROUND)), "size": len(kind)})
    if not rows:
        raise ValueError("random_state holds no seed.")
    means = pd.DataFrame(rows).groupby(["test", "split", "label"], sort=False)[["background", "size"]].mean()
    wide = means.unstack("label")
    wide.columns = [f"{what} ({label})" for what, label in wide.columns]
    return wide[[f"{w} ({c})" for w in ("background", "size") for c in ("positive", "negative")]]
