"""What a table read from a CSV must satisfy before its rows become bags.

A stranger's file says one thing and pandas reads another more often than it errs: a header
one name short shifts every column, ``NA`` turns a class into a missing value, ``01`` and ``1``
become one class. These checks find such files and say so in one line, for the command line
(:mod:`minitorch_proto.cli_inputs`), :func:`~minitorch_proto.data.load_bags_csv` and a bag
folder's ``labels.csv`` alike: the header (:func:`check_header`), the rows' widths
(:func:`check_row_widths`), the separator (:func:`other_separator`), ids and labels as written
(:func:`ids_as_written`, :func:`read_labels`).
"""
from __future__ import annotations

import codecs
import os
from typing import Sequence

import numpy as np
import pandas as pd

__all__ = ["all_numbers", "check_header", "check_row_widths", "check_spellings", "header_names", "ids_as_written",
           "label_wording", "labels_from_text", "looks_like_data", "other_separator", "read_labels"]


def label_wording(text: str, where: str, label_col) -> str:
    """An error about ``y`` (the estimators' word) as a file's reader says it: the file and its label column."""
    return f"{where}: label column {label_col!r} {text[2:]}" if text.startswith("y ") else text


def other_separator(columns: Sequence) -> str | None:
    """The separator a file read as comma-separated seems to use instead (its header came back as one
    column holding ``;`` or a tab), or None."""
    if len(columns) != 1:
        return None
    name = str(columns[0])
    return next((sep for sep in (";", "\t", "|") if sep in name), None)


def looks_like_data(names: Sequence[str]) -> bool:
    """Whether a header row reads as a row of data: numbers, but for one text bag id (``0,b000,0.1,...``)."""
    return len(names) > 2 and sum(not all_numbers([n]) for n in names) <= 1


def all_numbers(names: Sequence[str]) -> bool:
    """Whether every column name reads as a number (pandas suffixes repeats: "0", "0.1", "8.5.1")."""
    def number(text: str) -> bool:
        for candidate in (text, text.rpartition(".")[0]):
            try:
                return bool(candidate) and float(candidate) == float(candidate)
            except ValueError:
                pass
        return False

    return all(number(n) for n in names)


def ids_as_written(table: pd.DataFrame, path: str | os.PathLike, column, header="infer", **read_kwargs) -> pd.Series:
    """``table[column]`` (read from the CSV ``path``) with names pandas took for missing values restored.

    pandas reads "NA", "null", "None", "nan" and the like as NaN in every column; a bag id (or a
    label) is a name, so only an empty cell is a missing one. The column is read again, as text, only when
    the first read found a missing id.
    """
    ids = table[column]
    if not ids.isna().any():
        return ids
    # The user's own column choice and parsing of missing values do not apply to this one column's re-read.
    kept = {k: v for k, v in read_kwargs.items()
            if k not in ("usecols", "dtype", "keep_default_na", "na_values", "na_filter", "converters", "index_col")}
    raw = pd.read_csv(path, header=header, usecols=[column], dtype=str, keep_default_na=False, **kept)
    raw = raw.iloc[:, 0]
    return raw.where(raw != "", np.nan).set_axis(ids.index)


def check_row_widths(df: pd.DataFrame, where: str, *, bags: bool = True) -> None:
    """Refuse a table whose rows have one field more than its header names.

    pandas then quietly takes the first column as the row index: the bag ids would be dropped and
    every column read as its neighbour (labels as bag ids, the first feature as labels). ``bags``:
    the table is a bag CSV, which ``load_bags_csv`` can read with another separator (a bag
    folder's labels file has no such reader, so its advice is to convert it).
    """
    sep = other_separator(df.columns)
    if sep and (not isinstance(df.index, pd.RangeIndex) or df.shape[1] == 1):
        other = f", or read it with load_bags_csv(path, sep={sep!r}) in Python" if bags else ""
        raise ValueError(f"{where}: the header reads as one column: the file seems separated by {sep!r}, not by "
                         f"commas (convert it to a comma-separated file{other}).")
    if not isinstance(df.index, pd.RangeIndex):
        raise ValueError(f"{where}: its rows have one field more than the header names columns (a name missing "
                         "from the header, or a comma at the end of every row?); fix the header or the rows.")


#: Text that reads as a yes/no label.
_BOOLEAN_WORDS = {"true": True, "false": False}
#: pandas' words for a missing value (lower case): missing among numeric or yes/no labels, names among names.
_MISSING_WORDS = {"na", "n/a", "nan", "-nan", "null", "none", "<na>", "#n/a", "#na", "#n/a n/a", "-1.#ind",
                  "1.#ind", "-1.#qnan", "1.#qnan"}


