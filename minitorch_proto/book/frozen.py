"""Frozen result tables: measurements too long to re-run in a book build, shipped with the package.

A frozen table is a CSV file in ``minitorch_proto/book/frozen_tables/`` with a JSON file of the same
name beside it that says how it was made (``command``, ``commit``, ``date``, ``description``) and
what it holds (``columns``, ``n_rows`` and the ``sha256`` of its text, checked on every read).
Both are package data, so a notebook finds them after a plain ``pip install`` (as on Colab),
without the repository beside it. :func:`write_frozen` writes a table together with that
provenance; :func:`load_frozen` reads it back with the provenance in ``DataFrame.attrs``.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import io
import json
import os
import re
from importlib import resources
from pathlib import Path

import pandas as pd

from ..about import code_version
from ..outputs import write_together

__all__ = [
    "PROVENANCE_KEYS",
    "frozen_dir",
    "frozen_names",
    "load_frozen",
    "provenance",
    "provenance_note",
    "shown_version",
    "write_frozen",
]

#: Keys every provenance file must hold.
PROVENANCE_KEYS = ("command", "commit", "date", "description")

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
#: A git commit hash, as a frozen table names the code that made it (one home for the freezers' checks too).
GIT_HASH = r"[0-9a-f]{7,40}"
#: A code version a reader can look up: a git hash ("+dirty": uncommitted changes; refused for the package's own
#: tables, which hold it from before that rule only, and accepted for a table written elsewhere).
_COMMIT = re.compile(GIT_HASH + r"(\+dirty)?")


def _digest(text: str) -> str:
    """sha256 of a table's text, line endings made Unix ones (a checkout may turn them into CRLF)."""
    return hashlib.sha256(text.replace("\r\n", "\n").encode("utf-8")).hexdigest()


def frozen_dir():
    """The package-data folder of the frozen tables (a ``Traversable``, a plain path when installed)."""
    return resources.files("minitorch_proto") / "book" / "frozen_tables"


def _check_name(name: str) -> str:
    name = str(name)
    if name.endswith(".csv"):
        name = name[: -len(".csv")]
    if not _NAME.match(name):
        raise ValueError(f"{name!r} is not a frozen table name (letters, digits, '_', '-', '.').")
    return name


def frozen_names() -> list[str]:
    """Names (without ``.csv``) of the frozen tables shipped with the package, sorted."""
    folder = frozen_dir()
    if not folder.is_dir():
        return []
    return sorted(p.name[: -len(".csv")] for p in folder.iterdir() if p.name.endswith(".csv"))


def provenance(name: str) -> dict:
    """The provenance record of a frozen table (command, commit, date, description, ...).

    Raises
    ------
    FileNotFoundError
        If the table or its provenance file is not shipped with the package.
    ValueError
        If the provenance file lacks one of :data:`PROVENANCE_KEYS`.
    """
    name = _check_name(name)
    meta = frozen_dir() / f"{name}.json"
    if not meta.is_file():
        known = ", ".join(frozen_names()) or "none"
        raise FileNotFoundError(f"no frozen table {name!r} with provenance in the package (known: {known}).")
    record = json.loads(meta.read_text())
    missing = [k for k in PROVENANCE_KEYS if not record.get(k)]
    if missing:
        raise ValueError(f"provenance of frozen table {name!r} lacks {missing}.")
    return record


def load_frozen(name: str) -> pd.DataFrame:
    """Read a frozen table; its provenance record is in ``df.attrs["provenance"]``.

    Parameters
    ----------
    name : str
        Table name, e.g. ``"measured_results"`` (``.csv`` may be given).

    Returns
    -------
    DataFrame

    Raises
    ------
    FileNotFoundError
        If no such table ships with the package.
    ValueError
        If the table is not the one its provenance describes (other columns, rows or text: cut short,
        or changed by hand since it was frozen).
    """
    name = _check_name(name)
    record = provenance(name)
    text = (frozen_dir() / f"{name}.csv").read_text(encoding="utf-8")
    if "sha256" in record and _digest(text) != record["sha256"]:
        raise ValueError(f"frozen table {name!r} is not the table its provenance describes (its sha256 differs): "
                         "cut short or changed since it was frozen; restore it (git checkout, or reinstall the "
                         "package), or freeze it again with write_frozen.")
    df = pd.read_csv(io.StringIO(text))
    if "columns" in record and list(map(str, df.columns)) != list(record["columns"]):
        raise ValueError(f"frozen table {name!r} has columns {list(df.columns)}; its provenance records "
                         f"{record['columns']}.")
    if "n_rows" in record and len(df) != record["n_rows"]:
        raise ValueError(f"frozen table {name!r} has {len(df)} rows; its provenance records {record['n_rows']}.")
    df.attrs["provenance"] = record
    return df


