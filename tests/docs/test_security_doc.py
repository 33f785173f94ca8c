"""docs/security.md names, for each defence, the tests that cover it: each name must be a test."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).parent.parent
DOC = TESTS.parent / "docs" / "security.md"


def test_every_test_the_security_page_names_exists() -> None:
    named = set(re.findall(r"\b(test_[a-z0-9_]+)\b(?!\.py)", DOC.read_text()))
    assert len(named) >= 20
    defined = {
        m
        for path in TESTS.rglob("test_*.py")
        for m in re.findall(r"^def (test_[a-z0-9_]+)\(", path.read_text(), re.M)
    }
    assert sorted(named - defined) == []
