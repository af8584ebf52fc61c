"""What the command line reads: the benchmarks, a user's CSV or a bag folder, with the CLI's own wording.

Kept apart from :mod:`minitorch_proto.cli` (the commands and their options): each command
names its input with ``--dataset``, ``--csv`` or ``--bags-dir``, and every input error is one
line that names the option, the file and the fix.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import pandas as pd

from .data.csv_checks import label_wording
from .outputs import check_input_file

__all__ = ["data_provenance", "drop_notes", "flush_notes", "in_cli_words", "load_benchmark_for", "load_benchmarks",
           "load_data", "naming_bags", "refuse_overwriting_inputs"]


def load_benchmark_for(args, name: str, *, pathology: bool = False):
    """One benchmark (``pathology``: or a pathology set of :data:`~minitorch_proto.data.PATHOLOGY`, which
    ``--dataset`` also names), with the CLI's own wording when its checksum differs."""
    from .data import PATHOLOGY, ChecksumError, DownloadError, load_benchmark, load_pathology

    loader = load_pathology if pathology and str(name).strip().lower() in PATHOLOGY else load_benchmark
    try:
        return loader(name, data_dir=args.data_dir, download=not args.no_download,
                      verify=not getattr(args, "no_verify", False),
                      download_timeout=getattr(args, "download_timeout", None))
    except (ValueError, FileNotFoundError, DownloadError) as exc:  # the advice in the flags' words
        kind = type(exc) if type(exc) in (ChecksumError, FileNotFoundError, DownloadError) else ValueError
        text = in_cli_words(str(exc))
        if pathology and text.startswith("Unknown benchmark"):  # --dataset names the pathology sets too
            text = text.rstrip(".") + f"; or a pathology set: {', '.join(sorted(PATHOLOGY))}."
        raise kind(text) from None


def in_cli_words(text: str) -> str:
    """A loader's advice with the command line's flags for its arguments (data_dir=, download=False)."""
    text = re.sub(r"Call load_(benchmark|pathology)\([^)]*\)", "Drop --no-download", text)
    # A modified benchmark copy: the library points at read_mil_csv, the command line at --csv.
    text = re.sub(r"^(.*?) does not match (.*)Use read_mil_csv to read a modified copy\.$",
                  r"\1 does not match \2To use a modified copy, pass it as --csv \1 --no-header.", text, flags=re.S)
    for api, flag in _FLAG_WORDS:
        text = text.replace(api, flag)
    return text


#: Library argument names in messages the command line passes on, and the flags that set them.
_FLAG_WORDS = (("and download=False", "and --no-download was given"),
               ("(or pass data_dir=...)", "(or pass --data-dir)"),
               ("given by data_dir;", "given by --data-dir;"), ("pass verify=False", "add --no-verify"),
               ("fewer than n_folds=", "fewer than --folds "), ("lower n_folds", "lower --folds"),
               ("use backend='tensor' or 'auto'", "use --backend tensor or auto"),
               ("use device='cpu' or device='auto'", "use --device cpu or auto"),
               ("pooling must be a non-empty subset", "--pooling must be a non-empty subset"))


def _only_first_row_is_text(features: pd.DataFrame) -> bool:
    """Whether the first row alone holds feature cells that are not numbers (a header read as data)."""
    text = features.apply(pd.to_numeric, errors="coerce").isna() & features.notna()
    rows = text.any(axis=1).to_numpy()
    return bool(rows[0]) and rows.sum() == 1


def load_benchmarks(args, names: Sequence[str]) -> dict:
    """The benchmarks by their own (lower-case) names: Table 1 is looked up by that name, so "FOX" had trained
    with the default rates, and "fox FOX" ran twice into one row."""
    return {d.name: d for d in (load_benchmark_for(args, n) for n in dict.fromkeys(n.lower() for n in names))}


