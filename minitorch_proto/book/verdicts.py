"""Short verdicts written from measured numbers, for the closing section of each book page.

Every function takes the tables a page has just computed and returns one to three plain
sentences (Markdown). The sentences are built from those numbers only, so a page's verdict can
never contradict its own outputs: when the numbers change, the words change with them.
:func:`show_verdict` shows one as an admonition box, and :func:`set_table_display` sets how
the pages' tables are printed.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..evaluation.cv import TIE_DIGITS

__all__ = [
    "REPRODUCED_TOLERANCE",
    "format_span",
    "reproduction_verdict",
    "selection_verdict",
    "ablation_verdict",
    "formulation_verdict",
    "own_data_verdict",
    "ranking_verdict",
    "ladder_verdict",
    "comparison_verdict",
    "ingredient_verdict",
    "unit_test_verdict",
    "to_html",
    "show_verdict",
    "set_table_display",
    "book_glue",
]

#: A measured mean counts as reproducing a reported accuracy when it is no further from it than
#: this many accuracy points or two standard errors of the measured mean, whichever is larger.
REPRODUCED_TOLERANCE = 0.02


def format_span(values: Sequence[float], signed: bool = False) -> str:
    """``"0.13"`` for one value (or equal values), ``"0.13 to 0.24"`` for several.

    Parameters
    ----------
    values : sequence of float
        Finite numbers; NaN values are ignored.
    signed : bool, default=False
        Print an explicit sign (``+0.05``), for changes.

    Returns
    -------
    str
        The smallest and largest value, two decimals each.

    Raises
    ------
    ValueError
        If no finite value is given.
    """
    arr = np.asarray([v for v in values if np.isfinite(v)], dtype=float)
    if arr.size == 0:
        raise ValueError("format_span needs at least one finite value.")
    fmt = "{:+.2f}" if signed else "{:.2f}"
    lo, hi = fmt.format(arr.min()), fmt.format(arr.max())
    return lo if lo == hi else f"{lo} to {hi}"


def _names(datasets: Sequence[str], display: Mapping[str, str] | None) -> str:
    shown = [(display or {}).get(d, d) for d in datasets]
    if len(shown) <= 2:
        return " and ".join(shown)
    return ", ".join(shown[:-1]) + " and " + shown[-1]


def _rows(summary: pd.DataFrame, method: str, evaluation: str) -> pd.DataFrame:
    needed = {"dataset", "method", "evaluation", "accuracy_mean"}
    missing = needed - set(summary.columns)
    if missing:
        raise ValueError(f"summary lacks the column(s) {sorted(missing)} (use cv.summarize on per-fold results).")
    rows = summary[(summary["method"] == method) & (summary["evaluation"] == evaluation)]
    if rows.empty:
        raise ValueError(f"summary has no rows for method {method!r} with evaluation {evaluation!r}.")
    return rows


def reproduction_verdict(
    summary: pd.DataFrame,
    reported: Mapping[str, tuple[float, float] | float],
    *,
    method: str,
    evaluation: str = "final",
    tolerance: float = REPRODUCED_TOLERANCE,
    display: Mapping[str, str] | None = None,
) -> str:
    """Whether measured accuracies reproduce reported ones, and by how much they differ.

    Parameters
    ----------
    summary : DataFrame
        Output of :func:`minitorch_proto.evaluation.cv.summarize` (``dataset``, ``method``,
        ``evaluation``, ``accuracy_mean``, optionally ``accuracy_se_repeats``).
    reported : mapping
        Data set -> reported accuracy (or ``(accuracy, spread)`` as in ``PAPER_TABLE2``).
    method, evaluation : str
        The measured row to judge.
    tolerance : float, default=:data:`REPRODUCED_TOLERANCE`
        Smallest distance (accuracy points) still counted as a reproduction.
    display : mapping, optional
        Data set -> name to print (e.g. ``"musk1" -> "Musk1"``).

    Returns
    -------
    str
        One or two sentences, e.g. "The reported accuracies were **not reproduced**: ...".

    Raises
    ------
    ValueError
        If the summary has no such row, or no data set of it has a reported value.
    """
    rows = _rows(summary, method, evaluation)
    gaps, within, names = [], [], []
    for _, row in rows.iterrows():
        if row["dataset"] not in reported:
            continue
        value = reported[row["dataset"]]
        ref = float(value[0] if isinstance(value, (tuple, list)) else value)
        se = float(row.get("accuracy_se_repeats", np.nan))
        allowed = max(tolerance, 2 * se) if np.isfinite(se) else tolerance
        gap = float(row["accuracy_mean"]) - ref
        gaps.append(gap)
        within.append(abs(gap) <= allowed)
        names.append(row["dataset"])
    if not gaps:
        raise ValueError(f"none of the measured data sets of {method!r} has a reported accuracy.")
    gaps_arr = np.asarray(gaps)
    n, n_ok = len(gaps), int(np.sum(within))
    below = gaps_arr < 0
    if n_ok == n:
        return (f"The reported accuracies **were reproduced** on {_names(names, display)}: the measured means "
                f"differ from them by {format_span(gaps_arr, signed=True)}.")
    failed = [d for d, ok in zip(names, within) if not ok]
    head = "was **not reproduced**" if n_ok == 0 else f"was reproduced on {n_ok} of {n} data sets only"
    if below.all():
        where = "on every data set" if n > 1 else f"on {_names(names, display)}"
        size = f"the measured accuracy is {format_span(-gaps_arr)} below the reported one {where}"
    elif n == 1:
        size = f"measured minus reported accuracy is {gaps_arr[0]:+.2f} on {_names(names, display)}"
    else:
        size = f"measured minus reported accuracy ranges over {format_span(gaps_arr, signed=True)}"
    mean = f" (mean difference {gaps_arr.mean():+.2f})" if n > 1 else ""
    return f"The reported accuracy {head}: {size}{mean}; not reproduced on {_names(failed, display)}."


def selection_verdict(
    summary: pd.DataFrame,
    *,
    method: str,
    honest: str = "final",
    selected: str = "test_selected",
    display: Mapping[str, str] | None = None,
) -> str:
    """How much letting the test fold choose the epoch moves a method's measured accuracy (up or down:
    the published code chooses by test AUC).

    Parameters
    ----------
    summary : DataFrame
        Output of ``summarize`` holding both evaluations of ``method``.
    method : str
        The method scored both ways.
    honest, selected : str
        The evaluation names of the honest score and of the test-fold-selected one.
    display : mapping, optional
        Data set -> name to print.

    Returns
    -------
    str
        One sentence.
    """
    a = _rows(summary, method, honest).set_index("dataset")["accuracy_mean"]
    b = _rows(summary, method, selected).set_index("dataset")["accuracy_mean"]
    common = [d for d in a.index if d in b.index]
    if not common:
        raise ValueError(f"no data set has both the {honest!r} and the {selected!r} evaluation.")
    gain = (b[common] - a[common]).to_numpy(dtype=float)
    name = (display or {}).get
    tail = "that part of a score is not an estimate for new data."
    if np.allclose(gain, 0.0):  # e.g. fewer epochs than the first checkpoint: nothing was chosen
        return f"Letting the test fold choose the epoch changed no accuracy here; {tail}"
    # It chooses by test AUC, so the accuracy it reports can also fall: say which way it moved.
    verb = "raises" if (gain >= 0).all() else "lowers" if (gain <= 0).all() else "changes"
    if len(common) > 1:
        top = common[int(np.argmax(np.abs(gain)))]
        where = f" (most on {name(top, top)})"
    else:
        where = f" (on {name(common[0], common[0])})"
    shown = format_span(np.abs(gain)) if verb == "lowers" else format_span(gain, signed=True)
    return f"Letting the test fold choose the epoch {verb} the accuracy by {shown}{where}; {tail}"


def ablation_verdict(
    deltas: pd.DataFrame,
    *,
    baseline: str,
    gap: float | None = None,
    z: float = 2.0,
    brief: bool = False,
) -> str:
    """What one-at-a-time changes are worth, from a table of paired accuracy changes.

    Parameters
    ----------
    deltas : DataFrame
        One row per (setting, dataset) with ``setting``, ``delta`` (mean paired change in
        accuracy) and optionally ``delta_se`` (its standard error).
    baseline : str
        The setting every change is measured against (left out of the verdict).
    gap : float, optional
        The accuracy gap the changes are judged against (e.g. reported minus measured baseline
        accuracy); when given, the verdict says whether the best change closes it.
    z : float, default=2.0
        A change is called clear when ``|delta| > z * delta_se``.
    brief : bool, default=False
        One sentence only: the comparison with ``gap`` when given, else the best and worst change.

    Returns
    -------
    str
        Two or three sentences.
    """
    missing = {"setting", "delta"} - set(deltas.columns)
    if missing:
        raise ValueError(f"deltas lacks the column(s) {sorted(missing)}.")
    rows = deltas[deltas["setting"] != baseline].drop_duplicates([c for c in ("setting", "dataset") if c in deltas])
    if rows.empty:
        raise ValueError("deltas holds no setting other than the baseline.")
    per_setting = rows.groupby("setting", sort=False)["delta"].mean()
    best, worst = per_setting.idxmax(), per_setting.idxmin()
    se = rows["delta_se"] if "delta_se" in rows else pd.Series(np.nan, index=rows.index)
    clear = rows[np.abs(rows["delta"]) > z * se.fillna(np.inf)]
    n_cells = len(rows)
    gain = (f"The largest gain is {per_setting[best]:+.3f} ({best})" if per_setting[best] > 0 else
            f"No setting raised accuracy (the best change is {per_setting[best]:+.3f}, {best})")
    loss = (f"the largest loss {per_setting[worst]:+.3f} ({worst})" if per_setting[worst] < 0 else
            f"none lowered it (the smallest change is {per_setting[worst]:+.3f}, {worst})")
    n_sets = rows["dataset"].nunique() if "dataset" in rows else 1
    over = "averaged over the data sets" if n_sets > 1 else "on its one data set"
    text = (f"{gain} and {loss}, {over}; {len(clear)} of {n_cells} measured changes are "
            f"larger than {z:g} standard errors.")
    if gap is None or not np.isfinite(gap):
        return text.split("; ")[0] + "." if brief else text
    if gap <= 0:
        closing = (f"There is no gap to close: the baseline is already at or above the paper's accuracy (baseline "
                   f"minus paper: {max(-gap, 0.0):+.2f}).")
    elif per_setting[best] >= gap:
        closing = f"The best single change ({best}, {per_setting[best]:+.3f}) is as large as the gap to the paper ({gap:.2f})."
    else:
        share = max(per_setting[best], 0.0) / gap
        closing = (f"No single change closes the gap of {gap:.2f} to the paper's accuracy: the best one "
                   f"({best}) covers {share:.0%} of it.")
    return closing if brief else f"{text} {closing}"


def formulation_verdict(
    four_bag_accuracy: float,
    larger_accuracy: float,
    mean_baseline_accuracy: float,
    concept_distance_start: float,
    concept_distance_end: float,
    concept_radius: float | None = None,
) -> str:
    """The toy problem's result: separation in distance space and where the prototypes went.

    Parameters
    ----------
    four_bag_accuracy : float
        Training accuracy of the prototype model on the four bags of Figure 1.
    larger_accuracy : float
        Training accuracy on the larger toy problem.
    mean_baseline_accuracy : float
        Training accuracy of a linear model on the bag means of the larger problem.
    concept_distance_start, concept_distance_end : float
        Distance from the concept point to its nearest prototype, before and after training.
    concept_radius : float, optional
        How close a prototype must end to have found the concept (e.g. a quarter of the toy
        data's ``offset``: nearer the concept than halfway to any other instance). The verdict
        says it found the concept only when the prototype ends within it and the larger problem
        is fitted (training accuracy at least 0.9); None (default) judges the distance alone
        against half the start.

    Returns
    -------
    str
        Two sentences.
    """
    radius = concept_distance_start / 2 if concept_radius is None else float(concept_radius)
    found = concept_distance_end <= radius and larger_accuracy >= 0.9
    if concept_distance_end < concept_distance_start:
        where = f"moved to within {concept_distance_end:.2f} of the concept point"
    else:
        where = f"ended {concept_distance_end:.2f} from the concept point"
    ending = ("so the model found the concept without instance labels." if found else
              f"so in this run the model did not find the concept (a prototype within {radius:.2f} of it and "
              "a training accuracy of at least 0.90 on the larger problem would count).")
    return (f"The prototype model fits the four bags of Figure 1 with training accuracy {four_bag_accuracy:.2f} and "
            f"the larger toy problem with {larger_accuracy:.2f}, where a linear model on the bag means reaches "
            f"{mean_baseline_accuracy:.2f}. The nearest prototype {where} (it started "
            f"{concept_distance_start:.2f} away), {ending}")


def own_data_verdict(
    summary: pd.DataFrame,
    *,
    method: str,
    baseline: str,
    held_out_accuracy: float,
    reload_identical: bool,
    display: Mapping[str, str] | None = None,
) -> str:
    """The walk-through's outcome: cross-validated accuracy against a baseline, held-out score, reload.

    Parameters
    ----------
    summary : DataFrame
        Output of ``summarize`` with rows for ``method`` and ``baseline`` (evaluation ``final``).
    method, baseline : str
        Method names in ``summary``.
    held_out_accuracy : float
        Accuracy of the final model on the held-out bags.
    reload_identical : bool
        Whether the saved and reloaded model predicts the same.
    display : mapping, optional
        Method -> name to print.

    Returns
    -------
    str
        Two sentences.
    """
    names = display or {}
    a = _rows(summary, method, "final").iloc[0]
    b = _rows(summary, baseline, "final").iloc[0]
    diff = float(a["accuracy_mean"] - b["accuracy_mean"])
    relation = "above" if diff > 0 else ("below" if diff < 0 else "level with")
    spread = a.get("accuracy_std_folds", np.nan)
    spread_text = "" if not np.isfinite(spread) else f" (standard deviation over folds {spread:.2f})"
    return (f"In cross-validation the {names.get(method, method)} scores {a['accuracy_mean']:.2f}{spread_text}, "
            f"{abs(diff):.2f} {relation} {names.get(baseline, baseline)} ({b['accuracy_mean']:.2f}); "
            f"the final model scores {held_out_accuracy:.2f} on the held-out bags. "
            f"The saved model {'reloads with identical predictions' if reload_identical else 'does NOT reload identically'}.")


def ranking_verdict(
    ranks: pd.Series,
    method: str,
    display: Mapping[str, str] | None = None,
) -> str:
    """Where one method stands among others by average rank (1 = best; tied methods share a place).

    Parameters
    ----------
    ranks : Series
        Method -> average rank over data sets (e.g. ``report.average_ranks``).
    method : str
        The method to place.
    display : mapping, optional
        Method -> name to print.

    Returns
    -------
    str
        One sentence.
    """
    if method not in ranks.index:
        raise ValueError(f"{method!r} is not among the ranked methods {list(ranks.index)}.")
    if pd.isna(ranks[method]):  # average_ranks gives NaN to a method missing a data set: it has no place
        raise ValueError(f"{method!r} has no average rank (it was not measured on every data set).")
    ranks = ranks.dropna()  # nor do the others without one: they are not counted among the ranked
    names = {m: names_[0].upper() + names_[1:] for m, names_ in (display or {}).items()}
    names.setdefault(method, method[0].upper() + method[1:])
    ordered = ranks.sort_values()
    place = int((ordered < ordered[method]).sum()) + 1  # tied methods share the better place
    best = ordered.index[0]
    if len(ordered) == 1:
        return f"{names.get(method, method)} was the only method measured, so it has no rank among others."
    if place == 1:
        tied = [m for m in ordered.index if m != method and np.isclose(ordered[m], ordered[method])]
        share = (f", shared with {_names([names.get(m, m) for m in tied], None)}" if tied else "")
        return (f"{names.get(method, method)} has the best average rank ({ordered.iloc[0]:.1f}{share}) "
                f"of the {len(ordered)} methods measured.")
    return (f"{names.get(method, method)} places {place} of {len(ordered)} by average rank ({ordered[method]:.1f}); "
            f"{names.get(best, best)} is first ({ordered.iloc[0]:.1f}).")


def ladder_verdict(table: pd.DataFrame, display: Mapping[str, str] | None = None) -> str:
    """Two or three sentences from a ladder table: which rungs helped clearly, and the end point.

    ``table`` comes from :func:`~minitorch_proto.evaluation.ladder.ladder_table`. A rung whose
    difference spans skipped rungs is credited under what it measures (its ``adds`` column,
    e.g. ``+ rates + distance``), not under its own name.
    """
    steps = list(dict.fromkeys(table["step"]))
    if len(steps) < 2:  # e.g. the page run with steps=["+ nested tuning"]: nothing to compare it with
        means = ", ".join(f"{(display or {}).get(ds, ds)} {g['mean'].iloc[0]:.3f}"
                          for ds, g in table.groupby("dataset", sort=False))
        return f"Only the rung '{steps[0]}' ran, so no rung is compared with another; its mean accuracy: {means}."
    clear_up, clear_down = [], []
    for step in steps[1:]:
        t = table[table["step"] == step]
        adds = t["adds"].dropna().unique() if "adds" in t else []
        label = str(adds[0]) if len(adds) == 1 else step
        up = t[(t["diff"] > 2 * t["diff_se"])]
        down = t[(t["diff"] < -2 * t["diff_se"])]
        if len(up) >= (len(t) + 1) // 2 and len(up) > 0:
            clear_up.append(f"{label} ({len(up)}/{len(t)})")
        if len(down) >= (len(t) + 1) // 2 and len(down) > 0:
            clear_down.append(f"{label} ({len(down)}/{len(t)})")
    first, last = steps[0], steps[-1]
    gains = []
    for ds, g in table.groupby("dataset", sort=False):
        a, b = g[g["step"] == first]["mean"], g[g["step"] == last]["mean"]
        if len(a) and len(b):
            gains.append(((display or {}).get(ds, ds), float(b.iloc[0] - a.iloc[0])))
    text = []
    if clear_up:
        text.append("Rungs that raised accuracy by more than two standard errors of the paired difference on at "
                    "least half of the data sets: " + ", ".join(clear_up) + ".")
    else:
        text.append("No rung raised accuracy by more than two standard errors on at least half of the data sets.")
    if clear_down:
        text.append("Rungs that lowered it as clearly: " + ", ".join(clear_down) + ".")
    if gains:
        text.append(f"From '{first}' to '{last}' the mean accuracy changed by "
                    + ", ".join(f"{d} {v:+.3f}" for d, v in gains) + ".")
    return " ".join(text)


def comparison_verdict(table: pd.DataFrame, display: Mapping[str, str] | None = None, margin: float = 0.02,
                       subject: str = "The tuned ensemble", against: str = "the best measured baseline") -> str:
    """One or two sentences from :func:`~minitorch_proto.evaluation.ladder.best_baseline_comparison`: where the method matches the best baseline.

    ``subject`` names the method and ``against`` the baselines it is compared with.
    """
    name = lambda d: (display or {}).get(d, d)  # noqa: E731
    diffs = table["diff"].astype(float).round(TIE_DIGITS)  # a true tie summed in another order is not "below"
    # Sorted by the difference as printed (3 decimals): -0.0203 is "-0.020", within a margin of 0.02.
    shown = diffs.round(3)
    at_or_above = [name(d) for d, v in zip(table["dataset"], diffs) if v >= 0]
    within = [name(d) for d, v, s in zip(table["dataset"], diffs, shown) if v < 0 and s >= -margin]
    below = [f"{name(d)} ({s:+.3f})" for d, s in zip(table["dataset"], shown) if s < -margin]
    missing = [name(d) for d, v in zip(table["dataset"], diffs) if not np.isfinite(v)]
    n = len(table)
    text = [f"{subject} is at or above {against} on {len(at_or_above)} of {n} data sets"
            + (f" ({', '.join(at_or_above)})" if at_or_above else "") + ","
            + f" within {margin:.2f} below it on {len(within)}" + (f" ({', '.join(within)})" if within else "")
            + f", and further below on {len(below)}" + (f": {', '.join(below)}" if below else "") + "."]
    if missing:
        text.append(f"No difference could be measured on {len(missing)} ({', '.join(missing)}).")
    return " ".join(text)


def ingredient_verdict(table: pd.DataFrame, display: Mapping[str, str] | None = None, *,
                       recipe: str = "the shipped recipe") -> str:
    """One or two sentences from :func:`~minitorch_proto.book.ranking.recommended_ablation_table`.

    ``recipe`` names the recipe the rows were ablated from (the table's first row).

    Rows whose label starts with "-" take an ingredient out: they are listed from the costliest
    (most negative mean paired difference), each with the data sets where taking it out clearly
    hurt or clearly helped (a paired difference beyond two of its standard errors, from
    ``attrs["diff_se"]``; smaller ones are not told apart from noise). The other rows (changes and
    additions) follow with their mean difference. Rows are named by their label up to its first
    bracket ("- push (prototypes left ...)" is "push").
    """
    name = lambda d: (display or {}).get(d, d)  # noqa: E731
    short = lambda r: r.lstrip("- ").split(" (")[0]  # noqa: E731
    diff, se = table.attrs["diff"], table.attrs["diff_se"]
    mean = diff.mean(axis=1).sort_values()
    removals = [r for r in mean.index if r.startswith("-")]
    others = [r for r in mean.index if not r.startswith("-")]

    def clearly(r: str, sign: int) -> list[str]:
        return [name(d) for d, v in diff.loc[r].items() if sign * v > 2 * se.at[r, d]]

    parts = []
    for r in removals:
        said = [f"{verb} {', '.join(sets)}" for verb, sets in (("hurt", clearly(r, -1)), ("helped", clearly(r, 1)))
                if sets]
        parts.append(f"'{short(r)}' {mean[r]:+.3f} ({'; '.join(said) if said else 'nowhere beyond two SE'})")
    text = [f"Taking one ingredient out of {recipe} changes the mean accuracy over the {diff.shape[1]} "
            f"benchmarks by (in brackets, where taking it out hurt or helped by more than two SE): "
            + "; ".join(parts) + "."] if parts else []
    if others:
        text.append("Other changes: " + "; ".join(f"'{short(r)}' {mean[r]:+.3f}" for r in others) + ".")
    return " ".join(text)


def unit_test_verdict(summary: pd.DataFrame, display: Mapping[str, str] | None = None) -> str:
    """One or two sentences on which models pass every test on every seed.

    ``summary`` comes from :func:`~minitorch_proto.evaluation.mil_unit_tests.summarize_unit_tests`;
    ``display`` maps model names to the names to print (default: the names themselves).
    """
    if summary.empty:
        raise ValueError("the unit-test summary is empty.")
    name = (lambda m: display.get(m, m)) if display else (lambda m: m)
    per_model = summary.groupby("model", sort=False).agg(all_passed=("passed", "all"), n_tests=("test", "nunique"),
                                                           n_seeds=("n_seeds", "min"))
    tests = int(per_model["n_tests"].max())
    # "all N tests" only for a model run on all of them: one that passed the one test it ran does not.
    good = [name(m) for m in per_model.index[per_model["all_passed"] & (per_model["n_tests"] == tests)]]
    seeds = int(per_model["n_seeds"].min())
    n_seeds = seeds if seeds == per_model["n_seeds"].max() else f"{seeds} or more"
    # Plural and singular as counted: "1 model passes the 1 test on its 1 seed" reads as a sentence.
    models = f"{len(good)} of {len(per_model)} models pass" if len(per_model) > 1 else \
        f"{len(good)} of 1 model passes"
    what = f"all {tests} tests" if tests > 1 else "the one test"
    on = f"on every one of {n_seeds} seeds" if n_seeds != 1 else "on its one seed" if len(per_model) == 1 \
        else "on one seed"
    head = f"{models} {what} {on}"
    if good:
        return head + ": " + ", ".join(good) + "."
    return head + "."


def to_html(text: str) -> str:
    """Inline HTML of a verdict (``**bold**`` and ``code`` marks), for pasting into other pages."""
    import html
    import re

    out = html.escape(text, quote=False)
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", out)


def show_verdict(text: str | Sequence[str], title: str = "Verdict"):
    """A computed verdict as an admonition box, for ``display(show_verdict(verdict))``.

    The box uses the classes of Sphinx admonitions (``admonition important``), so the book's
    theme draws it like a ``{important}`` directive; in JupyterLab or Colab, which do not know
    those classes, it still reads as a bold title over a paragraph.

    Parameters
    ----------
    text : str or sequence of str
        The verdict (Markdown with ``**bold**`` and ``code`` marks only, see :func:`to_html`);
        several strings become one paragraph each.
    title : str, default="Verdict"
        The box's title (escaped).

    Returns
    -------
    IPython.display.HTML
        The admonition (returned, not displayed, so a cell that ends with the call shows it once).
    """
    import html

    from IPython.display import HTML

    paragraphs = [text] if isinstance(text, str) else list(text)
    body = "".join(f"<p>{to_html(p)}</p>" for p in paragraphs)
    return HTML(f'<div class="admonition important"><p class="admonition-title"><strong>{html.escape(title, quote=False)}'
                f"</strong></p>{body}</div>")


def set_table_display(precision: int = 3) -> None:
    """Set pandas' display options for the book's tables: every column, every character.

    pandas cuts strings longer than 50 characters to ``...`` and drops middle columns of wide
    tables; on a page, a cut label or a ``...`` column reads as a lost result. The book's
    stylesheet lets long text wrap and wide tables scroll, so nothing needs cutting.

    Parameters
    ----------
    precision : int, default=3
        Decimals of floats (``display.precision``).
    """
    pd.set_option("display.precision", precision, "display.max_colwidth", None, "display.max_columns", None)


def book_glue(name: str, value) -> None:
    """Store ``value`` under ``name`` for other pages of the book (MyST-NB ``glue``), shown nowhere here.

    Strings are stored as inline HTML (see :func:`to_html`), numbers as numbers (so a page can
    format them, e.g. ``{glue:text}`page.ipynb::name:.2f```), tables as their HTML. Outside a
    book build (no ``myst_nb`` installed, e.g. on Colab) this does nothing.
    """
    try:
        from myst_nb import glue
    except ImportError:  # the book's tools are not installed: nothing reads the value
        return
    if isinstance(value, str):
        from IPython.display import HTML

        value = HTML(to_html(value))
    glue(name, value, display=False)
