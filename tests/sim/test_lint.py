"""The lint over the simulated path passes, and fails on each kind of planted violation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dispatch.sim.lint import OFF_PATH, lint_paths, lint_simulated_path, lint_source

REPO = Path(__file__).resolve().parents[2]


def test_the_simulated_path_is_clean() -> None:
    assert [str(f) for f in lint_simulated_path(REPO)] == []


def test_what_the_lint_leaves_off_is_never_loaded_by_a_simulated_run() -> None:
    """The channels the lint skips are not imported by a seed's run, so no timer thread of
    theirs can make a run differ from its replay."""
    modules = [p.removesuffix(".py").replace("/", ".") for p in OFF_PATH]
    probe = (
        "import sys, tempfile\n"
        "from pathlib import Path\n"
        "from dispatch.sim.world import run_seed\n"
        "with tempfile.TemporaryDirectory() as d:\n"
        "    for seed in range(8):\n"
        "        run_seed(seed, Path(d))\n"
        f"print([m for m in {modules!r} if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
    # The probe would see one: the channels are importable and named right.
    loaded = subprocess.run(
        [sys.executable, "-c", f"import sys, {modules[-1]}; print({modules[-1]!r} in sys.modules)"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert loaded.stdout.strip() == "True"


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