def refuse_overwriting_inputs(args) -> None:
    """A one-line error when ``--out`` or ``--heatmaps`` is one of the command's inputs.

    Writing there would replace the CSV, the model or the labels being read (or a bag file of
    ``--bags-dir``) with the results: the run would succeed and the input would be gone.
    """
    from .data.bag_files import FEATURE_SUFFIXES

    def where(p) -> Path:
        return Path(p).expanduser().resolve()

    bags_dir = getattr(args, "bags_dir", None)
    inputs = {flag: getattr(args, name, None) for flag, name in (("--csv", "csv"), ("--model", "model"))}
    inputs["--labels"] = _labels_path(args) if bags_dir else getattr(args, "labels", None)
    # These fill a folder with results.csv, summary.csv, run.json, ...: an input inside it could be among them.
    folders = {"--heatmaps"} | ({"--out"} if getattr(args, "command", None) in ("reproduce", "compare") else set())
    for out_flag, out in (("--out", getattr(args, "out", None)), ("--heatmaps", getattr(args, "heatmaps", None))):
        if not out:
            continue
        target = where(out)
        # cv --out also writes <name>.predictions.csv and <name>.run.json beside the CSV.
        written = {target} | ({target.with_name(target.stem + s) for s in (".predictions.csv", ".run.json")}
                              if getattr(args, "command", None) == "cv" and out_flag == "--out" else set())
        for flag, given in inputs.items():
            if given and where(given) in written:
                beside = "" if where(given) == target else f" (it writes {where(given).name} beside it)"
                raise ValueError(f"{out_flag} {out} would replace the {flag} file being read{beside}; "
                                 "choose another path.")
            if given and out_flag in folders and target in where(given).parents:
                raise ValueError(f"{flag} {given} is inside {out_flag} {out}, the folder this command fills with its "
                                 "results, which could replace it: choose another folder.")
        if bags_dir and (target == where(bags_dir) and out_flag == "--heatmaps" or
                         target.parent == where(bags_dir) and target.suffix.lower() in FEATURE_SUFFIXES):
            raise ValueError(f"{out_flag} {out} is inside --bags-dir {bags_dir}, among the bags being read; "
                             "choose another path.")


def data_provenance(data: dict) -> dict:
    """Per data set, for ``run.json``: the file or folder read, the file's sha256, and the counts."""
    from .data.download import sha256_of

    out = {}
    for name, d in data.items():
        source = getattr(d, "source", None) or getattr(d, "root", None)
        path = Path(source) if source else None
        sizes = d.sizes if hasattr(d, "sizes") else [len(b) for b in d.bags]
        out[name] = {"source": str(source) if source else None, "labels": str(getattr(d, "labels_path", "")) or None,
                     "sha256": sha256_of(path) if path is not None and path.is_file() else None,
                     "bags": len(d.y), "instances": int(sum(int(n) for n in sizes))}
    return out


def _labels_path(args) -> Path:
    """The labels file of ``--bags-dir``: ``--labels``, else the folder's own labels.csv."""
    return Path(args.labels) if args.labels else Path(args.bags_dir) / "labels.csv"


