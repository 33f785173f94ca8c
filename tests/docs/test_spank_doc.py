"""docs/spank.md's commands run as written, on this machine and the live local cluster.

The administrator's paths are mapped to scratch folders (the plugin's destination and the
spool) or to the local cluster's own spool; nothing else of a command changes. The plugstack
line the page shows is the one ``localcluster up --spank`` loads, up to those paths.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import live_cluster
import pytest
from console_blocks import marked_block

pytestmark = pytest.mark.live

DOC = live_cluster.REPO / "docs" / "spank.md"
SO = "/usr/lib/x86_64-linux-gnu/slurm-wlm/dispatch_spank.so"
SPOOL = "/shared/dispatch-spool"


def block(name: str) -> str:
    return marked_block(DOC, name)


def bash(script: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=live_cluster.REPO,
        env=env,
    )
    assert done.returncode == 0, f"{script}\n{done.stdout}{done.stderr}"
    return done.stdout


def test_the_install_commands_build_the_plugin_and_make_the_spool(tmp_path: Path) -> None:
    so, spool = tmp_path / "lib" / "dispatch_spank.so", tmp_path / "spool"
    so.parent.mkdir()
    bash(block("install").replace(SO, str(so)).replace(SPOOL, str(spool)))
    assert so.is_file() and so.stat().st_mode & 0o777 == 0o755
    st = spool.stat()
    assert (st.st_uid, st.st_mode & 0o7777) == (0, 0o1733)


def test_the_plugstack_line_is_the_one_the_local_cluster_loads() -> None:
    subprocess.run(
        [str(live_cluster.LOCALCLUSTER), "up", "--spank"], check=True, capture_output=True
    )
    env = live_cluster.cluster_env()
    state = Path(env["LOCALCLUSTER_STATE"])
    loaded = (state / "etc" / "plugstack.conf").read_text().splitlines()[-1]
    loaded = loaded.replace(str(state / "lib" / "dispatch_spank.so"), SO)
    assert loaded.replace(env["LOCALCLUSTER_SPANK_SPOOL"], SPOOL) == block("plugstack").strip()


def test_the_check_commands_show_the_marker_and_both_nodes_records() -> None:
    subprocess.run(
        [str(live_cluster.LOCALCLUSTER), "up", "--spank"], check=True, capture_output=True
    )
    env = live_cluster.cluster_env()
    script = block("check").replace(SPOOL, env["LOCALCLUSTER_SPANK_SPOOL"])
    out = bash(f"cd /tmp\n{script}", env={**os.environ, **env})
    assert out.startswith("format=1\nslurm=")
    assert out.count("ended=epilog\n") == 2
    assert len(set(re.findall(r"^node=(\S+)$", out, re.M))) == 2