def provenance_note(table: pd.DataFrame | dict) -> str:
    """One Markdown line saying how a frozen table was made: date, command, code version.

    Parameters
    ----------
    table : DataFrame or dict
        A table from :func:`load_frozen` (its ``attrs["provenance"]``) or a provenance record.
    """
    record = table.attrs.get("provenance") if isinstance(table, pd.DataFrame) else table
    if not record:
        raise ValueError("the table carries no provenance (read it with load_frozen).")
    return (f"*Frozen table* ({record['description']}), made on {record['date']} with "
            f"`{record['command']}` at code version {shown_version(record['commit'])}.")


def shown_version(commit) -> str:
    """A code version as the book prints it: ```abc1234```, or ```abc1234` with uncommitted changes``.

    Older tables were frozen from a working tree with uncommitted changes (``code_version``'s
    "+dirty"): said in words rather than shown as a version a reader could check out as it ran.
    """
    commit = str(commit)
    return f"`{commit[:-len('+dirty')]}` with uncommitted changes" if commit.endswith("+dirty") else f"`{commit}`"


def write_frozen(
    df: pd.DataFrame,
    name: str,
    *,
    command: str,
    description: str,
    folder: str | os.PathLike | None = None,
    **extra,
) -> Path:
    """Write ``df`` as a frozen table with its provenance (CSV and JSON together: both, or neither).

    Parameters
    ----------
    df : DataFrame
        The table (written without its index).
    name : str
        Table name (file stem).
    command : str
        The command that produced the table, as a user would type it.
    description : str
        One line: what the table holds (protocol, data sets, methods).
    folder : path-like, optional
        Target folder; defaults to the package's ``book/frozen_tables`` folder (in a source checkout).
    **extra
        Further JSON-serialisable provenance fields (e.g. ``wall_seconds``); ``commit`` names the code
        of a run made elsewhere (default: this checkout's :func:`~minitorch_proto.about.code_version`).

    Raises
    ------
    ValueError
        If ``commit`` is not a git hash (a tree that is no git checkout has no version a reader could
        look up), or when writing into the package (no ``folder``) from code with uncommitted changes.

    Returns
    -------
    Path
        The CSV file written.
    """
    name = _check_name(name)
    if not command.strip() or not description.strip():
        raise ValueError("a frozen table needs the command that made it and a description.")
    commit = str(extra.pop("commit", None) or code_version())
    if not _COMMIT.fullmatch(commit):
        raise ValueError(f"{name}: {commit!r} is not a code version (a git hash): freeze from a git checkout, "
                         "or pass commit=<hash> for a run made elsewhere.")
    if folder is None and commit.endswith("+dirty"):
        raise ValueError(f"{name}: the code has uncommitted changes ({commit}); a frozen table names the code "
                         "that made it, which a reader must be able to check out: commit, then freeze.")
    target = Path(folder) if folder is not None else Path(str(frozen_dir()))
    text = df.to_csv(index=False)
    record = {
        "command": command,
        "commit": commit,
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d"),
        "description": description,
        "columns": list(map(str, df.columns)),
        **extra,
        "n_rows": len(df),
        "sha256": _digest(text),
    }
    meta = json.dumps(record, indent=2) + "\n"  # before anything is written: a value JSON cannot hold stops here
    csv_path = target / f"{name}.csv"
    write_together({csv_path: text, target / f"{name}.json": meta})
    return csv_path