def load_data(args, labels: bool = True, feature_names: Sequence[str] | None = None):
    """The data set named by --dataset or --csv, and its feature names (None for benchmarks).

    With ``labels=False`` (predict) a CSV may lack the label column. With
    ``feature_names`` (a model's), the CSV's feature columns are matched by name:
    any order works; a missing or an extra column is an error. A file without a header
    (``--no-header``) has no names: its feature columns are the model's in order, and the
    column count is checked instead.
    """
    from .data import from_dataframe
    from .data.csv_checks import (
        check_header, check_row_widths, ids_as_written, looks_like_data, other_separator, read_labels,
    )
    from .data.readers import index_by_line, shown_names

    no_header = bool(getattr(args, "no_header", False))
    for flag, given in (("--no-header", no_header), ("--ignore-cols", getattr(args, "ignore_cols", None))):
        if given and not getattr(args, "csv", None):
            raise ValueError(f"{flag} describes a --csv file; this command reads no --csv.")
    bag_col = args.bag_col if args.bag_col is not None else ("1" if no_header else "bag")
    label_col = args.label_col if args.label_col is not None else ("0" if no_header else "label")
    if bag_col == label_col and not (no_header and args.label_col is None):  # that default is settled below
        raise ValueError(f"--bag-col and --label-col both name column {bag_col!r}; they must differ.")
    if not getattr(args, "bags_dir", None):
        for flag, given in (("--labels", getattr(args, "labels", None)),
                            ("--follow-links", getattr(args, "follow_links", False)),
                            ("--features-key", getattr(args, "features_key", None))):
            if given:
                raise ValueError(f"{flag} describes a --bags-dir folder; this command reads no --bags-dir.")
    if not getattr(args, "csv", None) and not getattr(args, "bags_dir", None):
        for flag, given in (("--bag-col", args.bag_col), ("--label-col", args.label_col)):
            if given is not None:
                raise ValueError(f"{flag} names a column of --csv or --labels; a benchmark's columns are fixed.")
    if getattr(args, "bags_dir", None):
        from .data.disk import DiskBagDataset

        bags_dir = Path(args.bags_dir)
        if not bags_dir.is_dir():
            raise ValueError(f"--bags-dir {bags_dir} is not a folder.")
        labels_path, key = _labels_path(args), getattr(args, "features_key", None) or "features"
        inside = bags_dir / labels_path
        if args.labels and not labels_path.exists() and not labels_path.is_absolute() and inside.is_file():
            raise ValueError(f"--labels {labels_path}: no such file (a relative path is read from the working "
                             f"directory); {inside} is: pass --labels {inside}, or leave --labels out.")
        if not labels and not labels_path.exists():  # predict and explain read only the ids
            if args.labels:
                raise ValueError(f"--labels {labels_path}: no such file; to predict, a CSV with just a 'bag' column "
                                 "naming each bag's file (without its suffix) is enough.")
            for flag, given in (("--bag-col", args.bag_col), ("--label-col", args.label_col)):
                if given is not None:  # it names a column of a labels file the folder does not have
                    raise ValueError(f"{flag} names a column of --labels, and --bags-dir {bags_dir} has no "
                                     "labels.csv; give the file with --labels, or leave out the flag.")
            # New slides come without labels: every feature file of the folder is a bag to score.
            ds = DiskBagDataset(bags_dir, None, follow_links=getattr(args, "follow_links", False), key=key)
            _note(f"--bags-dir {bags_dir} has no labels.csv: scoring every feature file in it ({len(ds)} bags).")
            return ds, None
        if labels and not args.labels and not labels_path.exists():
            raise ValueError(f"--bags-dir {bags_dir} has no labels.csv, and training needs one: a CSV with a 'bag' "
                             "column naming each bag's file (without its suffix) and a 'label' column (or name "
                             "another file with --labels).")
        check_input_file(labels_path, "--labels")
        # Predicting reads no labels: a blank or odd label column is no error then.
        ds = DiskBagDataset(bags_dir, labels_path, bag_col=bag_col, label_col=label_col if labels else None, key=key,
                            follow_links=getattr(args, "follow_links", False))
        if ds.unlisted:  # a stale or partial labels file reads no error
            _note(f"{len(ds.unlisted)} feature file(s) in --bags-dir {bags_dir} are not listed in {labels_path} and "
                  f"are not read ({', '.join(ds.unlisted[:3])}{' ...' if len(ds.unlisted) > 3 else ''}).")
        if labels and ds.y is None:
            raise ValueError(f"--labels {labels_path} has no label column {label_col!r} (columns: {ds.columns}); "
                             "name it with --label-col.")
        if labels:
            _check_label_column(ds.y, f"--labels {labels_path}", label_col)
        return ds, None
    if not getattr(args, "csv", None):
        return load_benchmark_for(args, args.dataset, pathology=True), None
    path = check_input_file(args.csv, "--csv")
    try:
        # Bag ids are names: read as text, so "007" and "7" stay two bags and come back as written.
        if no_header:
            if not bag_col.isdigit():
                raise ValueError(f"--bag-col {bag_col!r}: with --no-header columns are numbered from 0; give a number.")
            # Labels as written too ("01" and "1" are not one class), when this command reads them.
            text = {int(bag_col): str, **({int(label_col): str} if labels and label_col.isdigit() else {})}
            df = pd.read_csv(path, header=None, dtype=text)
            check_row_widths(df, f"--csv {path}")
            if int(bag_col) in df.columns:
                df[int(bag_col)] = ids_as_written(df, path, int(bag_col), header=None)
            if labels and label_col.isdigit() and int(label_col) in df.columns:
                df[int(label_col)] = read_labels(df, path, int(label_col), f"--csv {path}", header=None)
        else:
            df = pd.read_csv(path, dtype={bag_col: str, **({label_col: str} if labels else {})})
            check_row_widths(df, f"--csv {path}")
            check_header(path, df.columns, f"--csv {path}")
            if bag_col in df.columns:
                df[bag_col] = ids_as_written(df, path, bag_col)
            if labels and label_col in df.columns:
                df[label_col] = read_labels(df, path, label_col, f"--csv {path}")
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ValueError(f"--csv {path} is not a readable CSV: {str(exc).splitlines()[0]}") from None
    index_by_line(df, header=not no_header)
    columns = [str(c) for c in df.columns]
    df.columns = columns
    ignored = _ignored_columns(getattr(args, "ignore_cols", None), columns, path, bag_col, label_col)
    if ignored:  # before anything counts or names the columns: they are not part of the data
        df = df.drop(columns=ignored)
        columns = [c for c in columns if c not in ignored]
    if no_header and feature_names is not None:
        label_col = _headerless_layout(args, path, len(columns), len(feature_names), labels, label_col)
    if bag_col == label_col:
        raise ValueError(f"--bag-col and --label-col both name column {bag_col!r}; they must differ.")
    if bag_col not in columns:
        hint = "name it with --bag-col"
        if not no_header and looks_like_data(columns):
            hint = "its first row looks like data, not names: for a file without a header add --no-header"
        if other_separator(columns):
            hint = (f"the header reads as one column: the file seems separated by {other_separator(columns)!r}, and "
                    "the command line reads comma-separated files (convert it, or read it with "
                    "load_bags_csv(path, sep=...) in Python)")
        raise ValueError(f"--csv {path} has no bag column {bag_col!r} (columns: {shown_names(columns)}); {hint}.")
    if label_col not in columns and labels:
        raise ValueError(f"--csv {path} has no label column {label_col!r} (columns: {shown_names(columns)}); "
                         "name it with --label-col.")
    if not labels:
        # Predicting ignores labels: a placeholder (blank or mixed labels are no error), one reader for both cases.
        mixed = _mixed_labels(df, path, bag_col, label_col) if label_col in columns else None
        # concat, not assign or df[...] = : read_csv gives a wide file one block per column, and adding a column
        # to a frame of over 100 blocks prints pandas' two-line fragmentation warning.
        df = pd.concat([df.drop(columns=[label_col], errors="ignore"),
                        pd.DataFrame({label_col: 0}, index=df.index)], axis=1)
        if feature_names is None and not no_header:
            taken = [c for c in columns if c not in (bag_col, label_col)]
            _note(f"the model records no feature names (trained from a bag folder, or fitted without "
                  f"feature_names=), so the columns of --csv {path} other than {bag_col!r} and {label_col!r} are "
                  f"taken as its features in their order: {shown_names(taken)}; any other column, or columns in "
                  "another order, would be read wrongly.")
    others = [c for c in columns if c not in (bag_col, label_col)]
    if feature_names is not None and not no_header:  # without a header the columns are the model's in order
        # Sets: matching 100,000 columns by name must cost about as much as reading them.
        names = [str(n) for n in feature_names]
        present, wanted = set(others), set(names)
        missing = [n for n in names if n not in present]
        extra = [c for c in others if c not in wanted]
        if missing:
            hint = ""
            left_out = [n for n in missing if n in ignored]
            if left_out:  # the file has them: say what took them away
                raise ValueError(f"--ignore-cols leaves out {shown_names(left_out)}, feature(s) the model was trained "
                                 "on; ignore only columns the model does not use.")
            if all(n.isdigit() for n in names):  # column numbers: what a file without a header gives its columns
                hint = (" If the model was trained on a file without a header (its features are named by column "
                        "number), read this one with --no-header, its columns in the training file's order.")
            raise ValueError(f"--csv {path} is missing feature column(s) {shown_names(missing)} that the model was "
                             f"trained on.{hint}")
        if extra:
            raise ValueError(f"--csv {path} has column(s) {shown_names(extra)} that the model was not trained on; "
                             f"drop them, or name them with --ignore-cols (the model uses {len(names)} features).")
        others = names
    try:
        ds = from_dataframe(df, bag_col=bag_col, label_col=label_col, feature_cols=others, name=path.stem,
                            where=str(path))
    except ValueError as exc:  # the library's words name its arguments (y, feature_cols); the command line has none
        text = str(exc).replace(", or pass feature_cols=.", ", or leave them out with --ignore-cols.")
        message = label_wording(text, f"--csv {path}", label_col)
        if no_header and "not numeric" in message and _only_first_row_is_text(df[others]):
            message += " Its first row reads as names, not data: for a file with a header, drop --no-header."
        raise ValueError(message) from None
    if labels:
        _check_label_column(ds.y, f"--csv {path}", label_col)
    elif mixed:  # said once the file has read without an error, which would be its one line
        _note(mixed)
    trimmed: dict[str, str] = {}
    for bag_id in map(str, ds.bag_ids):  # ids stay as written; a spreadsheet's stray space splits a bag in two
        twin = trimmed.setdefault(bag_id.strip(), bag_id)
        if twin != bag_id:
            _note(f"--csv {path}: bag ids {twin!r} and {bag_id!r} differ only in surrounding spaces; they are read as "
                  "two bags.")
            break
    ds.source = str(path)
    return ds, others


