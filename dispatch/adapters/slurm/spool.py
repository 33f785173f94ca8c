"""The SPANK plugin's spool, as the adapter sees it: cessation evidence in, fences out.

The plugin (``slurm_helpers/spank``, docs/spank.md) writes into ``SPOOL/<uid>/`` one record
per node when a Slurm job's allocation there is over (``<job>.<restart>.<node>.epilog``);
the adapter reads them to answer its cessation signal. The adapter writes, into the same
folder, the fences the plugin checks at task launch: ``fence.<slurm job>`` (which dispatch
job and submission a Slurm job runs) and ``current.<dispatch job>`` (the ledger's current
submission, or ``ended``). Every file is opened without following links, under a folder
whose owner and mode were checked, and anything malformed counts as missing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from dispatch.model.enums import Source, Tristate
from dispatch.model.errors import UnavailableError
from dispatch.model.objects import CessationEvidence, ObjectObs
from dispatch.model.values import Support

# The plugin's record format (DS_FORMAT in dispatch_spank.c).
FORMAT = "1"
# A record, a fence or the marker is a few lines (DS_SMALL in dispatch_spank.c).
SMALL = 1024
ENDED = "ended"


@dataclass(frozen=True)
class Marker:
    """What the plugin's marker says: it is loaded on the cluster's nodes."""

    slurm: str
    fence: bool


def _checked_dir(path: Path, owner: int | None, sticky: bool = False) -> int:
    """A folder descriptor for ``path`` (not a link), owned by ``owner`` (None: root or the
    caller), that nobody else may write (with ``sticky``: or only with the sticky bit, where
    nobody may rename or remove another's entry); ``OSError`` otherwise."""
    # A sticky spool others may write need not be listable by them (mode 1733): it is opened
    # as a path, which asks no read permission, and the names in it are looked up, not listed.
    how = os.O_PATH if sticky else os.O_RDONLY
    fd = os.open(path, how | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    st = os.fstat(fd)
    owners = (0, os.geteuid()) if owner is None else (owner,)
    writable = st.st_mode & 0o022 and not (sticky and st.st_mode & stat.S_ISVTX)
    if st.st_uid not in owners or writable:
        os.close(fd)
        raise OSError(errno.EPERM, f"{path} is not a folder only its owner may write")
    return fd


def _read_small(dir_fd: int, name: str, owners: tuple[int, ...]) -> str | None:
    """A small regular file of one of ``owners`` that no one else may write; None if absent
    or refused."""
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd
        )
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (
            not stat.S_ISREG(st.st_mode)
            or st.st_uid not in owners
            or st.st_mode & 0o022
            or st.st_size >= SMALL
        ):
            return None
        return os.read(fd, SMALL).decode("ascii", errors="replace")
    finally:
        os.close(fd)


def _fields(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key] = value
    return out


class Spool:
    """The spool folder as this host sees it (``spank_spool``), for the jobs of ``uid``."""

    def __init__(self, path: str, uid: int) -> None:
        self.path = Path(path)
        self.uid = uid

    def marker(self) -> Marker:
        """The plugin's marker, written by every slurmd that loaded it; ``OSError`` when the
        spool or the marker is missing or not root's."""
        fd = _checked_dir(self.path, 0, sticky=True)
        try:
            text = _read_small(fd, "plugin", (0,))
        finally:
            os.close(fd)
        fields = _fields(text or "")
        if fields.get("format") != FORMAT:
            raise OSError(errno.ENOENT, f"no plugin marker of format {FORMAT} in {self.path}")
        return Marker(slurm=fields.get("slurm", "?"), fence=fields.get("fence") == "yes")

    def _user_dir(self, make: bool = False) -> int:
        """``SPOOL/<uid>``, checked; with ``make``, made first (0700) where it is missing and
        the spool lets users make their own (sticky): so the fences of a user's first job are
        written before it is released, not after its prolog made the folder."""
        if make:
            self._make_user_dir()
        try:
            return _checked_dir(self.path / str(self.uid), self.uid)
        except OSError as err:
            if err.errno != errno.EPERM:
                raise
            raise OSError(
                errno.EPERM,
                f"{self.path / str(self.uid)} is not your folder (another user may have made it "
                "first): the plugin moves it aside at your next job's start",
            ) from None

    def _make_user_dir(self) -> None:
        spool = _checked_dir(self.path, 0, sticky=True)
        try:
            os.mkdir(str(self.uid), 0o700, dir_fd=spool)
        except FileExistsError:
            return
        except PermissionError:
            return  # a spool only root writes: the plugin makes the folder at the first job
        finally:
            os.close(spool)
        made = _checked_dir(self.path / str(self.uid), self.uid)
        try:
            os.fchmod(made, 0o700)  # whatever the umask left
        finally:
            os.close(made)

    def fenced(self, slurm_job: str) -> bool:
        """Whether the spool holds a fence for Slurm job ``slurm_job`` (a readable one, of this
        user, naming a job and a submission)."""
        try:
            fd = self._user_dir()
        except OSError:
            return False
        try:
            f = _fields(_read_small(fd, f"fence.{slurm_job}", (self.uid,)) or "")
        finally:
            os.close(fd)
        return bool(f.get("job")) and f.get("submission", "").isdigit()

    def ended_on(self, job_id: str, restarts: int, nodes: tuple[str, ...], since: int) -> list[str]:
        """The nodes among ``nodes`` whose epilog recorded execution ``restarts`` of Slurm
        job ``job_id`` as over, in order. A record written before ``since`` (the execution's
        start, as Slurm reports it, in epoch seconds) is another job's that had the same id
        and restart count: an earlier life of the cluster, whose ids start again."""
        try:
            fd = self._user_dir()
        except OSError:
            return []
        try:
            proven = []
            for node in nodes:
                text = _read_small(fd, f"{job_id}.{restarts}.{node}.epilog", (self.uid, 0))
                f = _fields(text or "")
                if (
                    f.get("format") == FORMAT
                    and f.get("job") == job_id
                    and f.get("restart") == str(restarts)
                    and f.get("node") == node
                    and f.get("ended") == "epilog"
                    and f.get("time", "").isdigit()
                    and int(f["time"]) >= since
                ):
                    proven.append(node)
            return proven
        finally:
            os.close(fd)

    def ceased(self, obs: ObjectObs, slurm_job: str = "") -> CessationEvidence:
        """Ceased once every node of the object's last allocation has its epilog record,
        written after that execution started as Slurm reports it (``ended_on``); the records
        name the Slurm job ``slurm_job`` (default: the object's id, which is the job id of
        every object but an element of a group's array)."""
        ref = obs.ref
        if obs.state.live:
            return CessationEvidence(ceased=False, detail=f"Slurm job {ref.id} is {obs.state}")
        if not obs.nodes:
            return CessationEvidence(
                ceased=True, detail=f"Slurm job {ref.id} ended without running on any node"
            )
        run = f"Slurm job {ref.id} (execution {obs.restarts})"
        started = next((r.start for r in obs.runs if r.restarts == obs.restarts), None)
        if started is None:
            return CessationEvidence(
                ceased=False,
                detail=f"cessation unproven: Slurm shows no start of {run}, which every "
                "node's record must follow",
            )
        proven = self.ended_on(
            slurm_job or ref.id, obs.restarts, obs.nodes, int(started.timestamp())
        )
        return CessationEvidence.from_nodes(run, obs.nodes, proven, "epilog record")

    # -- fences ---------------------------------------------------------------------------

    def fence(self, job: str, slurm_job: str, submission: int) -> None:
        """Name the dispatch job and submission Slurm job ``slurm_job`` runs; ``OSError``
        when the spool cannot take it."""
        self._write(f"fence.{slurm_job}", f"job={job}\nsubmission={submission}\n")

    def advance(self, job: str, submission: int | None) -> None:
        """Make ``submission`` the job's current one (None: the job is over, nothing of it
        may run); never moves back."""
        try:
            fd = self._user_dir(make=True)
        except OSError as err:
            raise UnavailableError(f"the SPANK spool: {err}") from None
        try:
            now = _fields(_read_small(fd, f"current.{job}", (self.uid,)) or "").get("current")
        finally:
            os.close(fd)
        if now == ENDED or (
            submission is not None and now is not None and now.isdigit() and int(now) >= submission
        ):
            return
        self._write(f"current.{job}", f"current={ENDED if submission is None else submission}\n")

    def forget(self, keep: Collection[str], before: float) -> list[str]:
        """Remove the files of every dispatch job that is over: its ``current.<job>`` says
        ``ended`` and was written before ``before`` (epoch seconds), and it is not in
        ``keep``; with it, the fences, run notes and records of each Slurm job its fences
        name. Returns the names removed, in order.

        Only regular files of this user (or root's, the plugin's run notes) in the user's own
        checked folder are touched, each by ``unlink`` relative to that folder, which never
        follows a link. ``current.<job>`` goes last, so an interrupted pass leaves nothing
        fenced to a job it does not know is over."""
        try:
            fd = self._user_dir()
        except OSError as err:
            raise UnavailableError(f"the SPANK spool: {err}") from None
        try:
            names = sorted(os.listdir(fd))
            over = self._over(fd, names, keep, before)
            ids = self._fenced(fd, names, over)
            gone = [n for n in names if _slurm_job(n) in ids and self._ours(fd, n, None)]
            gone += [f"current.{job}" for job in sorted(over)]
            for name in gone:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=fd)
            return gone
        finally:
            os.close(fd)

    def _over(self, fd: int, names: list[str], keep: Collection[str], before: float) -> set[str]:
        """The dispatch jobs among ``names`` that are over: their ``current.<job>`` says
        ``ended`` and was written before ``before``, and they are not in ``keep``."""
        return {
            n.removeprefix("current.")
            for n in names
            if n.startswith("current.")
            and n.removeprefix("current.") not in keep
            and self._ours(fd, n, before)
            and _fields(_read_small(fd, n, (self.uid,)) or "").get("current") == ENDED
        }

    def _fenced(self, fd: int, names: list[str], over: set[str]) -> dict[str, str]:
        """The Slurm jobs the fences among ``names`` name, each with its job of ``over``."""
        return {
            n.removeprefix("fence."): job
            for n in names
            if n.startswith("fence.")
            and (job := _fields(_read_small(fd, n, (self.uid,)) or "").get("job")) in over
        }

    def _ours(self, fd: int, name: str, before: float | None) -> bool:
        """Whether ``name`` is a regular file (never a link) of this user or root, last
        written before ``before`` when given."""
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            return False
        old = before is None or st.st_mtime < before
        return stat.S_ISREG(st.st_mode) and st.st_uid in (self.uid, 0) and old

    def _write(self, name: str, text: str) -> None:
        try:
            self._write_file(name, text)
        except OSError as err:
            raise UnavailableError(f"the SPANK spool did not take {name}: {err}") from None

    def _write_file(self, name: str, text: str) -> None:
        fd = self._user_dir(make=True)
        tmp = f".tmp-{os.getpid()}-{name}"
        try:
            out = os.open(
                tmp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o644,
                dir_fd=fd,
            )
            try:
                os.write(out, text.encode("ascii"))
                os.fsync(out)
            finally:
                os.close(out)
            os.rename(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=fd)
            raise
        finally:
            os.close(fd)


def _slurm_job(name: str) -> str:
    """The Slurm job a spool file is about: ``fence.<id>``, ``run.<id>.<node>`` or a record
    ``<id>.<restart>.<node>.<what>``; "" for any other name."""
    for prefix in ("fence.", "run."):
        if name.startswith(prefix):
            return name.removeprefix(prefix).split(".")[0]
    first = name.split(".")[0]
    return first if first.isdigit() else ""


def probe_spank(spool: Spool | None) -> Support:
    """The cessation signal's capability: the plugin's marker in the spool, or why not."""
    if spool is None:
        return Support(
            state=Tristate.NO,
            source=Source.DECLARED,
            detail="no spank_spool setting: the SPANK plugin is not used (docs/spank.md)",
        )
    try:
        marker = spool.marker()
    except OSError as err:
        return Support(state=Tristate.NO, source=Source.PROBED, detail=f"SPANK plugin: {err}")
    fence = "fences stale executions" if marker.fence else "does not fence"
    return Support(
        state=Tristate.YES,
        source=Source.PROBED,
        detail=f"SPANK plugin loaded (built for Slurm {marker.slurm}; {fence}), spool {spool.path}",
    )
