"""The book's one ranking (``book.one_ranking``) and the pages' rank statements against it.

Unit tests build the table from small frames with ranks worked out by hand. The consistency
test reads every page (``book/*.md``, the markdown cells of ``notebooks/*.ipynb``), finds the
sentences that state a method's rank ("places 3 of 24", "ranks 2", "is first", "average rank
6.0", "3/24 by average rank", "two places above X") and fails when one disagrees with the table.
Ranks that pages compute (code cells, glued verdicts) come from the table itself.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from minitorch_proto.book import RANKING_TABLES, one_ranking, rank_of, ranking_rows, ranking_verdict
from minitorch_proto.evaluation.cv import RESULT_COLUMNS
from minitorch_proto.methods import METHODS

REPO = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------------------------
# one_ranking on small frames
# ----------------------------------------------------------------------------------------------
def _results(acc: dict) -> pd.DataFrame:
    """acc[(method, dataset)] = per-repetition lists of fold accuracies."""
    rows = []
    for (method, dataset), reps in acc.items():
        for r, folds in enumerate(reps, start=1):
            for f, a in enumerate(folds, start=1):
                rows.append(dict(dataset=dataset, method=method, evaluation="final", repeat=r, fold=f,
                                 seed=100 * r + f, n_train=9, n_test=1, epoch=np.nan, accuracy=a, auc=a,
                                 fit_seconds=0.1))
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def _small():
    # Musk1 means: prototype .75, attention .7, miles .9   -> ranks 2, 3, 1
    # Fox means:   prototype .5,  attention .7, miles .7   -> ranks 3, 1.5, 1.5
    # average:     prototype 2.5, attention 2.25, miles 1.25
    ranked = _results({
        ("prototype", "musk1"): [[1.0, 0.8], [0.6, 0.6]],
        ("prototype", "fox"): [[0.5, 0.5], [0.5, 0.5]],
        ("attention", "musk1"): [[0.7, 0.7], [0.7, 0.7]],
        ("attention", "fox"): [[0.6, 0.6], [0.8, 0.8]],
        ("miles", "musk1"): [[0.9, 0.9], [0.9, 0.9]],
        ("miles", "fox"): [[0.7, 0.7], [0.7, 0.7]],
    })
    shown = _results({("ladder rung '+ rates'", "musk1"): [[1.0, 1.0], [1.0, 1.0]],
                      ("ladder rung '+ rates'", "fox"): [[1.0, 1.0], [1.0, 1.0]]})
    return ranked, shown


def test_one_ranking_by_hand_on_a_small_frame():
    ranked, shown = _small()
    table = one_ranking(ranked, shown)
    assert list(table.columns) == ["Musk1", "Fox", "average rank", "place", "data sets", "budget"]
    assert list(table.index) == ["MILES", "attention MIL", "prototype model (paper-faithful)",
                                 "ladder rung '+ rates'"]
    assert table["average rank"].iloc[:3].tolist() == [1.25, 2.25, 2.5]
    assert table["place"].iloc[:3].tolist() == [1, 2, 3]
    # the unranked rung is better than everything yet changes no rank
    assert pd.isna(table.at["ladder rung '+ rates'", "average rank"])
    assert pd.isna(table.at["ladder rung '+ rates'", "place"])
    assert table.attrs["n_ranked"] == 3
    assert table.at["prototype model (paper-faithful)", "Musk1"] == "0.750 ± 0.150"
    assert table.at["ladder rung '+ rates'", "budget"].startswith("fixed ladder rung")
    assert rank_of(table, "attention MIL") == (2, 3, 2.25)
    with pytest.raises(ValueError):
        rank_of(table, "ladder rung '+ rates'")


def test_tied_rows_share_the_better_place_and_the_verdict_agrees():
    ranked = _results({
        ("prototype", "musk1"): [[0.9, 0.9]], ("prototype", "fox"): [[0.5, 0.5]],   # ranks 1, 2 -> 1.5
        ("attention", "musk1"): [[0.5, 0.5]], ("attention", "fox"): [[0.9, 0.9]],   # ranks 2, 1 -> 1.5
        ("miles", "musk1"): [[0.1, 0.1]], ("miles", "fox"): [[0.1, 0.1]],           # 3, 3 -> 3
    })
    table = one_ranking(ranked)
    assert table["place"].tolist() == [1, 1, 3]
    ranks = table["average rank"].dropna()
    assert "best average rank" in ranking_verdict(ranks, "attention MIL")
    assert "places 3 of 3" in ranking_verdict(ranks, "MILES")
    # A tie at the top is said, so two sentences do not each call their method "best" alone.
    tied = pd.Series({"a": 1.5, "b": 1.5, "c": 3.0})
    assert ranking_verdict(tied, "a") == "A has the best average rank (1.5, shared with b) of the 3 methods measured."
    assert ranking_verdict(pd.Series({"a": 1.0}), "a") == "A was the only method measured, so it has no rank among others."
    assert _errors("MILES places 3 of 3 by average rank; attention MIL is first.", table) == []


def test_the_frozen_one_ranking_holds_every_table_and_budget():
    ranked, rungs = ranking_rows()
    table = one_ranking()
    assert table.attrs["n_ranked"] == ranked["method"].nunique() == table["place"].notna().sum()
    assert len(table) == ranked["method"].nunique() + rungs["method"].nunique()
    for key in ("prototype", "prototype-compat", "prototype-tuned", "prototype-best", "prototype-monotone",
                "prototype-recommended", "miles", "attention"):
        assert METHODS[key].display in table.index
    assert "MILES (tuned on inner CV)" in table.index
    assert "attention MIL (5-seed ensemble, tuned on inner CV)" in table.index
    assert (table["data sets"] == 5).all()
    assert table["budget"].str.len().gt(0).all()
    assert set(RANKING_TABLES) >= {"measured_results", "baseline_common_budget", "ladder_results"}
    # ranks over the ranked rows only: 1..n, mean of n(n+1)/2 / n per data set
    n = table.attrs["n_ranked"]
    assert table["average rank"].sum() == pytest.approx((n + 1) / 2 * n, abs=0.05)


# ----------------------------------------------------------------------------------------------
# Rank statements in the pages
# ----------------------------------------------------------------------------------------------
_WORDS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "last": -1}
_NUM = r"(\d+|first|second|third|fourth|fifth|last)(?:st|nd|rd|th)?"
_PLACE = re.compile(rf"\b(?:places?|placed|ranks?|ranked|placing|ranking|comes?|came|is|stands?)\s+(?:in\s+)?{_NUM}"
                    rf"(?:\s+(?:of|among|out of)\s+(?:the\s+)?(\d+))?", re.I)
_SLASH = re.compile(r"\b(\d+)\s*/\s*(\d+)\b")
_AVG = re.compile(r"average rank(?:\s+of)?\s*\(?\s*(\d+(?:\.\d+)?)", re.I)
_BEST = re.compile(r"\bhas the best average rank\b", re.I)
_GAP = re.compile(r"\b(\d+|one|two|three|four|five)\s+places?\s+(above|below|ahead of|behind)\s+", re.I)
_SMALL = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5}


def _aliases(table: pd.DataFrame) -> dict[str, list[str]]:
    """Lower-case name -> the ranked rows it may mean (a base name means each of its budgets)."""
    ranked = [n for n in table.index if pd.notna(table.at[n, "place"])]
    out: dict[str, list[str]] = {}
    for name in ranked:
        out.setdefault(name.lower(), []).append(name)
        base = name.split(" (")[0] if not name.startswith("prototype model") else name
        if base != name:
            out.setdefault(base.lower(), []).append(name)
    for m in METHODS.values():  # registry keys and results labels name the same rows
        for row in out.get(m.display.lower(), []):
            for alias in (m.key, m.label):
                out.setdefault(alias.lower(), [])
                if row not in out[alias.lower()]:
                    out[alias.lower()].append(row)
        if m.display.startswith("prototype model (") and m.display.lower() in out:  # "the paper-faithful prototype model"
            inner = m.display[m.display.index("(") + 1:-1].split(":")[0]
            for alias in (inner, f"{inner} prototype model", f"{inner} model", m.label.partition(" (")[2][:-1]):
                if alias:
                    out.setdefault(alias.lower(), []).extend(out[m.display.lower()])
    return out


def _subject(text: str, aliases: dict[str, list[str]]) -> list[str] | None:
    """The rows named last (closest to the verb) in ``text``; the longest name on ties."""
    low, best = text.lower(), None
    for alias, rows in aliases.items():
        for hit in re.finditer(r"(?<![\w-])" + re.escape(alias) + r"(?![\w-])", low):
            key = (hit.end(), len(alias))
            if best is None or key > best[0]:
                best = (key, rows)
    return best[1] if best else None


def _sentences(text: str) -> list[str]:
    text = re.sub(r"```.*?```", " ", text, flags=re.S)          # code cells and directives
    text = re.sub(r"\{glue\}`[^`]*`", " ", text)                 # glued text is computed
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)          # links: keep their words
    text = re.sub(r"[*_`]", "", text)
    return [s.strip() for s in re.split(r"(?<=[.;!?])\s+|\n\s*\n|\n\s*[-*] ", text) if s.strip()]


def _errors(text: str, table: pd.DataFrame) -> list[str]:
    """Every rank statement of ``text`` that disagrees with ``table`` (one_ranking)."""
    aliases, n = _aliases(table), table.attrs["n_ranked"]
    places = {name: (int(p), float(r)) for name, p, r in zip(table.index, table["place"], table["average rank"])
              if pd.notna(p)}
    errors = []

    def check(sentence, start, ok, what):
        rows = _subject(sentence[:start], aliases)
        if rows is None:
            return
        if not any(ok(*places[r]) for r in rows):
            errors.append(f"{what} for {rows} disagrees with the one ranking: {sentence!r}")

    for s in _sentences(text):
        ranky = re.search(r"\brank|\bplace|\bfirst\b|\blast\b", s, re.I)
        if not ranky:
            continue
        for m in _PLACE.finditer(s):
            word, of = m.group(1).lower(), m.group(2)
            if not (re.search(r"rank|plac", m.group(0), re.I) or word in _WORDS):
                continue  # "is 3 ..." without rank words is not a rank statement
            place = _WORDS.get(word, None) if not word.isdigit() else int(word)
            if place is None or _subject(s[:m.start()], aliases) is None:
                continue  # no method named before it (e.g. a glued, computed subject)
            if of is not None and int(of) != n:
                errors.append(f"states {of} ranked rows, the one ranking has {n}: {s!r}")
                continue
            want = n if place == -1 else place
            check(s, m.start(), lambda p, r, want=want: p == want, f"place {word}")
        if re.search(r"\brank", s, re.I):
            for m in _SLASH.finditer(s):
                if _subject(s[:m.start()], aliases) is None:
                    continue
                if int(m.group(2)) != n:
                    errors.append(f"states {m.group(2)} ranked rows, the one ranking has {n}: {s!r}")
                else:
                    check(s, m.start(), lambda p, r, want=int(m.group(1)): p == want, f"place {m.group(0)}")
        for m in _AVG.finditer(s):
            value = float(m.group(1))
            digits = len(m.group(1).split(".")[1]) if "." in m.group(1) else 0
            check(s, m.start(), lambda p, r, v=value, d=digits: abs(round(r, d) - v) < 1e-9,
                  f"average rank {m.group(1)}")
        for m in _BEST.finditer(s):
            check(s, m.start(), lambda p, r: p == 1, "best average rank")
        for m in _GAP.finditer(s):
            k = _SMALL.get(m.group(1).lower()) or int(m.group(1))
            sign = -1 if m.group(2).lower() in ("above", "ahead of") else 1
            first, other = _subject(s[:m.start()], aliases), _subject(" " + s[m.end():m.end() + 120], aliases)
            if first and other and not any(places[a][0] - places[b][0] == sign * k for a in first for b in other):
                errors.append(f"gap of {k} places between {first} and {other} disagrees: {s!r}")
    return errors


def _page_texts(root: Path) -> dict[str, str]:
    texts = {p.relative_to(root).as_posix(): p.read_text() for p in sorted((root / "book").glob("*.md"))}
    for nb in sorted((root / "notebooks").glob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        texts[nb.relative_to(root).as_posix()] = "\n\n".join(
            "".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return texts


def _scan(root: Path, table: pd.DataFrame) -> list[str]:
    return [f"{page}: {e}" for page, text in _page_texts(root).items() for e in _errors(text, table)]


@pytest.fixture(scope="module")
def ranking():
    return one_ranking()


def test_every_rank_the_pages_state_is_the_one_ranking(ranking):
    assert _scan(REPO, ranking) == []


def test_the_statement_finder_agrees_with_correct_sentences(ranking):
    best = ranking.index[0]
    place, n, avg = rank_of(ranking, "prototype model (paper-faithful)")
    good = (f"The paper-faithful prototype model places {place} of {n} by average rank ({avg:.1f}). "
            f"{best} is first. {best} has the best average rank. MILES ranks {rank_of(ranking, 'MILES')[0]}.")
    assert _errors(good, ranking) == []
    # the registry's keys and labels name rows too; and glued or code text is not prose
    assert _errors(f"`miles (tuned on inner CV)` places {rank_of(ranking, 'MILES (tuned on inner CV)')[0]} "
                   f"of {n}.", ranking) == []
    assert _errors("{glue}`results.md::x` places 99 of 3. ```\nMILES places 99 of 3\n```", ranking) == []


@pytest.mark.parametrize("wrong", [
    "The rates-tuned prototype model places 9 of 12; MILES first.",     # the old 12-row ranking
    "MILES is first by average rank.",                                   # MILES rows are not first
    "The paper-faithful prototype model places 2 of {n}.",
    "The monotone variant prototype model has the best average rank.",
    "The paper-faithful prototype model has an average rank of 3.0.",
    "Paper-faithful 22/22 by average rank.",
    "mi-SVM ranks two places above the paper-faithful prototype model.",
])
def test_the_check_fails_on_a_wrong_sentence(ranking, wrong, tmp_path):
    wrong = wrong.replace("{n}", str(ranking.attrs["n_ranked"]))
    assert _errors(wrong, ranking), wrong
    # ... and the page scan fails on a temp copy of the book with the sentence put into a page
    for folder in ("book", "notebooks"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    page = tmp_path / "book" / "intro.md"
    page.write_text(page.read_text() + "\n\n" + wrong + "\n")
    found = _scan(tmp_path, ranking)
    assert found and all(e.startswith("book/intro.md:") for e in found)