def _check_label_column(y, where: str, label_col: str) -> None:
    """The labels a command will fit on, checked here so the message names the file and the column, not ``y``."""
    from .validation import check_labels

    try:
        _, classes = check_labels(y)
    except ValueError as exc:
        raise ValueError(label_wording(str(exc), where, label_col)) from None
    # Which class is "positive" is the sorted order's second: with names like cancer/healthy that is the
    # wrong one for the asymmetric methods (mi-SVM, mi-Net look for its witnesses), and nothing else says so.
    names = {str(c).lower() for c in classes.tolist()}
    if len(classes) > 2:  # a two-class study split by a typo would be fitted as three quietly
        shown = ", ".join(repr(np.asarray(c).item()) for c in classes[:8]) + (" ..." if len(classes) > 8 else "")
        _note(f"{where}: {len(classes)} classes: {shown}.")
    if len(classes) == 2 and names not in NATURAL_ORDER:
        positive = np.asarray(classes[1]).item()
        _note(f"{where}: {positive!r} is the positive class (the second of the labels in sorted order): "
              "mi-SVM and mi-Net look for its witnesses, and explanations are evidence for it; relabel "
              "(e.g. 0/1) if the other class is the positive one.")


def _ignored_columns(given: str | None, columns: list[str], path: Path, bag_col: str, label_col: str) -> list[str]:
    """The columns ``--ignore-cols`` names, each checked to be a column of the file and neither its bag nor its
    label column."""
    from .data.readers import shown_names

    if not given:
        return []
    # A name as typed when the file has it (" site"), else without the spaces around it ("f0, f1").
    names = [n if n in columns else n.strip() for n in given.split(",")]
    if not all(names):
        raise ValueError(f"--ignore-cols {given!r} has an empty name; separate column names with single commas.")
    unknown = [n for n in names if n not in columns]
    if unknown:
        raise ValueError(f"--ignore-cols names {shown_names(unknown)}, which --csv {path} does not have "
                         f"(columns: {shown_names(columns)}).")
    for role, col in (("bag", bag_col), ("label", label_col)):
        if col in names:
            raise ValueError(f"--ignore-cols names {col!r}, the {role} column; it cannot be left out.")
    return list(dict.fromkeys(names))


