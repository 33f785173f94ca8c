"""Two real local users for the trust tests: ada (uid 2001), whose jobs, folders and spool
are attacked, and eve (uid 2002), another user of the same machine and cluster, without root.

Importable from any test folder, like ``live_cluster``. Each is a real passwd entry (Slurm
refuses a job of a uid without one), made the first time a test needs it when the host has
none: a system user of that uid and group, no home, no login shell. Their commands run as
that uid and gid alone (``setpriv``), with no supplementary groups.
"""

from __future__ import annotations

import fcntl
import functools
import os
import pwd
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ADA = 2001
EVE = 2002
_NAMES = {ADA: "dispatch-ada", EVE: "dispatch-eve"}
REPO = Path(__file__).resolve().parents[1]
# Where the users' own Python environment is made when theirs cannot be this run's.
USERS_VENV = REPO / ".state" / "users-venv"


def ensure(uid: int) -> pwd.struct_passwd:
    """The passwd entry of ``uid`` (ADA or EVE), made when the host has none."""
    try:
        return pwd.getpwuid(uid)
    except KeyError:
        pass
    with open("/run/dispatch-test-users.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return pwd.getpwuid(uid)
        except KeyError:
            pass
        name = _NAMES[uid]
        argv = ["useradd", "--uid", str(uid), "--user-group", "--no-create-home"]
        argv += ["--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name]
        subprocess.run(argv, check=True, capture_output=True)
    return pwd.getpwuid(uid)


def as_user(uid: int) -> list[str]:
    """The command prefix that runs what follows as ``uid``, with its own group only."""
    entry = ensure(uid)
    return ["setpriv", f"--reuid={uid}", f"--regid={entry.pw_gid}", "--clear-groups", "--"]


def run_as(
    uid: int, argv: list[str], env: dict[str, str], cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` as ``uid`` with exactly ``env``; what it did."""
    return subprocess.run(
        [*as_user(uid), *argv],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def give(path: Path, uid: int, mode: int) -> Path:
    """``path`` (and nothing below it) handed to ``uid``, with ``mode``."""
    os.chown(path, uid, ensure(uid).pw_gid)
    os.chmod(path, mode)
    return path


@contextmanager
def shared_place() -> Iterator[Path]:
    """A fresh folder both users can reach: root's, mode 0711 (they may pass through it, not
    list or write it), under the system's temporary folder; removed afterwards. Test folders
    under it are made by root and given to one user or the other."""
    place = Path(tempfile.mkdtemp(prefix="dispatch-users-"))
    os.chmod(place, 0o711)
    try:
        yield place
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(place)], check=False)


@functools.cache
def bin_folder() -> Path:
    """A folder of ``python3``, ``dispatch`` and ``publish`` that both users may run: this
    run's own when they can (a Python installed under a folder only root may enter cannot),
    else a virtual environment of the system's ``python3`` with this checkout installed in
    it, made once in ``.state/users-venv``."""
    here = Path(sys.executable).parent
    # Through a shell: setpriv itself still finds its program with root's rights.
    probe = [*as_user(ADA), "/bin/sh", "-c", f"exec {here / 'python3'} -c 'import publish'"]
    if subprocess.run(probe, capture_output=True, cwd="/", check=False).returncode == 0:
        return here
    bin_ = USERS_VENV / "bin"
    USERS_VENV.parent.mkdir(exist_ok=True)
    with open(USERS_VENV.parent / "users-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # With the kubeflow adapter's client: the users' dispatch reaches Kubernetes too.
        has = [str(bin_ / "python3"), "-c", "import publish, kubernetes, yaml"]
        if not (bin_ / "python3").exists() or subprocess.run(has, check=False).returncode:
            subprocess.run(["/usr/bin/python3", "-m", "venv", str(USERS_VENV)], check=True)
            pip = [str(bin_ / "pip"), "install", "-q", "--disable-pip-version-check"]
            subprocess.run([*pip, "-e", f"{REPO}[kubeflow]"], check=True, capture_output=True)
    return bin_
