"""Page 08's tables of the frozen ladder: one cell per (rung, data set), and what the nested search chose.

:func:`~minitorch_proto.evaluation.ladder.ladder_table` gives one row per (data set, rung); the
page shows it wide, as a reader compares rungs down a column and data sets across a row.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

__all__ = ["ladder_wide_table", "search_choice_counts"]

#: The grid dimensions page 08 counts the nested search's choices of.
CHOICE_KEYS = ("distance", "n_prototypes", "pooling", "layer_norm", "init", "lr_prototypes", "lr_classifier", "epochs")


def ladder_wide_table(table: pd.DataFrame, display: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Rungs as rows, data sets as columns: ``"mean ± se (diff ± diff_se)"`` (no brackets for the
    first rung), and ``seconds (all N)``, the rung's training time summed over the N data sets.

    ``display`` renames the data sets (e.g. ``DATASET_NAMES``); their order is ``display``'s, then the
    table's own for any it does not name.
    """
    cell = [f"{m:.3f} ± {s:.3f}" + ("" if np.isnan(d) else f" ({d:+.3f} ± {ds:.3f})")
            for m, s, d, ds in zip(table["mean"], table["se"], table["diff"], table["diff_se"])]
    wide = table.assign(cell=cell).pivot_table(index="step", columns="dataset", values="cell", aggfunc="first",
                                               sort=False)
    present = list(dict.fromkeys(table["dataset"]))
    order = [d for d in (display or {}) if d in present] + [d for d in present if d not in (display or {})]
    wide = wide[order].rename(columns=dict(display or {}))
    n = len(present)
    wide[f"seconds (all {'five' if n == 5 else n})"] = table.groupby("step", sort=False)["seconds"].sum().round(0)
    wide.columns.name = None
    return wide


def search_choice_counts(choices: pd.DataFrame, keys: Sequence[str] = CHOICE_KEYS,
                         display: Mapping[str, str] | None = None) -> pd.DataFrame:
    """How often each value of each grid dimension won the outer folds' searches, per data set:
    rows are the dimensions, columns the data sets, cells ``"value (count), ..."``, most frequent first."""
    counts = []
    for key in keys:
        c = choices.groupby("dataset")[key].agg(
            lambda v: ", ".join(f"{a} ({b})" for a, b in v.astype(str).value_counts().items()))
        counts.append(c.rename(key))
    return pd.concat(counts, axis=1).rename(index=dict(display or {})).T
