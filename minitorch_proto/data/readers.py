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

import numbers
import os
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from .bag_files import first_line
from .containers import BagDataset
from .csv_checks import (check_header, check_row_widths, check_spellings, ids_as_written, label_wording,
                         looks_like_data, other_separator, read_labels)

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
        # Labels written 0 and 1 are named so, not 0.0 and 1.0 (numeric labels are held as floats).
        found = [int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer() else v
                 for v in found]
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
    # Checked here, where the file's row and column are known (the models' own check names a bag and instance).
    huge = np.abs(values[:, 2:]) > np.finfo(np.float32).max
    if huge.any():
        row, col = np.argwhere(huge)[0]
        raise ValueError(f"{path}: the value {float(values[row, col + 2])!r} in row {row + 1}, column {col + 3} is "
                         "beyond float32's range (|x| > 3.4e38); rescale the features.")
    raw_ids = values[:, 1]
    if np.any(raw_ids != np.round(raw_ids)):
        raise ValueError(f"{path}: the bag ids in column 2 must be integers.")
    if pd.api.types.is_integer_dtype(df[1]) and df[1].max() <= np.iinfo(np.int64).max:  # ids past 2**53: as read
        ids = df[1].to_numpy(dtype=np.int64)
    elif pd.api.types.is_integer_dtype(df[1]):
        raise ValueError(f"{path}: bag ids in column 2 beyond 2**63 - 1 do not fit a 64-bit integer; number the "
                         "bags with smaller ids.")
    elif np.abs(raw_ids).max() >= 2**53:
        raise ValueError(f"{path}: bag ids in column 2 beyond 2**53 are written as decimals; two of them could be "
                         "one number. Write them as whole numbers.")
    else:
        ids = raw_ids.astype(np.int64)
    # Bags are numbered here, and "007", "7" and "7.0" are one number: two bags written so would merge silently.
    spelled = pd.read_csv(path, header=None, usecols=[1], dtype=str).iloc[:, 0].str.strip().to_numpy()
    per_id = pd.Series(spelled).groupby(ids).nunique()
    if (per_id > 1).any():
        first = np.unique(spelled[ids == per_id.index[per_id > 1][0]])[:2]
        raise ValueError(f"{path}: bag ids {first[0]!r} and {first[1]!r} in column 2 are one number, so their rows "
                         "would be one bag; spell each id one way, or keep ids as text with "
                         "load_bags_csv(path, header=None, bag_col=1, label_col=0).")
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
    as_text = pd.Index([str(c) for c in columns])
    if as_text.has_duplicates:  # df[name] would be a table, and 1 and "1" one feature name
        raise ValueError(f"{where}: column name {as_text[as_text.duplicated()][0]!r} appears twice; each column "
                         "needs its own name.")
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
    # Complex counts as numeric to pandas, and the conversion below would drop the imaginary part.
    non_numeric = [c for c, t in zip(feature_cols, features.dtypes)
                   if not pd.api.types.is_numeric_dtype(t) or pd.api.types.is_complex_dtype(t)]
    if non_numeric:
        first = df[non_numeric[0]]
        # The first cell that is no number, as an editor shows it: in a 2,000-row file the line is what helps.
        try:
            stray = np.flatnonzero((pd.to_numeric(first, errors="coerce").isna() & first.notna()).to_numpy())
        except (TypeError, ValueError):  # cells pandas cannot even try (lists, dicts): the column is named alone
            stray = []
        cell = f", {_row(df.index, int(stray[0]))}: {_plain(first.iloc[int(stray[0])])!r}" if len(stray) else ""
        raise ValueError(
            f"{where}: feature column(s) {shown_names(non_numeric)} are not numeric (dtype "
            f"{first.dtype}{cell}); convert or drop them, or pass feature_cols=."
        )
    X = features.to_numpy(dtype=np.float64)
    check_feature_values(X, where, columns=feature_cols, rows=df.index)
    for role, col in (("bag", bag_col), ("label", label_col)):
        kinds = set(df[col].dropna().map(type)) if df[col].dtype == object else set()
        numeric = any(issubclass(k, numbers.Number) and k not in (bool, np.bool_) for k in kinds)
        if kinds & {bool, np.bool_} and numeric:
            raise ValueError(f"{where}: {role} column {col!r} mixes True/False with numbers; pandas takes True for 1 "
                             "and would merge them: use one kind of value.")
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
    try:
        return BagDataset(name, bags, y, bag_ids, feature_names=[str(c) for c in feature_cols])
    except ValueError as exc:  # e.g. a label 1.5: say which file and column hold it, as the command line does
        raise ValueError(label_wording(str(exc), where, label_col)) from None


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


#: read_csv options by which a caller parses values their own way: the label column is then left to them.
_LABEL_PARSING = {"decimal", "thousands", "true_values", "false_values", "converters", "na_values",
                  "keep_default_na", "na_filter", "parse_dates", "date_format"}


def load_bags_csv(
    path: str | os.PathLike,
    bag_col: str = "bag",
    label_col: str = "label",
    feature_cols: Iterable[str] | None = None,
    name: str | None = None,
    **read_csv_kwargs: Any,
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
    # Labels as written ("01" and "1" are not silently one class), unless the caller parses them their own way.
    as_text = label_col not in dtype and not set(read_csv_kwargs) & _LABEL_PARSING
    if as_text:
        dtype[label_col] = str
    try:
        df = pd.read_csv(path, dtype=dtype, **read_csv_kwargs)
        if "index_col" not in read_csv_kwargs:  # an index the caller asked for is no sign of a short header
            check_row_widths(df, str(path))
        sep = read_csv_kwargs.get("sep", read_csv_kwargs.get("delimiter", ","))
        if set(read_csv_kwargs) <= {"sep", "delimiter", "encoding"} and isinstance(sep, str) and len(sep) == 1:
            # The header as the csv module reads it with the same separator; header=, skiprows= and the like
            # move or replace it, so it is then the caller's.
            check_header(path, df.columns, str(path), sep, read_csv_kwargs.get("encoding"))
        if not read_csv_kwargs:  # with skiprows, header=... and the like, lines are not rows + 2
            index_by_line(df)
        if bag_col in df.columns:
            df[bag_col] = ids_as_written(df, path, bag_col, **read_csv_kwargs)
        if as_text and label_col in df.columns:
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
