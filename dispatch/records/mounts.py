"""The filesystems whose locks do not reach other hosts, told from the mount table.

The file ledger's start-up lock check (``locks.check_locking``) proves that ``flock`` keeps a
second process of this host out. It cannot see a second host: on sshfs, on NFS mounted with
``local_lock=flock`` or ``nolock``, on Lustre mounted with ``localflock``, a lock is granted
by this client alone, so two login nodes both get every owner lock and shard claim. One client
can still see what kind of mount it is on: the filesystem type and the mount options in
``/proc/self/mountinfo``. ``RULES`` judges those; a mount no rule names is left to the lock
check (local disks, NFS with its lock manager, Lustre with ``-o flock``, CephFS, GPFS,
GlusterFS, JuiceFS).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

MOUNTINFO = "/proc/self/mountinfo"

# What a refusal says to use instead, when the rule has no advice of its own.
SHARED = (
    "put the ledger on a shared filesystem whose locks reach every host (NFS with its lock "
    "manager, Lustre mounted with -o flock, CephFS, GPFS, GlusterFS, JuiceFS), or on a "
    "local disk if every dispatch command runs on this one host"
)


@dataclass(frozen=True)
class Mount:
    """One line of the mount table: where, what type, and its options (the mount's own and
    the filesystem's, e.g. ``rw``, ``local_lock=flock``, ``nolock``)."""

    point: str
    fstype: str
    options: frozenset[str]


@dataclass(frozen=True)
class MountRule:
    """A mount of type ``fstype`` (a type, or a prefix ending in ``*``) carrying ``option``
    (any options when empty) is refused: ``why`` its locks stay on this client, and ``use``
    what to do instead (a clause of the refusal)."""

    fstype: str
    option: str
    why: str
    use: str = SHARED

    def matches(self, mount: Mount) -> bool:
        """Whether this rule judges ``mount``."""
        if self.fstype.endswith("*"):
            typed = mount.fstype.startswith(self.fstype[:-1])
        else:
            typed = mount.fstype == self.fstype
        return typed and (not self.option or self.option in mount.options)


_NFS_LOCAL = "this NFS client keeps flock locks to itself instead of asking the server"
_NFS_USE = (
    "mount it with local_lock=none (the default) and without nolock, with its lock manager "
    "running (lockd on NFSv3), or put the ledger on another filesystem"
)
_FUSE_LOCAL = (
    "its FUSE daemon does not take locks on the server, so the kernel grants them within "
    "this mount alone"
)

# The refusals, in order; the first rule that matches a mount refuses it. Rules:
# * a rule names a type and, where the type is refused only under some options, the option
#   that refuses it; a mount no rule matches is accepted here and left to the lock check,
#   which still refuses a filesystem whose flock fails or does not exclude on this host;
# * only what is certain from the options is refused: Lustre without any flock option is
#   not, since its default differs between releases (where flock then fails, the lock check
#   says so), and a FUSE type is refused only when its daemon is known not to serve locks;
# * ``fuse.sshfs`` was seen here: two mounts of one folder each grant the same flock.
RULES: tuple[MountRule, ...] = (
    MountRule("fuse.sshfs", "", _FUSE_LOCAL),
    MountRule("fuse.s3fs", "", _FUSE_LOCAL),
    MountRule("fuse.rclone", "", _FUSE_LOCAL),
    MountRule("fuse.gcsfuse", "", _FUSE_LOCAL),
    MountRule("fuse.goofys", "", _FUSE_LOCAL),
    MountRule("fuse.mountpoint-s3", "", _FUSE_LOCAL),
    MountRule("nfs*", "local_lock=flock", _NFS_LOCAL, _NFS_USE),
    MountRule("nfs*", "local_lock=all", _NFS_LOCAL, _NFS_USE),
    MountRule("nfs*", "nolock", _NFS_LOCAL, _NFS_USE),
    MountRule(
        "lustre",
        "localflock",
        "Lustre grants flock locks on this client alone",
        "mount it with -o flock, or put the ledger on another filesystem",
    ),
    MountRule(
        "lustre",
        "noflock",
        "Lustre has flock turned off",
        "mount it with -o flock, or put the ledger on another filesystem",
    ),
    MountRule(
        "cifs",
        "nobrl",
        "this SMB client keeps locks to itself instead of asking the server",
        "mount it without nobrl, or put the ledger on another filesystem",
    ),
)

_ESCAPE = re.compile(r"\\([0-7]{3})")


def _unescape(field: str) -> str:
    """A path of the mount table, whose spaces, tabs, newlines and backslashes are octal."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse(table: str) -> list[Mount]:
    """The mounts of a ``/proc/PID/mountinfo`` text, in its order (later ones on top)."""
    mounts = []
    for line in table.splitlines():
        fields = line.split(" ")
        if "-" not in fields[6:]:
            continue  # not a mountinfo line
        dash = fields.index("-", 6)
        if len(fields) < dash + 4:
            continue
        options = fields[5].split(",") + fields[dash + 3].split(",")
        mounts.append(Mount(_unescape(fields[4]), fields[dash + 1], frozenset(options)))
    return mounts


def mount_of(path: str, mounts: list[Mount]) -> Mount | None:
    """The mount ``path`` (absolute, symbolic links resolved) lies on: the deepest mount
    point above it, the last mounted where several share one."""
    best: Mount | None = None
    for mount in mounts:
        point = mount.point.rstrip("/") or "/"
        under = path == point or path.startswith(point + "/") or point == "/"
        if under and (best is None or len(point) >= len(best.point.rstrip("/") or "/")):
            best = mount
    return best


def refusal(path: str, table: str | None = None) -> str | None:
    """Why the ledger at ``path`` cannot be trusted with locks, from the mount it lies on
    (``table``: a mount table's text; by default this process's); None when no rule refuses
    it, or the mount table cannot be read (not Linux)."""
    if table is None:
        try:
            with open(MOUNTINFO, encoding="utf-8", errors="surrogateescape") as f:
                table = f.read()
        except OSError:
            return None
    mount = mount_of(os.path.realpath(path), parse(table))
    if mount is None:
        return None
    for rule in RULES:
        if rule.matches(mount):
            shown = f"{mount.fstype}, {rule.option}" if rule.option else mount.fstype
            return (
                f"the ledger at {path} is on {mount.point} ({shown}), where a file lock taken "
                f"on one host does not keep another host out ({rule.why}), so two supervisors "
                f"on two login nodes would both act on one job: {rule.use}"
            )
    return None
