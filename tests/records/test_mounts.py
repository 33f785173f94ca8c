"""The mount table's verdicts: which filesystems the file ledger refuses by their type and
options, because a lock on one host would not keep another host out.

The rows are mount table lines: those of sshfs, JuiceFS, GlusterFS and ext4 as this machine
printed them (``slurm_helpers/sharedfs up``), the others written as Linux prints such mounts
(nfs(5), Lustre's and cifs's mount options). ``tests/records/test_sharedfs_refusal.py`` runs
the refusal on real sshfs mounts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dispatch.model.errors import UnavailableError
from dispatch.records import locks, mounts
from dispatch.records.file import FileRecords

ROOT = "21 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard"
SSHFS = (
    "50 27 0:43 / /shared rw,nosuid,nodev,relatime shared:30 - fuse.sshfs "
    "ada@login:/export rw,user_id=0,group_id=0,default_permissions,allow_other"
)
JUICEFS = (
    "48 27 0:41 / /shared rw,nosuid,nodev,relatime - fuse.juicefs JuiceFS:dispatch "
    "rw,user_id=0,group_id=0,default_permissions,allow_other,max_read=131072"
)
GLUSTERFS = (
    "52 27 0:45 / /shared rw,relatime - fuse.glusterfs 127.0.0.1:dispatch "
    "rw,user_id=0,group_id=0,default_permissions,allow_other,max_read=131072"
)
NFS4 = (
    "36 21 0:32 / /shared rw,relatime shared:15 - nfs4 filer:/export rw,vers=4.2,"
    "rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,"
    "clientaddr=10.1.0.2,local_lock=none,addr=10.1.0.1"
)


def nfs(*options: str, kind: str = "nfs4") -> str:
    return NFS4.replace("nfs4", kind).replace("local_lock=none,", ",".join(options) + ",")


# (mount line, whether refused, the option the refusal names)
ROWS = [
    (ROOT, False, ""),
    (SSHFS, True, "fuse.sshfs"),
    (JUICEFS, False, ""),
    (GLUSTERFS, False, ""),
    (NFS4, False, ""),
    (nfs("local_lock=posix"), False, ""),
    (nfs("local_lock=flock"), True, "nfs4, local_lock=flock"),
    (nfs("local_lock=all"), True, "nfs4, local_lock=all"),
    (nfs("nolock", "local_lock=all", kind="nfs"), True, "nfs, local_lock=all"),
    (nfs("nolock", kind="nfs"), True, "nfs, nolock"),
    ("40 21 0:50 / /shared rw - lustre 10.1.0.1@tcp:/fs rw,flock,lazystatfs", False, ""),
    ("40 21 0:50 / /shared rw - lustre 10.1.0.1@tcp:/fs rw,lazystatfs", False, ""),
    (
        "40 21 0:50 / /shared rw - lustre 10.1.0.1@tcp:/fs rw,localflock,lazystatfs",
        True,
        "lustre, localflock",
    ),
    ("40 21 0:50 / /shared rw - lustre 10.1.0.1@tcp:/fs rw,noflock", True, "lustre, noflock"),
    ("41 21 0:51 / /shared rw - cifs //filer/share rw,vers=3.1.1,nobrl", True, "cifs, nobrl"),
    ("41 21 0:51 / /shared rw - cifs //filer/share rw,vers=3.1.1", False, ""),
    ("42 21 0:52 / /shared rw - fuse.s3fs s3fs rw,user_id=0", True, "fuse.s3fs"),
    ("42 21 0:52 / /shared rw - fuse.rclone remote: rw,user_id=0", True, "fuse.rclone"),
    ("43 21 0:53 / /shared rw - ceph 10.1.0.1:/ rw,name=ada", False, ""),
    ("44 21 0:54 / /shared rw - gpfs gpfs0 rw", False, ""),
]


@pytest.mark.parametrize(("line", "refused", "named"), ROWS)
def test_each_row_of_the_table_is_judged_by_type_and_option(
    line: str, refused: bool, named: str
) -> None:
    why = mounts.refusal("/shared/dispatch/ledger", f"{ROOT}\n{line}\n")
    if not refused:
        assert why is None
        return
    assert why is not None
    assert f"is on /shared ({named})" in why
    assert "two supervisors on two login nodes would both act on one job" in why
    assert "put the ledger on" in why


def test_a_refusal_is_one_line_naming_the_ledger_the_mount_and_what_to_use() -> None:
    why = mounts.refusal("/shared/ml/ledger", f"{ROOT}\n{SSHFS}\n")
    assert why is not None and "\n" not in why
    assert why.startswith("the ledger at /shared/ml/ledger is on /shared (fuse.sshfs), ")
    assert "NFS with its lock manager, Lustre mounted with -o flock" in why
    why = mounts.refusal("/shared/ml/ledger", f"{ROOT}\n{nfs('local_lock=flock')}\n")
    assert why is not None and "mount it with local_lock=none (the default)" in why


def test_the_deepest_mount_above_the_path_is_the_one_judged() -> None:
    table = f"{ROOT}\n{NFS4}\n" + SSHFS.replace("/shared ", "/shared/home ")
    assert mounts.refusal("/shared/ml/ledger", table) is None
    assert mounts.refusal("/shared/home/ledger", table) is not None
    assert mounts.refusal("/shared/homework/ledger", table) is None
    assert mounts.refusal("/shared/home", table) is not None


def test_the_last_mount_on_a_mount_point_hides_the_ones_below() -> None:
    assert mounts.refusal("/shared/l", f"{ROOT}\n{SSHFS}\n{JUICEFS}\n") is None
    assert mounts.refusal("/shared/l", f"{ROOT}\n{JUICEFS}\n{SSHFS}\n") is not None


def test_escaped_characters_in_a_mount_point_are_read_as_the_kernel_wrote_them() -> None:
    line = SSHFS.replace("/shared ", "/my\\040shared\\011x ")
    why = mounts.refusal("/my shared\tx/ledger", f"{ROOT}\n{line}\n")
    assert why is not None and "is on /my shared\tx (fuse.sshfs)" in why


def test_lines_that_are_not_mount_lines_are_skipped() -> None:
    table = f"garbage\n\n{ROOT}\n1 2 3\n{SSHFS}\n"
    assert [m.fstype for m in mounts.parse(table)] == ["ext4", "fuse.sshfs"]


def test_without_a_mount_table_nothing_is_refused(tmp_path: Path) -> None:
    assert mounts.refusal("/shared/ledger", "") is None


def test_a_ledger_on_a_refused_mount_is_refused_before_anything_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stand-in: a mount table naming ``tmp_path`` as an sshfs mount (local disk is what is
    there); the real sshfs mounts are in test_sharedfs_refusal.py."""
    table = tmp_path / "mountinfo"
    table.write_text(f"{ROOT}\n" + SSHFS.replace("/shared ", f"{tmp_path} ") + "\n")
    monkeypatch.setattr(mounts, "MOUNTINFO", str(table))
    with pytest.raises(UnavailableError, match=r"is on .* \(fuse\.sshfs\), where a file lock"):
        FileRecords(tmp_path / "ledger")
    assert not (tmp_path / "ledger").exists()
    with pytest.raises(UnavailableError, match="fuse.sshfs"):
        locks.check_locking(tmp_path / "elsewhere" / "lock-check")


def test_the_refusal_docs_ledger_md_shows_is_the_one_printed() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "ledger.md").read_text()
    why = mounts.refusal("/shared/ml/ledger", f"{ROOT}\n" + SSHFS.replace("ada@login", "x"))
    assert why is not None
    assert f"\n  error: {UnavailableError(why)}\n" in doc
