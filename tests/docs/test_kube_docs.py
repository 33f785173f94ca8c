"""docs/kubeplane.md's and docs/kubeflow.md's code runs as printed (on the local Kubernetes
plane), and docs/kubeflow.md's two tables are the adapter's own."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from console_blocks import marked_block
from live_kube import REPO, plane_env

from dispatch.adapters.kubeflow.meaning import ENDINGS, STATES

DOCS = REPO / "docs"


def test_kubeflow_md_prints_the_adapters_state_and_ending_tables() -> None:
    text = (DOCS / "kubeflow.md").read_text()
    states = "\n".join(
        f"| {s.when} | {s.state} | {s.cause} | {s.provenance} | "
        f"{'yes' if s.held_by_other else ''} |"
        for s in STATES
    )
    endings = "\n".join(f"| {e.when} | {e.cause} | {e.provenance} |" for e in ENDINGS)
    assert states in text
    assert endings in text


@pytest.mark.kube
def test_kubeplane_md_starts_the_plane_and_reads_it_as_printed() -> None:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", marked_block(DOCS / "kubeplane.md", "start")],
        capture_output=True,
        text=True,
        timeout=7200,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for node in ("n1", "n2", "n3", "n4"):
        assert re.search(rf"^{node}\s+Ready\b", done.stdout, re.M), done.stdout
    assert "status: OK" in done.stdout


@pytest.mark.kube
def test_kubeflow_md_opens_the_adapter_as_printed() -> None:
    env = {**os.environ, **plane_env()}
    done = subprocess.run(
        [sys.executable, "-c", marked_block(DOCS / "kubeflow.md", "open")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "yes probed\n"
