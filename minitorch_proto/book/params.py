"""Notebook parameters as the notebooks need them: what papermill and a user's edit may hand over.

``papermill -p datasets musk1`` passes a string where the notebook expects a list, and a user may
write ``"Musk1"`` where the tables are keyed ``"musk1"``. :func:`as_choices` turns either into the
list the notebook expects and refuses an unknown name in one line that names the parameter, before
any training, instead of a ``KeyError`` or an empty table after it.
"""
from __future__ import annotations

from typing import Any, Iterable

__all__ = ["as_choices"]


def as_choices(value: Any, name: str, allowed: Iterable | None = None, *, lower: bool = False) -> list:
    """A list parameter as a list of allowed values.

    Parameters
    ----------
    value : list, tuple, str or a single value
        The parameter as given; a string or any single value becomes a one-item list.
    name : str
        The parameter's name, for the message.
    allowed : iterable, optional
        The valid values (kept in this order in the message); None: any.
    lower : bool, default=False
        Compare and return strings in lower case (benchmark names: ``"Musk1"`` is ``"musk1"``).

    Returns
    -------
    list

    Raises
    ------
    ValueError
        For an empty list or a value not in ``allowed``.
    """
    values = [value] if isinstance(value, (str, bytes)) or not isinstance(value, Iterable) else list(value)
    if lower:
        values = [v.lower() if isinstance(v, str) else v for v in values]
    if not values:
        raise ValueError(f"parameter {name} is empty; give at least one value.")
    if allowed is not None:
        allowed = list(allowed)
        unknown = [v for v in values if v not in allowed]
        if unknown:
            raise ValueError(f"parameter {name}: unknown {unknown}; valid values are {allowed}.")
    return values
