"""The one reading of a ``--seeds`` option for the benchmark scripts: ``0-9``, ``0,3,7`` or ``4``."""
from __future__ import annotations


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
