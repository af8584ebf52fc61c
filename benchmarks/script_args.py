"""Options several benchmark scripts share, read one way: ``--seeds`` (``0-9``, ``0,3,7`` or ``4``)
and the probes' ``DATASET [REPEATS]``."""
from __future__ import annotations

import argparse


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


def seed_text(seeds) -> str:
    """The ``--seeds`` text that names exactly ``seeds`` (``LO-HI`` when they run without a gap), for a
    frozen table's recorded command: the seeds its rows hold, not the option's value at freeze time."""
    ordered = sorted({int(s) for s in seeds})
    if not ordered:
        raise ValueError("no seeds to name.")
    if ordered == list(range(ordered[0], ordered[-1] + 1)) and len(ordered) > 1:
        return f"{ordered[0]}-{ordered[-1]}"
    return ",".join(map(str, ordered))


def probe_arguments(doc: str) -> tuple[str, int]:
    """``DATASET [REPEATS]`` of the exploratory probes (a benchmark, and repetitions of 10-fold CV)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("dataset", help="a benchmark, e.g. fox")
    parser.add_argument("repeats", nargs="?", type=int, default=2, help="repetitions of 10-fold CV (default 2)")
    args = parser.parse_args()
    return args.dataset, args.repeats
