"""`publish resolve` on a POSIX checkpoint root starts without the S3 and Vault clients:
boto3 and hvac are imported by the S3 store and the Vault source alone (they were most of the
command's start-up time, and a job runs `publish resolve` at every start)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

_RESOLVE = """
import json, sys
from publish.cli import main
try:
    main(["resolve", "--store", sys.argv[1], "--epoch", "1000000"])
except SystemExit as end:
    code = end.code
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("boto3", "botocore", "hvac",
                                                                "requests", "s3transfer"))
print(json.dumps({"code": code, "heavy": heavy}))
"""


def test_resolve_on_a_posix_root_imports_no_s3_or_vault_client(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    root.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", _RESOLVE, str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["code"] == 3  # nothing published yet: resolve ran to its answer
    assert out["heavy"] == []


def test_the_s3_store_still_brings_its_client() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import sys, publish.s3_store; print('boto3' in sys.modules)"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.strip() == "True"
