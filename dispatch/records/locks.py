"""Locks of the file ledger: the start-up check that locks work, and the owner locks.

Owner locks are non-blocking ``flock`` locks on a per-job lock file. On local disks and
Lustre (mounted with ``flock``) a lock belongs to an open file description; on NFS the client
emulates ``flock`` with POSIX byte-range locks, which belong to the *process*: a second
descriptor of the same process would be granted the lock, and closing it would drop the first.
So this module keeps one process-wide table of held owner locks and never opens a lock file a
second time while this process holds it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import threading
import time
import warnings
from pathlib import Path

from dispatch.model.errors import RejectedError, UnavailableError
from dispatch.records import mounts
from dispatch.records.ledger_format import symlink_refused

# What the second process of the lock check exits with: the lock was refused (locks work), it
# was granted although this process holds it (locks do not work here), or locking failed with
# errno ``status - _FAILED`` (0 when it cannot say).
_REFUSED, _GRANTED, _FAILED = 0, 1, 100

_CONTENDED = {errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES}
# Long enough for an NFS server that is slow to answer a lock request.
_CHECK_TIMEOUT_SECONDS = 60
_CHECK_POLL_SECONDS = 0.001

_checked: set[str] = set()
_checked_mu = threading.Lock()
_mounts_judged: set[str] = set()


def check_mount(root: Path) -> None:
    """Refuse (``UnavailableError``) a ledger at ``root`` on a mount whose type and options
    say that its locks do not reach other hosts (``mounts.RULES``); before anything is made
    there. Done once per root and process."""
    key = str(root)
    with _checked_mu:
        if key in _mounts_judged:
            return
    refused = mounts.refusal(key)
    if refused is not None:
        raise UnavailableError(refused)
    with _checked_mu:
        _mounts_judged.add(key)


def check_locking(path: Path) -> None:
    """Refuse (``UnavailableError``) a filesystem where ``flock`` does not exclude other processes.

    First the mount ``path`` lies on is judged by its type and options (``mounts.RULES``): a
    second host cannot be asked, but sshfs, NFS with local locks and the like are known by
    them. Then the lock on ``path`` is taken here and a child process asked to take it too;
    the child must be refused. Done once per path and process.
    """
    key = str(path)
    with _checked_mu:
        if key in _checked:
            return
    check_mount(path.parent)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise RejectedError(symlink_refused(path)) from None
        raise
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            if err.errno not in _CONTENDED:
                raise UnavailableError(_no_locks(path, f"flock failed: {err.strerror}")) from None
            # Another process holds it, running this same check: the refusal is the proof.
        else:
            try:
                status = _second_process(path)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
            if status is None:
                raise UnavailableError(_no_locks(path, "the lock check did not finish"))
            if status == _GRANTED:
                raise UnavailableError(
                    _no_locks(path, "a second process was granted a lock this one held")
                )
            if status != _REFUSED:
                code = status - _FAILED
                detail = os.strerror(code) if code > 0 else f"exit {status}"
                raise UnavailableError(
                    _no_locks(path, f"flock failed in a second process: {detail}")
                )
    finally:
        os.close(fd)
    with _checked_mu:
        _checked.add(key)


def _second_process(path: Path) -> int | None:
    """Fork a process that tries the lock at ``path``; its exit status, None when it did not
    finish in time. A fork, not a new interpreter: the check runs at the start of every
    command that opens the ledger, and an interpreter start was most of its cost."""
    with warnings.catch_warnings():
        # Python 3.12 warns on fork with threads running: the child below takes no lock a
        # thread could hold, it makes two system calls and exits.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: only system calls, then _exit (no cleanup of the parent's state)
        status = _FAILED
        try:
            child_fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
            try:
                fcntl.flock(child_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                status = _GRANTED
            except OSError as err:
                code = min(err.errno or 0, 150)
                status = _REFUSED if err.errno in _CONTENDED else _FAILED + code
        except BaseException:  # noqa: BLE001 - the child must reach _exit whatever happens
            pass
        os._exit(status)
    deadline = time.monotonic() + _CHECK_TIMEOUT_SECONDS
    while True:
        done, wait_status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(wait_status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(_CHECK_POLL_SECONDS)


def _no_locks(path: Path, why: str) -> str:
    return (
        f"file locks do not work on the filesystem of {path.parent} ({why}); the ledger needs "
        "them to keep two supervisors apart: mount it with locking enabled (NFS: lockd/v4, "
        "Lustre: -o flock) or put the ledger on another filesystem"
    )


# An open with O_CREAT and without O_EXCL cannot find the file there, yet GlusterFS answers it
# EEXIST while another client creates the same name at that moment: the file is there, and a
# second open finds it.
_CREATE_RACES = 3


def _open_lock(key: str, path: str | Path) -> int:
    """A descriptor of the lock file ``key``, created if missing (``O_NOFOLLOW``: a link there
    is refused)."""
    for tries in range(1, _CREATE_RACES + 1):
        try:
            return os.open(key, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise RejectedError(symlink_refused(path)) from None
            if err.errno != errno.EEXIST or tries == _CREATE_RACES:
                raise UnavailableError(f"cannot take the owner lock {path}: {err}") from None
    raise AssertionError("unreachable")


class OwnerLocks:
    """The owner locks this process holds: one per lock file, with the token it was taken for.

    Each is a non-blocking ``flock`` on a descriptor kept open while the lock is held; a sweep
    takes thousands per tick, so this is the bare system call rather than a locking library.
    """

    _mu = threading.Lock()
    _held: dict[str, tuple[str, int]] = {}

    @classmethod
    def take(cls, path: str | Path, token: str) -> bool:
        """Take the lock at ``path`` without waiting; False when any process holds it."""
        key = str(path)
        with cls._mu:
            if key in cls._held:
                return False
            fd = _open_lock(key, path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                os.close(fd)
                if err.errno in _CONTENDED:
                    return False
                raise UnavailableError(f"cannot take the owner lock {path}: {err}") from None
            cls._held[key] = (token, fd)
            return True

    @classmethod
    def holder(cls, path: str | Path) -> str | None:
        """The token this process holds the lock at ``path`` for, or None."""
        with cls._mu:
            held = cls._held.get(str(path))
        return None if held is None else held[0]

    @classmethod
    def give_back(cls, path: str | Path, token: str | None) -> None:
        """Release the lock at ``path`` if held for ``token`` (any token when None)."""
        key = str(path)
        with cls._mu:
            held = cls._held.get(key)
            if held is None or (token is not None and held[0] != token):
                return
            del cls._held[key]
            # Closing the only descriptor of the open file description drops the flock.
            os.close(held[1])
