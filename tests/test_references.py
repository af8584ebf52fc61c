"""The bibliography renders each arXiv identifier once per entry and once overall.

The book's style (pybtex ``plain``) prints both an entry's ``url`` and its ``eprint``, so an arXiv
id given in both appears twice in the rendered reference; two entries with the same id are the
same work listed twice.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pybtex = pytest.importorskip("pybtex.database")

BIB = Path(__file__).resolve().parents[1] / "book" / "references.bib"
ARXIV_ID = re.compile(r"\b(\d{4}\.\d{4,5})\b")
RENDERED = ("url", "eprint", "note", "journal", "howpublished")


def test_no_arxiv_id_is_rendered_twice():
    owners: dict[str, list[str]] = {}
    for key, entry in pybtex.parse_file(str(BIB)).entries.items():
        found = [m for field, value in entry.fields.items() if field.lower() in RENDERED
                 for m in ARXIV_ID.findall(str(value))]
        assert len(found) == len(set(found)), f"{key}: arXiv id(s) {found} rendered more than once"
        for arxiv_id in set(found):
            owners.setdefault(arxiv_id, []).append(key)
    shared = {i: keys for i, keys in owners.items() if len(keys) > 1}
    assert not shared, f"entries sharing an arXiv id: {shared}"
