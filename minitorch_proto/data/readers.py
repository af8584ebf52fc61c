"""Readers for the on-disk formats of multiple-instance data.

* the CSV layout of the multipleinstancelearning.com collection (no header;
  ``bag_label, bag_id, feature_1 .. feature_L``; one row per instance), read by
  :func:`read_mil_csv`;
* the PRTools ``.mat`` files of miproblems.org (struct ``x`` with fields
  ``data``, ``nlab``, ``lablist`` and ``ident.milbag``), read by
  :func:`read_mil_mat`;
* the user's own data, one row per instance with a bag column and a label column,
  through :func:`from_dataframe` or :func:`load_bags_csv`;
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from .bag_files import first_line
from .containers import BagDataset

__all__ = ["check_feature_values", "from_dataframe", "load_bags_csv", "read_mil_csv", "read_mil_mat"]


# --------------------------------------------------------------------------- #
# Parsing helpers
# --------------------------------------------------------------------------- #
def _group_rows(
    X: np.ndarray,
    labels: np.ndarray,
    keys: np.ndarray,
    *,
    sort_ids: bool,
    where: str,
    label_names: np.ndarray | None = None,
) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Split instance rows into bags.

    ``labels`` is numeric and NaN-free. Bags come in ascending key order when
    ``sort_ids``, else in order of first appearance; rows keep their file order
    inside a bag. Returns (bags, raw bag labels, bag ids).
    """
    if sort_ids:
        ids, codes = np.unique(keys, return_inverse=True)
    else:
        codes, ids = pd.factorize(keys, sort=False)
        ids = np.asarray(ids)
    codes = np.asarray(codes).reshape(-1)
    order = np.argsort(codes, kind="stable")
    counts = np.bincount(codes, minlength=len(ids))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    lab = labels[order]
    lo = np.minimum.reduceat(lab, starts)
    hi = np.maximum.reduceat(lab, starts)
    mixed = np.flatnonzero(lo != hi)
    if mixed.size:
        b = mixed[0]
        found = [_plain(v) for v in np.unique(lab[starts[b]: starts[b] + counts[b]])]
        if label_names is not None:
            found = [_plain(label_names[int(v)]) for v in found]
        else:
            found = [int(v) if float(v).is_integer() else v for v in found]
        raise ValueError(
            f"{where}: bag {_plain(ids[b])!r} has instances with different labels "
            f"{found}; every instance of a bag must carry the bag's label."
        )
    bags = np.split(X[order], np.cumsum(counts)[:-1])
    return bags, lo, ids


def _bag_labels_to_int(raw: np.ndarray, where: str) -> np.ndarray:
    """Turn numeric bag labels into int64, mapping a -1/+1 coding to 0/1."""
    raw = np.asarray(raw, dtype=np.float64)
    if np.any(raw != np.round(raw)):
        bad = raw[raw != np.round(raw)][0]
        raise ValueError(f"{where}: bag labels must be integers, found {bad}.")
    y = raw.astype(np.int64)
    values = set(np.unique(y).tolist())
    # Some mirrors code the classes as -1/+1.
    if -1 in values and values <= {-1, 1}:
        return np.where(y == -1, 0, 1).astype(np.int64)
    if min(values) < 0:
        raise ValueError(
            f"{where}: bag labels must be 0/1 (or -1/+1, read as 0/1) or other "
            f"non-negative integers; found {sorted(values)}."
        )
    return y


# Before pandas 3 the default float parser could be off by one unit in the last
# place; "round_trip" reads every value exactly (pandas 3 does so by default and
# deprecates the argument).
_EXACT_FLOATS = {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}


def _plain(value):
    """A numpy scalar as the Python value, so messages read ``7``, not ``np.int64(7)``."""
    return value.item() if isinstance(value, np.generic) else value


def index_by_line(df: pd.DataFrame, header: bool = True) -> pd.DataFrame:
    """Number a CSV's rows by their line in the file (a header is line 1), so that a message's row
    is found in an editor as it is in ``labels.csv``; blank lines, which pandas skips, are not counted."""
    first = 2 if header else 1
    df.index = pd.RangeIndex(first, first + len(df), name="line")
    return df


