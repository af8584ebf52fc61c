"""The labels file of a bag folder: one row per bag, its id and (for training) its label.

Read as untrusted input, as the folder is (:mod:`minitorch_proto.data.disk`): ids are checked as
file names, a labels file that is a link out of the folder is refused unless links are allowed,
labels are kept as written, and every problem is a one-line :class:`BagFileError` naming the file.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .bag_files import FEATURE_SUFFIXES, LINK_ADVICE, BagFileError, check_bag_id, first_line
from .containers import plain_labels
from .csv_checks import all_numbers, check_row_widths, ids_as_written, read_labels

__all__ = ["feature_entries", "folder_ids", "read_labels_file"]


def read_labels_file(root: Path, labels: Path, *, bag_col: str, label_col: str | None,
                     follow_links: bool) -> tuple[np.ndarray, np.ndarray | None, list[str]]:
    """The bag ids (text, in the file's order), the labels (None without a ``label_col`` column) and the
    column names of the labels file ``labels`` of the folder ``root``.

    Raises
    ------
    FileNotFoundError
        When ``labels`` is no file.
    BagFileError
        One line naming the file: unreadable, no bag-id column, no rows, a missing, repeated or unsafe id,
        a missing label, a link out of the folder.
    """
    if not labels.is_file():
        # A relative path is read from the working directory, not the folder (the CLI's default is the folder's).
        inside = root / labels
        hint = f"; {inside} does: pass that path" if not labels.is_absolute() and inside.is_file() else ""
        raise FileNotFoundError(f"Labels file {labels} does not exist{hint}.")
    if (labels.is_symlink() and not follow_links and labels.parent.resolve() == root.resolve()
            and not labels.resolve().is_relative_to(root.resolve())):
        # The folder's own labels file is the stranger's too; one named on purpose elsewhere is the user's.
        raise BagFileError(f"{labels} leads outside {root} (to {labels.resolve()}); {LINK_ADVICE}.")
    try:
        text = {bag_col: str, **({label_col: str} if label_col is not None else {})}
        table = pd.read_csv(labels, dtype=text)
        check_row_widths(table, str(labels), bags=False)
        if bag_col in table.columns:  # "NA" is a bag's name here, as write_bag_folder writes it
            table[bag_col] = ids_as_written(table, labels, bag_col)
        if label_col in table.columns:  # labels as written: "01" and "1" are not silently one class
            table[label_col] = read_labels(table, labels, label_col, str(labels))
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise BagFileError(f"{labels}: not a readable CSV ({first_line(exc)}).") from None
    except ValueError as exc:  # the labels' or the rows' own one-line reasons, as this module's error
        raise BagFileError(str(exc)) from None
    if bag_col not in table.columns:
        # A file without a header row: its first bag and label became the column names.
        hint = ("; its first row reads as a bag and its label, not names: a labels file needs a header row "
                f"({bag_col},{label_col or 'label'})" if any(all_numbers([str(c)]) for c in table.columns) else "")
        raise BagFileError(f"{labels}: no bag-id column {bag_col!r} (columns: {list(table.columns)}){hint}.")
    if len(table) == 0:
        raise BagFileError(f"{labels}: lists no bags.")
    ids = table[bag_col]
    if ids.isna().any():
        raise BagFileError(f"{labels}: line {int(np.flatnonzero(ids.isna())[0]) + 2} has no bag id.")
    for bag_id in ids:
        check_bag_id(bag_id, str(labels))
    dup = ids[ids.duplicated()]
    if len(dup):
        raise BagFileError(f"{labels}: bag id {dup.iloc[0]!r} is listed twice.")
    y = None
    if label_col in table.columns:
        lab = table[label_col]
        if lab.isna().any():
            bad = int(np.flatnonzero(lab.isna())[0])
            raise BagFileError(f"{labels}: bag {ids.iloc[bad]!r} (line {bad + 2}) has no label.")
        y = plain_labels(lab.to_numpy(), str(labels))
    return ids.astype(str).to_numpy(), y, [str(c) for c in table.columns]


def feature_entries(root: Path) -> list[Path]:
    """The entries of ``root`` that may be bags: a feature suffix, not hidden (macOS's ``._`` twins, writers'
    temporaries), not a sub-folder named like a feature file."""
    return [p for p in root.iterdir()
            if p.suffix.lower() in FEATURE_SUFFIXES and not p.name.startswith(".") and not p.is_dir()]


def folder_ids(root: Path) -> np.ndarray:
    """The ids of every feature file in ``root`` (file names without their suffix), sorted: a folder read
    without a labels file, as for predicting every bag in it. Hidden files are no bags: macOS leaves
    ``._<name>`` beside files copied to other disks, and a writer's temporaries start with a dot.

    Raises
    ------
    BagFileError
        When the folder holds no feature file, or a file name is no safe bag id.
    """
    ids = sorted({p.stem for p in feature_entries(root)})
    if not ids:
        raise BagFileError(f"{root} holds no feature files ({', '.join('*' + s for s in FEATURE_SUFFIXES)}).")
    for bag_id in ids:
        check_bag_id(bag_id, str(root))
    return np.asarray(ids, dtype=str)