def check_spellings(labels: Sequence, where: str, label_col) -> None:
    """Refuse text labels that differ only in case or surrounding spaces (``Cancer``, ``cancer ``):
    as written they would be two classes of one, and a two-class study would fit three."""
    seen: dict[str, object] = {}
    for v in labels:
        if not isinstance(v, str):
            continue
        key = v.strip().casefold()
        if key in seen:
            raise ValueError(f"{where}: labels {seen[key]!r} and {v!r} of column {label_col!r} differ only in case "
                             "or surrounding spaces; as written they would be two classes: spell each class one way.")
        seen[key] = v


def labels_from_text(texts: pd.Series, where: str, label_col) -> pd.Series:
    """A label column read as text (empty cells NaN), as the classes it names.

    Numbers are read as numbers only when no two texts name one number: ``01`` and ``1``, or
    ``1.0`` and ``1``, in one column are an error, not one class re-spelled. ``true``/``false``
    (any case) are booleans. Anything else stays text as written, but two labels that differ
    only in case or surrounding spaces (``Cancer``, ``cancer ``) are an error: as written they
    would be two classes of one. ``NA``, ``None`` and the like are labels here; only an empty
    cell is a missing one.
    """
    values = [v for v in pd.unique(texts.dropna())]
    words = {str(v).strip().lower() for v in values}
    others = words - _MISSING_WORDS
    numeric = others and pd.to_numeric(pd.Series(sorted(others), dtype=object), errors="coerce").notna().all()
    if words & _MISSING_WORDS and others and (others <= set(_BOOLEAN_WORDS) or numeric):
        # "NA" among numbers or true/false is a missing value, as pandas reads it; among names it is a name.
        texts = texts.where(~texts.str.strip().str.lower().isin(_MISSING_WORDS))
        values = [v for v in pd.unique(texts.dropna())]
        words = others
    if values and words <= set(_BOOLEAN_WORDS):  # True, TRUE and true alike, as pandas reads them
        return texts.map(lambda v: v if pd.isna(v) else _BOOLEAN_WORDS[v.strip().lower()]).astype(object)
    check_spellings(values, where, label_col)
    numbers = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce")
    if values and numbers.notna().all():
        by_number: dict[float, object] = {}
        for v, x in zip(values, numbers):
            if abs(x) > 2 ** 53:
                raise ValueError(f"{where}: label column {label_col!r} holds {v}, too large for a class label "
                                 "(is it an id column?).")
            if x in by_number:
                raise ValueError(f"{where}: labels {by_number[x]!r} and {v!r} of column {label_col!r} are the same "
                                 "number; write each class one way.")
            by_number[x] = v
        return texts.map(dict(zip(values, numbers.astype(float))))  # whole numbers become int64 in plain_labels
    if words & set(_BOOLEAN_WORDS) and numbers.notna().any():
        raise ValueError(f"{where}: label column {label_col!r} mixes true/false with numbers; write each class "
                         "one way.")
    return texts


def header_names(path: str | os.PathLike, delimiter: str = ",", encoding: str | None = None) -> list[str]:
    """The header row as written (pandas renames repeats "a", "a" to "a", "a.1" and blanks to "Unnamed: 2")."""
    import csv

    # Every spelling of UTF-8 ("UTF-8", "utf_8", "U8"): a byte-order mark is then not part of the first name.
    encoding = "utf-8-sig" if encoding is None or codecs.lookup(encoding).name == "utf-8" else encoding
    with open(path, newline="", encoding=encoding, errors="replace") as fh:
        return next(csv.reader(fh, delimiter=delimiter), [])


def check_header(path: str | os.PathLike, parsed, where: str, delimiter: str = ",",
                 encoding: str | None = None) -> None:
    """Refuse a header whose names pandas had to invent: they would become features nobody named."""
    written = header_names(path, delimiter, encoding)
    if len(written) != len(parsed) or looks_like_data(written):
        return  # another dialect than the csv module's, or no header at all (the bag-column check says so)
    blank = [j for j, n in enumerate(written) if not n.strip()]
    if blank:
        hint = " (a saved index? write the CSV with index=False)" if blank == [0] else ""
        raise ValueError(f"{where}: column {blank[0]} has no name in the header{hint}; name or drop it.")
    seen: set[str] = set()
    repeated = [n for n in written if n in seen or seen.add(n)]
    if repeated:
        shown = ", ".join(repr(n) for n in repeated[:5]) + (" ..." if len(repeated) > 5 else "")
        raise ValueError(f"{where}: the header names {shown} twice; each column needs its own name.")


def read_labels(table: pd.DataFrame, path: str | os.PathLike, label_col, where: str, **read_kwargs) -> pd.Series:
    """The label column of a CSV read with ``dtype=str``, as its classes (:func:`labels_from_text`).

    Texts pandas took for missing values (``NA``, ``None``) are labels as written; only an empty
    cell is missing.
    """
    return labels_from_text(ids_as_written(table, path, label_col, **read_kwargs), where, label_col)
