"""Golden files for the renderers: compare, or rewrite them with SLURM_GOLDEN_UPDATE=1."""

from __future__ import annotations

import os
from pathlib import Path

GOLDEN = Path(__file__).parent / "golden"


def check_golden(name: str, text: str) -> None:
    """Assert ``text`` equals the golden file ``name`` (rewrite it when asked to)."""
    path = GOLDEN / name
    if os.environ.get("SLURM_GOLDEN_UPDATE") == "1":
        path.write_text(text)
    assert path.exists(), f"golden file {path} is missing; run with SLURM_GOLDEN_UPDATE=1"
    assert text == path.read_text()
