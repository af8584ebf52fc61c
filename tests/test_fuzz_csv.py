"""Fuzzing the CSV reader (issue 31): ids and classes come back as written, or the error is one line.

Random bag ids (leading zeros, ``1`` beside ``1.0``, unicode, blanks), labels of every kind
(text, -1/+1, 0/1, booleans, one class per table, mixed kinds) and extreme feature values
(up to 1e300, NaN, infinities). Each table either loads with every bag id and label kept
verbatim, or :func:`load_bags_csv` raises a ``ValueError`` whose message is one line.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from minitorch_proto import load_bags_csv

IDS = st.one_of(st.sampled_from(["0", "00", "007", "7", "1", "1.0", "01", "é", "slide 1", "🙂", " ", "NA"]),
                st.from_regex(r"[0-9]{1,4}", fullmatch=True), st.text(min_size=1, max_size=5))
LABELS = st.sampled_from([["no", "yes"], [-1, 1], [0, 1], ["True", "False"], ["a", "a"], [1, "x"], [2, 7]])
EXTREMES = st.sampled_from([None, None, None, 1e30, -1e30, 1e300, -1e300, float("nan"), float("inf")])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ids=st.lists(IDS, min_size=2, max_size=6, unique=True), labels=LABELS,
       values=st.lists(st.floats(-1e6, 1e6), min_size=24, max_size=24), extreme=EXTREMES,
       at=st.integers(0, 23))
@example(ids=["007", "7", "b1"], labels=["no", "yes"], values=[float(v) for v in range(24)], extreme=None, at=0)
def test_csv_ids_and_classes_survive_or_fail_in_one_line(ids, labels, values, extreme, at):
    if extreme is not None:
        values[at] = extreme  # at most one extreme value per table, so most tables load
    rows, k = [], 0
    for i, bag in enumerate(ids):
        for _ in range(2):
            rows.append({"bag": bag, "label": labels[i % 2], "f0": values[k % 24], "f1": values[(k + 7) % 24]})
            k += 1
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.csv"
        pd.DataFrame(rows).to_csv(path, index=False)
        written = pd.read_csv(path, dtype=str, keep_default_na=False)
        try:
            data = load_bags_csv(path)
        except ValueError as exc:
            assert "\n" not in str(exc) and str(exc).strip()
            # A reader that refuses everything would pass the lines above: a table with nothing wrong loads.
            assert not _clean(ids, labels, extreme), f"a clean table was refused: {exc}"
            event("refused")
            return
    event("loaded")
    # every bag id comes back exactly as the file spells it, in order of first appearance
    assert list(data.bag_ids) == list(dict.fromkeys(written["bag"]))
    finite = np.concatenate(data.bags)
    assert np.isfinite(finite).all() and (np.abs(finite) <= np.finfo(np.float32).max).all()
    # each bag's label is the one the file gives, compared as text
    first = written.groupby("bag", sort=False)["label"].first()
    assert [_as_read(str(v)) for v in data.y] == [_as_read(first[b]) for b in data.bag_ids]


def _clean(ids, labels, extreme) -> bool:
    """Nothing a reader should refuse: plain ids, two classes of one kind, finite values within float32."""
    return (all(i.isascii() and i.isalnum() for i in ids) and labels not in (["a", "a"], [1, "x"])
            and (extreme is None or abs(extreme) <= 1e30))


def _as_read(text: str) -> str:
    """A label as pandas reads it back, written as text (1 stays '1', 'True' becomes 'True')."""
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() else str(number)
