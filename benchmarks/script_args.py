"""Options several benchmark scripts share, read one way: ``--seeds`` (``0-9``, ``0,3,7`` or ``4``), lists of
whole numbers, counts, output paths, and the probes' ``DATASET [REPEATS]``.

Each is an argparse ``type=``, so a bad value ends the script at startup, before any data is loaded or model
trained, with one line and exit status 2 (:class:`Parser`)."""
from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path

# The package's command line reads counts and prints usage errors this way already: one home for each.
from minitorch_proto.book import frozen
from minitorch_proto.book.frozen import GIT_HASH
from minitorch_proto.cli_args import Parser, count, seed
from minitorch_proto.data.benchmarks import BENCHMARKS
from minitorch_proto.outputs import check_input_file, check_output_path

__all__ = ["FIVE", "Parser", "commit_hash", "count", "count_list", "digit", "digit_list", "freeze_commit",
           "full_run_gap", "input_file", "int_list", "output_file", "output_folder", "probe_arguments", "refuse_nan",
           "reproduce_defaults_gap", "run_record", "seed", "seed_list", "seed_option", "seed_text", "whole_numbers"]

#: The five benchmarks a full run covers, in the paper's order.
FIVE = tuple(BENCHMARKS)


def seed_list(text: str) -> list[int]:
    """Seeds from ``LO-HI`` (both included), a comma-separated list, or one seed.

    Raises
    ------
    ValueError
        With one line naming the forms accepted.
    """
    try:
        if "-" in text.strip().lstrip("-"):
            lo, hi = text.split("-")
            seeds = list(range(int(lo), int(hi) + 1))
        else:
            seeds = [int(s) for s in text.split(",")]
    except ValueError:
        raise ValueError(f"--seeds must be LO-HI, a list such as 0,3,7, or one seed; got {text!r}.") from None
    if not seeds:
        raise ValueError(f"--seeds {text!r} names no seed (LO must not exceed HI).")
    return seeds


