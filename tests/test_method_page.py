"""The method page states Table 1's learning rates; they must be the ones the package runs."""
from __future__ import annotations

import re
from pathlib import Path

from minitorch_proto.paper import TABLE1

PAGE = Path(__file__).resolve().parents[1] / "book" / "method.md"


def test_the_learning_rate_table_is_table1():
    rows = {}
    for line in PAGE.read_text().splitlines():
        m = re.match(r"\|\s*(Musk1|Musk2|Fox|Tiger|Elephant)\s*\|\s*([0-9.e-]+)\s*\|\s*([0-9.e-]+)\s*\|", line)
        if m:
            rows[m.group(1).lower()] = {"lr_classifier": float(m.group(2)), "lr_prototypes": float(m.group(3))}
    assert rows == TABLE1