def _row(index: pd.Index, position: int) -> str:
    """Where a message points: ``line 7`` of a file (see :func:`index_by_line`), else a table's ``row 'a'``."""
    if index.name == "line":
        return f"line {index[position]}"
    return f"row {_plain(index[position])!r}"


def _dataset_name(path: Path, name: str | None) -> str:
    return name if name is not None else path.stem.lower()


# --------------------------------------------------------------------------- #
# Readers
# --------------------------------------------------------------------------- #
def read_mil_csv(path: str | os.PathLike, name: str | None = None) -> BagDataset:
    """Read a MIL CSV file without header: ``bag_label, bag_id, features...``.

    This is the layout of the multipleinstancelearning.com collection: one row
    per instance, the bag's label (0/1, or -1/+1 which is mapped to 0/1) in the
    first column and an integer bag id in the second.

    Parameters
    ----------
    path : str or PathLike
    name : str, optional
        Data set name; defaults to the file name's stem in lower case.

    Returns
    -------
    BagDataset
        Bags in ascending bag-id order, instances in file order within a bag.

    Raises
    ------
    ValueError
        If the file is empty, has fewer than three columns, holds non-numeric
        values or non-integer bag ids, or a bag has instances with different labels.
    """
    path = Path(path)
    try:
        df = pd.read_csv(path, header=None, **_EXACT_FLOATS)
    except pd.errors.EmptyDataError as exc:
        raise ValueError(f"{path} is empty.") from exc
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a MIL CSV file ({first_line(exc)}).") from exc
    if df.shape[0] == 0:
        raise ValueError(f"{path} has no rows.")
    if df.shape[1] < 3:
        raise ValueError(
            f"{path} has {df.shape[1]} column(s); expected bag_label, bag_id and at "
            "least one feature per row."
        )
    non_numeric = [c for c in df.columns if not pd.api.types.is_numeric_dtype(df[c])]
    if non_numeric:
        col = non_numeric[0]
        example = df[col][pd.to_numeric(df[col], errors="coerce").isna()].iloc[0]
        raise ValueError(
            f"{path}: column {col + 1} holds non-numeric values (e.g. {example!r}). "
            "read_mil_csv expects a headerless file of numbers; for a file with a "
            "header use load_bags_csv."
        )
    values = df.to_numpy(dtype=np.float64)
    if not np.all(np.isfinite(values)):
        row, col = np.argwhere(~np.isfinite(values))[0]
        raise ValueError(
            f"{path}: missing or non-finite value in row {row + 1}, column {col + 1}."
        )
    raw_ids = values[:, 1]
    if np.any(raw_ids != np.round(raw_ids)):
        raise ValueError(f"{path}: the bag ids in column 2 must be integers.")
    ids = raw_ids.astype(np.int64)
    bags, raw_y, bag_ids = _group_rows(
        np.ascontiguousarray(values[:, 2:]), values[:, 0], ids, sort_ids=True, where=str(path)
    )
    y = _bag_labels_to_int(raw_y, str(path))
    return BagDataset(_dataset_name(path, name), bags, y, bag_ids, source=str(path))


def _mat_label_names(lablist) -> list[str]:
    """Class names from a PRTools ``lablist`` as read with ``simplify_cells``."""
    if isinstance(lablist, str):
        return [lablist.strip()]
    arr = np.asarray(lablist, dtype=object)
    # Newer PRTools stores a cell array {names, prior, ...; labeling names, current, ...};
    # its first cell holds the class names of the active labeling. Older files store
    # the names directly as a char matrix.
    if arr.ndim == 2 and arr.size and not isinstance(arr.flat[0], str):
        arr = np.asarray(arr[0, 0], dtype=object)
    return [str(v).strip() for v in np.ravel(arr)]


