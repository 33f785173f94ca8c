"""What the cluster answered to the probes (``scontrol show config``, ``sbatch --help``,
``sinfo --version``), kept between processes so one ``dispatch sbatch`` asks Slurm only
about its job.

An answer is kept in a private file under ``$XDG_CACHE_HOME/dispatch`` (else
``~/.cache/dispatch``), named by a digest of what it depends on: the command line, the folder of
the commands and their settings (``SLURM_CONF`` included), and the size, change time and inode
of the ``slurm.conf`` in force and of the program itself. A changed config or an upgraded Slurm
is therefore asked again at once; anything else (an ``Include``d file, a configless cluster) at
the latest ``KEEP`` after the answer was kept. Only commands run on this machine are kept (no
prefix, no ssh: their files are not visible here). Every failure to read or write the cache
just means asking Slurm.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

# How long a kept answer stands when nothing it depends on visibly changed: an admin's edit of
# an included file reaches a new process within this.
KEEP = 600.0
# Where slurm's commands read their config when SLURM_CONF is not set (Debian's build).
DEFAULT_CONF = "/etc/slurm/slurm.conf"


def folder() -> Path:
    """The cache folder: ``$XDG_CACHE_HOME/dispatch``, else ``~/.cache/dispatch``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dispatch"


def _stat(path: str | None) -> list[int]:
    if not path:
        return []
    try:
        st = os.stat(path)
    except OSError:
        return []
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def key(argv: Sequence[str], program: str, env: dict[str, str]) -> str:
    """The digest naming the kept answer of ``argv`` run as ``program`` with ``env``."""
    conf = env.get("SLURM_CONF") or os.environ.get("SLURM_CONF") or DEFAULT_CONF
    found = program if "/" in program else shutil.which(program, path=env.get("PATH"))
    parts = [list(argv), program, sorted(env.items()), conf, _stat(conf), found, _stat(found)]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def load(name: str, now: float | None = None) -> tuple[int, str, str] | None:
    """The kept (exit status, stdout, stderr) under ``name``, if younger than ``KEEP``."""
    try:
        data = json.loads((folder() / f"{name}.json").read_text())
        at, code, out, err = data["at"], data["code"], data["stdout"], data["stderr"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    age = (time.time() if now is None else now) - float(at)
    if not 0 <= age < KEEP or not isinstance(out, str) or not isinstance(err, str):
        return None
    return int(code), out, err


def store(name: str, code: int, stdout: str, stderr: str) -> None:
    """Keep an answer under ``name``: written whole (a temporary file renamed), private."""
    try:
        where = folder()
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
        text = json.dumps({"at": time.time(), "code": code, "stdout": stdout, "stderr": stderr})
        fd, tmp = tempfile.mkstemp(dir=where, prefix=".probe-")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.replace(tmp, where / f"{name}.json")
        except OSError:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        pass  # unkept: the next process asks Slurm again
