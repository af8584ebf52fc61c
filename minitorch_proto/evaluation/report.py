"""Tables shaped like the paper's Table 2, from a results frame."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from .cv import summarize
from ..paper import DATASET_ORDER, PAPER_TABLE2, REPORTED_BASELINES

__all__ = ["SPREADS", "table2", "format_table", "write_atomic", "average_ranks"]

SPREADS = {
    "se_repeats": "standard error over the repetition means",
    "std_folds": "standard deviation over all folds",
}


def _row_label(method: str, evaluation: str) -> str:
    if evaluation == "final":
        return f"{method} (measured)"
    if evaluation == "test_selected":
        return f"{method} (measured, test-fold selection: optimistic)"
    return f"{method} ({evaluation})"


def table2(
    results: pd.DataFrame,
    *,
    metric: str = "accuracy",
    spread: str = "se_repeats",
    include_paper: bool = True,
    include_reported: bool = False,
) -> pd.DataFrame:
    """A methods x data sets table of "mean +- spread" strings.

    Parameters
    ----------
    results : per-fold results (``cv.RESULT_COLUMNS``)
    metric : "accuracy" or "auc"
    spread : "se_repeats" or "std_folds" (see :data:`SPREADS`)
    include_paper : add the paper's own row (reported, with its printed "+-")
    include_reported : add the other methods the paper quotes (reported, no spread)
    """
    if spread not in SPREADS:
        raise ValueError(f"spread must be one of {sorted(SPREADS)}, got {spread!r}.")
    summ = summarize(results)
    datasets = [d for d in DATASET_ORDER if d in set(summ["dataset"])] + sorted(
        set(summ["dataset"]) - set(DATASET_ORDER)
    )
    rows: dict[str, dict[str, str]] = {}
    if include_paper and metric == "accuracy":
        rows["Prototype learning (paper, reported)"] = {
            d: f"{PAPER_TABLE2[d][0]:.3f} ± {PAPER_TABLE2[d][1]:.3f}" for d in datasets if d in PAPER_TABLE2
        }
    if include_reported and metric == "accuracy":
        for name, vals in REPORTED_BASELINES.items():
            rows[f"{name} (reported in the paper)"] = {d: f"{vals[d]:.3f}" for d in datasets if d in vals}
    for _, r in summ.iterrows():
        label = _row_label(r["method"], r["evaluation"])
        mean, sp = r[f"{metric}_mean"], r[f"{metric}_{spread}"]
        cell = f"{mean:.3f}" + ("" if np.isnan(sp) else f" ± {sp:.3f}")
        rows.setdefault(label, {})[r["dataset"]] = cell
    table = pd.DataFrame.from_dict(rows, orient="index").reindex(columns=datasets).fillna("")
    table.index.name = f"{metric} (mean ± {SPREADS[spread]})"
    return table


def average_ranks(results: pd.DataFrame, metric: str = "accuracy") -> pd.Series:
    """Average rank (1 = best) of each measured method across data sets, final evaluation only."""
    summ = summarize(results[results["evaluation"] == "final"])
    pivot = summ.pivot(index="method", columns="dataset", values=f"{metric}_mean")
    return pivot.rank(ascending=False, axis=0).mean(axis=1).sort_values()


def format_table(table: pd.DataFrame) -> str:
    """Plain-text rendering for the terminal."""
    return table.to_string()


def write_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write text to ``path`` via a temporary file, so readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".part")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
