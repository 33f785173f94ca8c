"""The lint over the simulated path passes, and fails on each kind of planted violation."""

from __future__ import annotations

from pathlib import Path

import pytest

from dispatch.sim.lint import lint_paths, lint_simulated_path, lint_source

REPO = Path(__file__).resolve().parents[2]


def test_the_simulated_path_is_clean() -> None:
    assert [str(f) for f in lint_simulated_path(REPO)] == []


@pytest.mark.parametrize(
    ("source", "rule"),
    [
        ("import threading\nthreading.Thread(target=print).start()\n", "thread"),
        ("from concurrent.futures import ThreadPoolExecutor\n", "thread"),
        ("import time\nt = time.time()\n", "time"),
        ("from datetime import datetime\nt = datetime.now()\n", "time"),
        ("import random\nx = random.random()\n", "random"),
        ("from random import choice\n", "random"),
        ("import os\nb = os.urandom(4)\n", "random"),
        ("for x in {'a', 'b'}:\n    print(x)\n", "unordered"),
        ("ys = [x for x in set(['a'])]\n", "unordered"),
        ("for x in a.union(b):\n    pass\n", "unordered"),
    ],
)
def test_a_planted_violation_is_found(source: str, rule: str) -> None:
    assert [f.rule for f in lint_source(source, "planted.py")] == [rule]


def test_a_planted_file_fails_the_lint(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("import random\n\n\ndef pick(xs):\n    return random.choice(sorted(xs))\n")
    found = lint_paths([tmp_path], tmp_path)
    assert [(f.path, f.line, f.rule) for f in found] == [("planted.py", 5, "random")]


def test_allowed_forms_pass() -> None:
    source = (
        "import random\nimport threading\n"
        "rng = random.Random(1)\nmu = threading.Lock()\n"
        "for x in sorted({'a', 'b'}):\n    pass\n"
    )
    assert lint_source(source, "ok.py") == []
