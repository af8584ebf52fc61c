"""Notebook parameters as the notebooks need them: what papermill and a user's edit may hand over.

``papermill -p datasets musk1`` passes a string where the notebook expects a list, and a user may
write ``"Musk1"`` where the tables are keyed ``"musk1"``. :func:`as_choices` turns either into the
list the notebook expects and refuses an unknown name in one line that names the parameter, before
any training, instead of a ``KeyError`` or an empty table after it; :func:`output_folder` does the
same for ``out_dir``.
"""
from __future__ import annotations

import numbers
import os
from pathlib import Path
from typing import Any, Iterable

import numpy as np

__all__ = ["as_choices", "count_param", "device_param", "flag_param", "method_keys", "output_folder", "seed_param",
           "seed_span"]


def as_choices(value: Any, name: str, allowed: Iterable | None = None, *, lower: bool = False) -> list:
    """A list parameter as a list of allowed values.

    Parameters
    ----------
    value : list, tuple, str or a single value
        The parameter as given; a string or any single value becomes a one-item list, and a
        string that reads as a list (``'["fox", "tiger"]'``, what ``papermill -p`` passes) that list.
    name : str
        The parameter's name, for the message.
    allowed : iterable, optional
        The valid values (kept in this order in the message); None: any.
    lower : bool, default=False
        Compare and return strings in lower case (benchmark names: ``"Musk1"`` is ``"musk1"``).

    Returns
    -------
    list
        In the order given, each value once (``[0, 0]`` is one seed, not two runs).

    Raises
    ------
    ValueError
        For an empty list or a value not in ``allowed``.
    """
    if isinstance(value, str) and value.strip().startswith("[") and value.strip().endswith("]"):
        value = _parse_list(value, name)
    values = [value] if isinstance(value, (str, bytes)) or not isinstance(value, Iterable) else list(value)
    if lower:
        values = [v.lower() if isinstance(v, str) else v for v in values]
    if not values:
        raise ValueError(f"parameter {name} is empty; give at least one value.")
    if allowed is not None:
        if isinstance(allowed, range):  # seeds, digits: checked by arithmetic, named by their bounds
            unknown = [v for v in values if not is_whole(v) or v not in allowed]
            valid = f"whole numbers from {allowed.start} to {allowed.stop - 1}"
        else:
            allowed = _once(allowed)
            unknown = [v for v in values if v not in allowed]
            valid = str(allowed)
        if unknown:
            raise ValueError(f"parameter {name}: unknown {unknown}; valid values are {valid}.")
    return _once(values)


def _once(values: Iterable) -> list:
    """Each value once, in order, by equality (as ``in`` compares; unhashable values are fine)."""
    once: list = []
    for v in values:
        if v not in once:
            once.append(v)
    return once


def is_whole(value: Any) -> bool:
    """An integer of Python or numpy, and not a bool (``True`` is an ``int`` to Python, not a count)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def method_keys(value: Any, name: str) -> list[str]:
    """A parameter naming registered methods, as their keys: a list, one key, ``"a,b"`` or ``"all"``.

    Every name is checked now, before any training (a misspelt method had failed only in the
    section that runs it); ``"all"`` and comma lists are expanded, repeats dropped.
    """
    from ..methods import resolve

    keys: list[str] = []
    for item in as_choices(value, name):
        try:
            methods = resolve(item)
        except ValueError as exc:
            raise ValueError(f"parameter {name}: {exc}") from None
        keys += [m.key for m in methods if m.key not in keys]
    return keys


def _parse_list(text: str, name: str) -> list:
    """``papermill -p datasets '["fox", "tiger"]'`` hands over the list as a string (``-y`` would not)."""
    import json

    try:
        parsed = json.loads(text)
    except ValueError:
        try:  # YAML (papermill's own dependency) also reads [fox, tiger]
            import yaml
            parsed = yaml.safe_load(text)
        except Exception:
            parsed = None
    if not isinstance(parsed, list):
        raise ValueError(f"parameter {name}: {text!r} looks like a list but does not parse; pass lists with "
                         "papermill -y, e.g. -y '{" + name + ": [a, b]}'.")
    return parsed


def output_folder(out_dir: str | os.PathLike | None, page: str) -> Path:
    """Where a page writes: ``out_dir``, else ``outputs/<page>`` below the working folder.

    Made (and checked writable) before any work, so a folder that cannot be used is a one-line
    error naming the parameter, not a traceback from the first file written after the training.
    """
    folder = Path(out_dir) if out_dir else Path("outputs") / page
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"parameter out_dir: cannot make the folder {str(folder)!r} "
                         f"({exc.strerror or exc}).") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"parameter out_dir: the folder {str(folder)!r} is not writable.")
    return folder


def seed_span(seeds) -> str:
    """Seeds as a reader would write them: ``"0-9"`` when they run without a gap, else ``"0, 7"``."""
    seeds = sorted({int(s) for s in seeds})
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def count_param(value: Any, name: str, minimum: int = 1) -> int:
    """A parameter that counts something (seeds, folds, epochs), as an int of at least ``minimum``;
    a one-line ValueError naming it otherwise (a list or 0 had failed cells later, or was read as 1)."""
    if not is_whole(value) or value < minimum:
        raise ValueError(f"parameter {name} is a count, a whole number of at least {minimum}; got {value!r}.")
    return int(value)


def flag_param(value: Any, name: str) -> bool:
    """A yes/no parameter as a bool: True or False, or the words ``true``/``false`` in any case.

    ``papermill -p flag false`` hands over the string ``"false"`` (only ``True`` and ``False`` become
    bools), which an ``if`` reads as True: the switch had been on when it was turned off.
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"parameter {name} is True or False; got {value!r}.")


def seed_param(value: Any, name: str = "seed") -> int:
    """A seed parameter as an int from 0 to 2**32 - 1 (numpy's range), checked before any work."""
    from ..validation import SEED_MAX

    if not is_whole(value) or not 0 <= value <= SEED_MAX:
        raise ValueError(f"parameter {name} is a seed, a whole number from 0 to {SEED_MAX}; got {value!r}.")
    return int(value)


def device_param(value: Any, name: str = "device") -> Any:
    """A device parameter, checked now (``"cpu"``, ``"cuda"``, ``"cuda:N"``, ``"auto"``) and returned as given:
    an unknown one had failed at the first fit of its kind, after other methods had run."""
    from ..utils import resolve_device  # torch: imported when a page asks, not with the parameters

    try:
        resolve_device(value)
    except ValueError as exc:
        raise ValueError(f"parameter {name}: {exc}") from None
    return value