def _mixed_labels(df: pd.DataFrame, path: Path, bag_col: str, label_col: str) -> str | None:
    """A note for a file read for prediction whose bags' instances disagree in the label column; None otherwise.

    Predicting ignores labels, so nothing else would notice a file whose bag and label columns are swapped
    (a headerless ``bag, label, ...`` file read with --no-header's ``label, bag, ...``): its few "bags" are
    the label values, each mixing many real bags, and the predictions look like any others.
    """
    counts = df[label_col].groupby(df[bag_col], sort=False).nunique()  # blanks (NaN) are not counted
    mixed = counts[counts > 1]
    if not len(mixed):
        return None
    return (f"--csv {path}: {len(mixed)} of {len(counts)} bags hold instances with different values in the label "
            f"column {label_col!r} (bag {str(mixed.index[0])!r}: {int(mixed.iloc[0])} values); predicting ignores "
            "labels, but if that column holds the bag ids, the bag and label columns are swapped (--bag-col, "
            "--label-col).")


#: Notes about the inputs, held until the command has checked them (a bad input's error stays its one line):
#: train, cv and compare print them once the data are read, before the long work; predict and explain once
#: their table is written, since a bag that fails the model is met only while scoring. ``main`` drops them
#: on an error.
_PENDING: list[str] = []