def _mat_instance_labels(nlab: np.ndarray, names: list[str], where: str) -> np.ndarray:
    if np.any(nlab < 1) or np.any(nlab > len(names)):
        raise ValueError(
            f"{where}: nlab holds values outside 1..{len(names)} (0 means unlabelled "
            "in PRTools); every instance needs its bag's label."
        )
    lowered = [n.lower() for n in names]
    if "positive" in lowered:
        return (nlab == lowered.index("positive") + 1).astype(np.float64)
    try:
        numeric = np.array([float(n) for n in names])
    except ValueError:
        raise ValueError(
            f"{where}: cannot tell which class is positive from the label names {names}; "
            "expected 'negative'/'positive' or numeric names."
        ) from None
    return numeric[nlab - 1]


def read_mil_mat(path: str | os.PathLike, name: str | None = None) -> BagDataset:
    """Read a PRTools/miproblems.org ``.mat`` MIL data set.

    The file holds a struct (normally named ``x``) with the instance matrix in
    ``data``, 1-based class indices in ``nlab``, the class names in ``lablist``
    and each instance's bag in ``ident.milbag`` (numbers or names).

    Parameters
    ----------
    path : str or PathLike
    name : str, optional
        Data set name; defaults to the file name's stem in lower case.

    Returns
    -------
    BagDataset
        Bags are numbered 1, 2, ... in order of their first instance in the
        file; for the five benchmarks this is the numbering of the CSV
        collection, so both formats give identical data sets. The label is 1
        for the class named ``positive`` (or the numeric class names, with
        -1/+1 mapped to 0/1).

    Raises
    ------
    ValueError
        If the file lacks the expected fields, is a MATLAB v7.3 (HDF5) file,
        or a bag has instances with different labels.
    """
    import scipy.io
    import scipy.sparse

    path = Path(path)
    try:
        content = scipy.io.loadmat(path, simplify_cells=True)
    except NotImplementedError as exc:
        raise ValueError(f"{path}: MATLAB v7.3 (HDF5) files are not supported.") from exc
    except (OSError, ValueError, TypeError, EOFError, scipy.io.matlab.MatReadError) as exc:
        # A cut file says only "could not read bytes": name the file and the likely cause.
        raise ValueError(f"{path}: could not be read as a .mat file; is it damaged or truncated? "
                         f"({first_line(exc)})") from exc
    structs = {k: v for k, v in content.items() if not k.startswith("__") and isinstance(v, dict)}
    if "x" in structs:
        x = structs["x"]
    elif len(structs) == 1:
        x = next(iter(structs.values()))
    else:
        raise ValueError(
            f"{path}: expected one PRTools dataset struct (named 'x'); found "
            f"{sorted(k for k in content if not k.startswith('__'))}."
        )
    missing = [f for f in ("data", "nlab", "lablist", "ident") if f not in x]
    if missing or not isinstance(x.get("ident"), dict) or "milbag" not in x["ident"]:
        raise ValueError(
            f"{path}: not a PRTools MIL data set (needs fields data, nlab, lablist and "
            f"ident.milbag; missing {missing or ['ident.milbag']})."
        )
    data = x["data"]
    if scipy.sparse.issparse(data):
        data = data.toarray()
    X = np.atleast_2d(np.asarray(data, dtype=np.float64))
    nlab = np.asarray(x["nlab"]).reshape(-1).astype(np.int64)
    milbag = np.asarray(x["ident"]["milbag"])
    # Bag names are stored as a blank-padded char matrix; numbers come as a column.
    keys = np.array([str(v).strip() for v in milbag.reshape(-1)], dtype=object)
    if not (len(X) == len(nlab) == len(keys)):
        raise ValueError(
            f"{path}: data has {len(X)} rows but nlab {len(nlab)} and milbag {len(keys)}."
        )
    labels = _mat_instance_labels(nlab, _mat_label_names(x["lablist"]), str(path))
    bags, raw_y, _ = _group_rows(X, labels, keys, sort_ids=False, where=str(path))
    y = _bag_labels_to_int(raw_y, str(path))
    bag_ids = np.arange(1, len(bags) + 1, dtype=np.int64)
    return BagDataset(_dataset_name(path, name), bags, y, bag_ids, source=str(path))