def seed_option(text: str) -> list[int]:
    """:func:`seed_list` as an argparse type."""
    try:
        return seed_list(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--seeds ")) from None


def seed_text(seeds) -> str:
    """The ``--seeds`` text that names exactly ``seeds`` (``LO-HI`` when they run without a gap), for a
    frozen table's recorded command: the seeds its rows hold, not the option's value at freeze time."""
    ordered = sorted({int(s) for s in seeds})
    if not ordered:
        raise ValueError("no seeds to name.")
    if ordered == list(range(ordered[0], ordered[-1] + 1)) and len(ordered) > 1:
        return f"{ordered[0]}-{ordered[-1]}"
    return ",".join(map(str, ordered))


def int_list(text: str) -> list[int]:
    """Whole numbers separated by commas (``9,5``), e.g. MNIST target digits."""
    try:
        values = [int(t) for t in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of whole numbers") from None
    return values


def count_list(low: int):
    """:func:`int_list` of counts, each at least ``low`` (a sweep of sizes or process counts: a 0 would fail
    deep in a run, or divide by it)."""
    def parse(text: str) -> list[int]:
        values = int_list(text)
        if any(v < low for v in values):
            raise argparse.ArgumentTypeError(f"{text!r}: every value must be at least {low}")
        return values
    return parse


def digit(text: str) -> int:
    """An MNIST digit, 0 to 9 (a target digit; another number fails only after the images are loaded)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a digit from 0 to 9") from None
    if not 0 <= value <= 9:
        raise argparse.ArgumentTypeError(f"{text!r} is not a digit from 0 to 9")
    return value


def digit_list(text: str) -> list[int]:
    """MNIST digits separated by commas (``9,5``): target digits."""
    return [digit(t) for t in text.split(",")]


def whole_numbers(values) -> str:
    """The ``int_list`` text naming ``values`` in the order first met (``9,5``): a recorded option built from rows."""
    return ",".join(str(int(v)) for v in dict.fromkeys(values))


def _path_type(check, **how):
    """``check`` (of :mod:`minitorch_proto.outputs`) as an argparse type; argparse names the option."""
    def parse(text: str):
        try:
            return check(text, what="", **how)
        except (ValueError, FileNotFoundError) as exc:
            raise argparse.ArgumentTypeError(str(exc).strip()) from None
    return parse


#: An output file: refused at startup when it is a folder, lies under a file, or its folder cannot be written
#: (missing folders are made when it is written).
output_file = _path_type(check_output_path, kind="file")
#: An output folder: refused at startup when it is a file or cannot be created.
output_folder = _path_type(check_output_path, kind="dir")
#: An existing, non-empty, readable file.
input_file = _path_type(check_input_file)


def commit_hash(commit, source: str) -> str:
    """``commit`` when it is a plain git hash; a frozen table names code a reader can check out, so "unknown",
    "HEAD~1" or "+dirty" (uncommitted changes) are refused, naming ``source`` (where the value came from)."""
    if not re.fullmatch(GIT_HASH, str(commit)):
        raise ValueError(f"{source}: the code version must be a plain git commit hash (committed code), got {commit!r}")
    return str(commit)


def freeze_commit(parser: argparse.ArgumentParser) -> str:
    """This checkout's commit, for a freezer to read once right after its options and pass to every
    ``write_frozen``: read at the end of a long run it would name an edit or a commit made during the run, not
    the code that ran, and a tree with uncommitted changes would be refused only after all the work.

    A version that is no plain hash (``+dirty``, not a git checkout) ends the script with one line and exit
    status 2 (``parser.error``)."""
    try:
        # Looked up on the module at each call: the reading write_frozen makes, and what tests replace.
        return commit_hash(frozen.code_version(), "this checkout")
    except ValueError as exc:
        parser.error(f"{exc}; commit, then freeze")


def full_run_gap(rows, labels, repeats: int = 5, folds: int = 10) -> str | None:
    """What a full run (every method of ``labels`` x the five data sets x ``repeats`` x ``folds`` folds) holds and
    the per-fold ``rows`` lack, in one line naming the first cells short; None when nothing is missing."""
    if "evaluation" in rows.columns:
        rows = rows[rows["evaluation"] == "final"]
    want = {(r, f) for r in range(1, repeats + 1) for f in range(1, folds + 1)}
    short = []
    for label in labels:
        for name in FIVE:
            part = rows[(rows["method"] == label) & (rows["dataset"] == name)]
            cells = [(int(r), int(f)) for r, f in zip(part["repeat"], part["fold"], strict=True)]
            have = set(cells) & want
            if len(have) < len(want):
                short.append(f"{label} on {name} ({len(have)} of {len(want)} folds)")
            elif len(cells) != len(want):  # a fold twice, or folds beyond the protocol's, would weigh unevenly
                short.append(f"{label} on {name} ({len(cells)} rows for {len(want)} folds)")
    if not short:
        return None
    more = f"; and {len(short) - 6} more" if len(short) > 6 else ""
    return (f"not a full run ({len(short)} of {len(labels) * len(FIVE)} method x data set cells not exactly "
            f"{repeats} x {folds} folds): {'; '.join(short[:6])}{more}")


def run_record(folder) -> dict | None:
    """A ``reproduce`` output folder's ``run.json`` (None when it has none); a ValueError in one line when it is
    not a JSON object."""
    path = Path(folder) / "run.json"
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{path} is not readable JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(record, dict):
        raise ValueError(f"{path} is not a run record (a JSON {type(record).__name__}, not an object)")
    return record


#: ``reproduce``'s settings that change no row of its results: where it writes, what it prints, how the data are
#: fetched, the device (recorded beside the rows), and the methods and data sets (checked by the rows themselves).
_NOT_RESULTS = frozenset({"out", "quiet", "reported", "data_dir", "no_download", "no_verify", "download_timeout",
                          "device", "backend", "methods", "datasets"})


def reproduce_defaults_gap(record: dict) -> str | None:
    """The settings of a ``reproduce`` run (its ``run.json``) that differ from the command's defaults, named in
    one line; None when every setting that shapes the rows is the default (a frozen table made by the defaults
    must not take a run with another seed, epochs or rates)."""
    from minitorch_proto.cli import build_parser

    settings = record.get("settings")
    if not isinstance(settings, dict):
        return "its run.json records no settings, so the run cannot be shown to use reproduce's defaults"
    defaults = vars(build_parser().parse_args(["reproduce"]))
    changed = [f"{k}={settings[k]!r}" for k in sorted(settings)  # (the parser's own entries, e.g. func, are no setting)
               if k not in _NOT_RESULTS and k in defaults and not callable(defaults[k]) and settings[k] != defaults[k]]
    return f"not run with reproduce's defaults ({', '.join(changed)})" if changed else None


def refuse_nan(rows, columns) -> str | None:
    """The per-fold ``rows`` (method, dataset, repeat, fold) with no score in ``columns``, named in one line;
    None when every fold has one."""
    present = [c for c in columns if c in rows.columns]
    if not present:
        return f"no score column ({' or '.join(columns)}) in the rows"
    bad = rows[rows[present].isna().any(axis=1)]
    if bad.empty:
        return None
    cells = ["{} on {}: repeat.fold {}".format(method, dataset, ", ".join(
        f"{_whole(r)}.{_whole(f)}" for r, f in zip(part["repeat"], part["fold"], strict=True)))
        for (method, dataset), part in bad.groupby(["method", "dataset"], sort=False)]
    return f"{len(bad)} fold(s) with no score ({' or '.join(present)} is NaN): {'; '.join(cells)}"


def _whole(v):
    return int(v) if isinstance(v, float) and not math.isnan(v) and v == int(v) else v


def probe_arguments(doc: str) -> tuple[str, int]:
    """``DATASET [REPEATS]`` of the exploratory probes (a benchmark, and repetitions of 10-fold CV)."""
    parser = Parser(description=doc.splitlines()[0])
    parser.add_argument("dataset", choices=FIVE, help="a benchmark: " + ", ".join(FIVE))
    parser.add_argument("repeats", nargs="?", type=count(1), default=2,
                        help="repetitions of 10-fold CV (default 2)")
    args = parser.parse_args()
    return args.dataset, args.repeats