def _note(message: str) -> None:
    """A note for standard error, from the first process only (under torchrun every process reads the inputs)."""
    if int(os.environ.get("RANK", "0")) == 0:
        _PENDING.append(message)


def flush_notes() -> None:
    """Print the notes held so far (see :data:`_PENDING`)."""
    for message in _PENDING:
        print(f"note: {message}", file=sys.stderr)
    _PENDING.clear()


def drop_notes() -> None:
    """Forget the notes held so far: the command failed, and its error is the one line to read."""
    _PENDING.clear()


#: Two-class labels whose sorted order already puts the positive class second.
NATURAL_ORDER = ({"0", "1"}, {"0.0", "1.0"}, {"-1", "1"}, {"-1.0", "1.0"}, {"false", "true"}, {"no", "yes"},
                 {"neg", "pos"}, {"negative", "positive"})


def _headerless_layout(args, path: Path, n_columns: int, n_features: int, labels: bool, label_col: str) -> str:
    """The label column of a headerless file read for a fitted model (a fresh name when the file has none).

    Without names, the column count is the only check: the model's features plus a bag column,
    plus a label column unless the bags are unlabelled (predict, explain).
    """
    if n_columns == n_features + 2:
        return label_col
    if n_columns == n_features + 1 and not labels:
        if args.bag_col is None:
            raise ValueError(f"--csv {path} has {n_columns} columns, one more than the model's {n_features} "
                             "features: either the bags are unlabelled (say which column holds the bag ids with "
                             "--bag-col, 0 if it comes first) or the file has a label column and lacks one of the "
                             f"model's features (then it does not match the model: every column after the gap "
                             "would be read as the feature before it).")
        if args.label_col is not None:
            raise ValueError(f"--csv {path} has {n_columns} columns, room for a bag column and the model's "
                             f"{n_features} features but not for --label-col {args.label_col}.")
        return "label"  # no column is called that: the bags are unlabelled
    wanted = f"{n_features + 2} (label, bag and {n_features} features)"
    if not labels:
        wanted += f" or {n_features + 1} (bag and features)"
    raise ValueError(f"--csv {path} has {n_columns} columns; the model needs {wanted}.")


@contextlib.contextmanager
def naming_bags(bag_ids) -> Iterator[None]:
    """Rewrite "bags[i]" in an error into the user's own bag id."""
    try:
        yield
    except ValueError as exc:
        ids = np.asarray(bag_ids)

        def name(m: re.Match) -> str:
            i = int(m.group(1))
            return f"bag {ids[i].item() if hasattr(ids[i], 'item') else ids[i]!r}" if i < len(ids) else m.group(0)

        text = re.sub(r"\bbags\[(\d+)\]", name, str(exc))
        if text == str(exc):
            raise
        raise ValueError(text) from None