def from_dataframe(
    df: pd.DataFrame,
    bag_col: str = "bag",
    label_col: str = "label",
    feature_cols: Iterable[str] | None = None,
    name: str = "custom",
    where: str | None = None,
) -> BagDataset:
    """Build a :class:`BagDataset` from a table with one row per instance.

    Parameters
    ----------
    df : pandas.DataFrame
    bag_col : str
        Column holding each row's bag id (any hashable values).
    label_col : str
        Column holding the bag label, kept as given (strings, integers such as 0/1
        or -1/+1, booleans): these are the classes an estimator fitted on the data
        reports and predicts. It must be the same on every row of a bag.
    feature_cols : iterable of str, optional
        Feature columns in the wanted order; default: every column except
        ``bag_col`` and ``label_col``, in table order.
    name : str
        Data set name.
    where : str, optional
        How messages name the source (e.g. the CSV's path); default ``name``.

    Returns
    -------
    BagDataset
        Bags in order of their first row in ``df``; ``bag_ids`` holds the
        bag column's values.

    Raises
    ------
    ValueError
        If the table is empty, a column is missing, a feature column is not
        numeric, a value is missing, infinite or beyond float32's range (the message
        names the row and the column), or a bag has rows with different labels.
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"from_dataframe expects a pandas DataFrame, got {type(df).__name__}.")
    where = where or name
    if df.shape[0] == 0:
        raise ValueError(f"{where}: the table has no rows.")
    if bag_col == label_col:
        raise ValueError(f"{where}: bag_col and label_col both name column {bag_col!r}; they must differ.")
    columns = list(df.columns)
    known = set(columns)  # sets, not lists: tables of 100,000 feature columns are matched in linear time
    for role, col in (("bag_col", bag_col), ("label_col", label_col)):
        if col not in known:
            hint = ("; its first row looks like data, not names: read the file with header=None and name the "
                    "columns by position (bag_col=1, label_col=0 in the benchmarks' layout)"
                    if looks_like_data([str(c) for c in columns]) else "")
            sep = other_separator(columns)
            if sep:
                hint = f"; the header reads as one column: the file seems separated by {sep!r} (pass sep={sep!r})"
            raise ValueError(f"{where}: column {col!r} ({role}) not found; columns are {shown_names(columns)}{hint}.")
    if feature_cols is None:
        feature_cols = [c for c in columns if c not in (bag_col, label_col)]
    else:
        # One name is one column, not its characters (pandas' df[["f1"]] and df["f1"] alike).
        feature_cols = [feature_cols] if isinstance(feature_cols, str) else list(feature_cols)
        unknown = [c for c in feature_cols if c not in known]
        if unknown:
            raise ValueError(f"{where}: feature column(s) {shown_names(unknown)} not found; "
                             f"columns are {shown_names(columns)}.")
        clash = [c for c in feature_cols if c in (bag_col, label_col)]
        if clash:
            raise ValueError(f"{where}: {clash} cannot be both a feature and the bag/label column.")
    if not feature_cols:
        raise ValueError(f"{where}: no feature columns (only {bag_col!r} and {label_col!r}).")
    features = df[feature_cols]
    non_numeric = [c for c, t in zip(feature_cols, features.dtypes) if not pd.api.types.is_numeric_dtype(t)]
    if non_numeric:
        raise ValueError(
            f"{where}: feature column(s) {shown_names(non_numeric)} are not numeric (dtype "
            f"{df[non_numeric[0]].dtype}); convert or drop them, or pass feature_cols=."
        )
    X = features.to_numpy(dtype=np.float64)
    check_feature_values(X, where, columns=feature_cols, rows=df.index)
    keys = df[bag_col].to_numpy()
    if pd.isna(df[bag_col]).any():
        row = _row(df.index, int(np.flatnonzero(pd.isna(df[bag_col]).to_numpy())[0]))
        raise ValueError(f"{where}: bag column {bag_col!r} is missing a value ({row}).")
    lab = df[label_col]
    if lab.isna().any():
        row = _row(df.index, int(np.flatnonzero(lab.isna().to_numpy())[0]))
        raise ValueError(f"{where}: label column {label_col!r} is missing a value ({row}).")
    # The classes are the labels as given (strings, -1/+1, 0/1, booleans), as scikit-learn keeps them.
    check_spellings(pd.unique(lab), where, label_col)
    try:
        codes, names = pd.factorize(lab, sort=True)
    except TypeError:  # labels of several kinds (text and numbers) have no order: keep first appearance
        codes, names = pd.factorize(lab, sort=False)
    bags, raw_y, bag_ids = _group_rows(X, codes.astype(np.float64), keys, sort_ids=False, where=where,
                                       label_names=np.asarray(names))
    y = np.asarray(names)[raw_y.astype(np.int64)]
    return BagDataset(name, bags, y, bag_ids, feature_names=[str(c) for c in feature_cols])


def other_separator(columns: Sequence) -> str | None:
    """The separator a file read as comma-separated seems to use instead (its header came back as one
    column holding ``;`` or a tab), or None."""
    if len(columns) != 1:
        return None
    name = str(columns[0])
    return next((sep for sep in (";", "\t", "|") if sep in name), None)


def looks_like_data(names: Sequence[str]) -> bool:
    """Whether a header row reads as a row of data: numbers, but for one text bag id (``0,b000,0.1,...``)."""
    return len(names) > 2 and sum(not _all_numbers([n]) for n in names) <= 1


def _all_numbers(names: Sequence[str]) -> bool:
    """Whether every column name reads as a number (pandas suffixes repeats: "0", "0.1", "8.5.1")."""
    def number(text: str) -> bool:
        for candidate in (text, text.rpartition(".")[0]):
            try:
                return bool(candidate) and float(candidate) == float(candidate)
            except ValueError:
                pass
        return False

    return all(number(n) for n in names)


def shown_names(names: list, most: int = 8) -> str:
    """A list of column names for a message, shortened when long (wide tables have 100,000)."""
    names = [str(n) for n in names]
    return str(names) if len(names) <= most else f"{names[:most]} ... ({len(names)} in all)"


def check_feature_values(X: np.ndarray, where: str, *, columns=None, rows=None) -> None:
    """Refuse missing, infinite and float32-overflowing values, naming the row and the column.

    The models compute in float32: a value beyond its range (about 3.4e38) would become
    infinite there and poison the prototypes, so it is refused like NaN and infinity.
    """
    bad = ~np.isfinite(X)
    what = "a missing (NaN) or infinite value"
    if not bad.any():
        bad = np.abs(X) > np.finfo(np.float32).max
        what = "a value beyond float32's range (|x| > 3.4e38)"
    if bad.any():
        row, col = np.argwhere(bad)[0]
        col_name = columns[col] if columns is not None else col
        row_name = _row(rows, int(row)) if rows is not None else f"row {int(row)}"
        # float(): the message reads 1e+300, not np.float64(1e+300).
        raise ValueError(f"{where}: feature column {col_name!r} holds {what} ({row_name}, "
                         f"value {float(X[row, col])!r}).")


def ids_as_written(table: pd.DataFrame, path: str | os.PathLike, column, header="infer", **read_kwargs) -> pd.Series:
    """``table[column]`` (read from the CSV ``path``) with names pandas took for missing values restored.

    pandas reads "NA", "null", "None", "nan" and the like as NaN in every column; a bag id (or a
    label) is a name, so only an empty cell is a missing one. The column is read again, as text, only when
    the first read found a missing id.
    """
    ids = table[column]
    if not ids.isna().any():
        return ids
    raw = pd.read_csv(path, header=header, usecols=[column], dtype=str, keep_default_na=False, **read_kwargs)
    raw = raw.iloc[:, 0]
    return raw.where(raw != "", np.nan).set_axis(ids.index)


def check_row_widths(df: pd.DataFrame, where: str) -> None:
    """Refuse a table whose rows have one field more than its header names.

    pandas then quietly takes the first column as the row index: the bag ids would be dropped and
    every column read as its neighbour (labels as bag ids, the first feature as labels).
    """
    sep = other_separator(df.columns)
    if sep and (not isinstance(df.index, pd.RangeIndex) or df.shape[1] == 1):
        raise ValueError(f"{where}: the header reads as one column: the file seems separated by {sep!r}, not by "
                         f"commas (convert it to a comma-separated file, or read it with load_bags_csv(path, "
                         f"sep={sep!r}) in Python).")
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
    if words & _MISSING_WORDS and others and (others <= set(_BOOLEAN_WORDS) or _all_numbers(sorted(others))):
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
        whole = bool(np.all(numbers == np.round(numbers)))
        return texts.map({v: int(x) if whole else float(x) for v, x in zip(values, numbers)})
    if words & set(_BOOLEAN_WORDS) and numbers.notna().any():
        raise ValueError(f"{where}: label column {label_col!r} mixes true/false with numbers; write each class "
                         "one way.")
    return texts


def header_names(path: str | os.PathLike) -> list[str]:
    """The header row as written (pandas renames repeats "a", "a" to "a", "a.1" and blanks to "Unnamed: 2")."""
    import csv

    with open(path, newline="", encoding="utf-8-sig", errors="replace") as fh:
        return next(csv.reader(fh), [])


def check_header(path: str | os.PathLike, parsed, where: str) -> None:
    """Refuse a header whose names pandas had to invent: they would become features nobody named."""
    written = header_names(path)
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


def load_bags_csv(
    path: str | os.PathLike,
    bag_col: str = "bag",
    label_col: str = "label",
    feature_cols: Iterable[str] | None = None,
    name: str | None = None,
    **read_csv_kwargs,
) -> BagDataset:
    """Read the user's own CSV (with a header row) of one instance per row.

    Parameters
    ----------
    path : str or PathLike
    bag_col, label_col, feature_cols :
        As in :func:`from_dataframe`.
    name : str, optional
        Data set name; defaults to the file name's stem.
    **read_csv_kwargs
        Passed to :func:`pandas.read_csv` (e.g. ``sep=";"``).

    Returns
    -------
    BagDataset
        Bags in order of first appearance; ``source`` is the path. Bag ids are read
        as text and kept verbatim (``007`` and ``7`` are different bags).
    """
    path = Path(path)
    dtype = dict(read_csv_kwargs.pop("dtype", None) or {})
    dtype.setdefault(bag_col, str)  # ids are names: "007" and "7" are two bags, written back as given
    dtype.setdefault(label_col, str)  # labels as written: "01" and "1" are not silently one class
    try:
        df = pd.read_csv(path, dtype=dtype, **read_csv_kwargs)
        check_row_widths(df, str(path))
        if not read_csv_kwargs:  # with skiprows, header=... and the like, lines are not rows + 2
            check_header(path, df.columns, str(path))
            index_by_line(df)
        if bag_col in df.columns:
            df[bag_col] = ids_as_written(df, path, bag_col, **read_csv_kwargs)
        if label_col in df.columns and dtype[label_col] is str:
            df[label_col] = read_labels(df, path, label_col, str(path), **read_csv_kwargs)
    except pd.errors.EmptyDataError as exc:
        raise ValueError(f"{path} is empty.") from exc
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        hint = " (another encoding? pass encoding='latin-1')" if isinstance(exc, UnicodeDecodeError) else ""
        raise ValueError(f"{path} is not a readable CSV{hint}: {str(exc).splitlines()[0]}") from None
    ds = from_dataframe(
        df,
        bag_col=bag_col,
        label_col=label_col,
        feature_cols=feature_cols,
        name=name if name is not None else path.stem,
        where=str(path),
    )
    ds.source = str(path)
    return ds
