"""Running Slurm commands. This module and ``pyslurm_run`` (the same calls in-process) are the
only ones that start processes or import pyslurm.

``CommandRunner`` runs one command line, locally or under a prefix (``ssh HOST``, ``chroot
DIR``, ...), each call with a timeout, and translates what went wrong into dispatch errors in
this one place: a call with an effect whose reply is lost (timeout, broken SSH connection) is
``OutcomeUnknownError``; a read that fails, and any call whose ssh session never started (no
connection, host key refused, key not accepted), is ``UnreachableError``.
"""

from __future__ import annotations

import hashlib
import locale
import os
import pwd
import shlex
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from dispatch.adapters.slurm import probe_cache
from dispatch.model.environment import inheritable
from dispatch.model.errors import OutcomeUnknownError, UnreachableError
from dispatch.model.values import SHELL_NAME

# Times printed as epoch seconds, so parsing never depends on the cluster's time zone.
CLIENT_ENV = {"SLURM_TIME_FORMAT": "%s"}

# ssh reports its own failure (no connection, lost connection) with exit status 255.
SSH_FAILED = 255
# What OpenSSH's client prints when it failed before the remote command could start: the
# command certainly did not run, so even an effect is unreachable, not outcome-unknown.
SSH_NEVER_STARTED = (
    "connect to host",
    "could not resolve hostname",
    "host key verification failed",
    "host key is known",
    "remote host identification has changed",
    "permission denied (",
    "kex_exchange_identification",
    "during banner exchange",
)

# Enters the submitter's folder, then runs the rest of its arguments, inside whatever the
# prefix leads to (a chroot has its own view of the folders). Exit 97 says the folder is gone.
ENTER_FOLDER = (
    'cd -- "$1" 2>/dev/null || { echo "dispatch: cannot enter the submit folder $1" >&2; '
    'exit 97; }; shift; exec "$@"'
)
FOLDER_GONE = 97
# How text=True encodes stdin, so a length counted here is the length the far end reads.
ENCODING = locale.getpreferredencoding(False)

# Over ssh the submitter's environment travels on stdin ahead of the script, never on a
# command line (which every user of the login node could read): a first line with the byte
# length of the environment text, then that text (``export NAME='value'`` lines, quoted here),
# which this shell evaluates before it enters the folder; sbatch reads the rest, the script.
# Exit 96 says the environment did not arrive whole.
READ_ENVIRONMENT = (
    'IFS= read -r n && env_text=$(head -c "$n") && eval "$env_text" || '
    '{ echo "dispatch: the submit environment did not arrive whole" >&2; exit 96; }; '
    "unset n env_text; "
)
ENVIRONMENT_LOST = 96
# Variables bash keeps read-only: a ``/bin/sh`` that is bash (RHEL) would stop on exporting
# them, and they describe the submitter's shell, not the job.
SHELL_READONLY = frozenset({"BASHOPTS", "BASH_VERSINFO", "EUID", "PPID", "SHELLOPTS", "UID"})


def environment_text(environment: dict[str, str]) -> str:
    """The submitter's environment as ``export`` lines for ``READ_ENVIRONMENT``; names that
    are not shell names (exported bash functions, ``BASH_FUNC_f%%``) cannot be set by a POSIX
    shell and are left out, as are bash's read-only ones."""
    return "".join(
        f"export {k}={shlex.quote(v)}\n"
        for k, v in sorted(environment.items())
        if SHELL_NAME.fullmatch(k) and k not in SHELL_READONLY
    )


@dataclass(frozen=True)
class Reply:
    """What a command printed and how it exited."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        """Whether the command exited with status 0."""
        return self.returncode == 0


@dataclass
class CommandRunner:
    """Runs Slurm commands locally, or under ``prefix``; ``quote`` joins the command into one
    shell word list for prefixes that hand it to a remote shell (ssh)."""

    prefix: tuple[str, ...] = ()
    quote: bool = False
    timeout: float = 60.0
    env: dict[str, str] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)
    # The folder of the Slurm commands, when they are not on the PATH the runner inherits.
    commands: str = ""
    # Whether ``probe`` keeps answers between processes (``probe_cache``); local runs only.
    keep_probes: bool = False

    def program(self, argv: Sequence[str]) -> list[str]:
        """``argv`` with its program taken from ``commands`` when that is set."""
        if not self.commands or "/" in argv[0]:
            return list(argv)
        return [f"{self.commands.rstrip('/')}/{argv[0]}", *argv[1:]]

    @classmethod
    def ssh(cls, host: str, *, timeout: float = 60.0, options: Sequence[str] = ()) -> CommandRunner:
        """Commands on ``host`` over ssh: BatchMode (never waits for a password) and strict
        host key checking, both ahead of ``options`` (ssh keeps the first value it is given,
        so no option can turn them off)."""
        prefix = (
            "ssh",
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            *options,
            "--",
            host,
        )
        return cls(prefix=prefix, quote=True, timeout=timeout)

    def command_line(self, argv: Sequence[str]) -> list[str]:
        """The full command line this runner starts for ``argv``."""
        if not self.prefix:
            return self.program(argv)
        inner = ["env", *(f"{k}={v}" for k, v in sorted({**CLIENT_ENV, **self.env}.items()))]
        inner.extend(self.program(argv))
        return [*self.prefix, shlex.join(inner)] if self.quote else [*self.prefix, *inner]

    def run(self, argv: Sequence[str], *, effect: bool = False) -> Reply:
        """Run ``argv``; ``effect`` marks calls that change the cluster (see module doc).

        ``id`` without a prefix is answered in-process: the commands run as this process."""
        if not self.prefix and list(argv) == ["id"]:
            return Reply(tuple(argv), 0, _own_identity(), "")
        # A prefix (chroot, ssh) gets this process's environment, less what Slurm set for
        # the job this process may run in; the command gets the settings on its line.
        own = inheritable(os.environ)
        env = own if self.prefix else {**own, **CLIENT_ENV, **self.env}
        return self._run(self.command_line(argv), argv, effect=effect, env=env)

    def probe(self, argv: Sequence[str]) -> Reply:
        """Run a read whose answer depends only on the cluster's config and release; with
        ``keep_probes`` and no prefix, a kept answer serves instead (``probe_cache``)."""
        if self.prefix or not self.keep_probes:
            return self.run(argv)
        name = probe_cache.key(argv, self.program(argv)[0], {**CLIENT_ENV, **self.env})
        return self._kept(name, argv, lambda: self.run(argv))

    def _kept(self, name: str, argv: Sequence[str], run: Callable[[], Reply]) -> Reply:
        """The answer kept under ``name`` (``probe_cache``), else ``run()``'s, kept if it
        succeeded."""
        kept = probe_cache.load(name)
        if kept is not None:
            return Reply(tuple(argv), *kept)
        reply = run()
        if reply.ok:
            probe_cache.store(name, reply.returncode, reply.stdout, reply.stderr)
        return reply

    def run_as_submitter(
        self,
        argv: Sequence[str],
        *,
        environment: dict[str, str],
        folder: str,
        stdin: str,
        keep_pass: bool = False,
    ) -> Reply:
        """Run ``argv`` as its submitter would have: in ``folder``, with exactly
        ``environment`` (plus this runner's own settings for reaching Slurm), ``stdin`` fed in.

        Always an effect. The environment travels as the process environment (over ssh: on
        stdin, ahead of the script, into an emptied environment), never on a command line, so
        other users cannot read it from the process table. Variables Slurm sets per job are
        left out (``dispatch.model.environment``), so a job never inherits another job's.

        ``keep_pass``, for a dry run (``sbatch --test-only``), with ``keep_probes`` and no
        prefix: the pass kept for the same request (the command line, the submitter's Slurm
        variables, folder and script; the same config and commands, under ``KEEP`` ago) serves
        instead, and a pass is kept (``probe_cache``).
        """
        if not keep_pass or self.prefix or not self.keep_probes:
            return self._as_submitter(argv, environment, folder, stdin)
        slurms = {k: v for k, v in environment.items() if k.startswith(("SBATCH_", "SLURM_"))}
        line = [*argv, folder, hashlib.sha256(stdin.encode()).hexdigest()]
        env = {**CLIENT_ENV, **self.env, **slurms}
        name = probe_cache.key(line, self.program(argv)[0], env)
        return self._kept(name, argv, lambda: self._as_submitter(argv, environment, folder, stdin))

    def _as_submitter(
        self, argv: Sequence[str], environment: dict[str, str], folder: str, stdin: str
    ) -> Reply:
        env = {**inheritable(environment), **self.env}
        line = self.submitter_line(argv, folder)
        if self.quote:
            text = environment_text(env)
            framed = f"{len(text.encode(ENCODING))}\n{text}{stdin}"
            return self._run(line, argv, effect=True, env=None, stdin=framed)
        return self._run(line, argv, effect=True, env=env, stdin=stdin)

    def submitter_line(self, argv: Sequence[str], folder: str) -> list[str]:
        """The command line ``run_as_submitter`` starts: the folder and ``argv``, never a
        value of the environment."""
        if self.quote:
            remote = [
                "env",
                "-i",
                "/bin/sh",
                "-c",
                READ_ENVIRONMENT + ENTER_FOLDER,
                "dispatch-submit",
                folder,
                *self.program(argv),
            ]
            return [*self.prefix, shlex.join(remote)]
        # The prefix is the supervisor's program, found on its own PATH, not the submitter's.
        head = (
            [shutil.which(self.prefix[0]) or self.prefix[0], *self.prefix[1:]]
            if self.prefix
            else []
        )
        return [
            *head,
            "/bin/sh",
            "-c",
            ENTER_FOLDER,
            "dispatch-submit",
            folder,
            *self.program(argv),
        ]

    def _run(
        self,
        line: Sequence[str],
        argv: Sequence[str],
        *,
        effect: bool,
        env: dict[str, str] | None,
        stdin: str | None = None,
    ) -> Reply:
        self.counts[argv[0]] += 1
        what = shlex.join(argv)
        try:
            done = subprocess.run(
                line,
                capture_output=True,
                text=True,
                timeout=self.timeout,
                env=env,
                input=stdin,
                stdin=subprocess.DEVNULL if stdin is None else None,
                check=False,
            )
        except subprocess.TimeoutExpired:
            if effect:
                raise OutcomeUnknownError(
                    f"{what} gave no reply within {self.timeout:g}s; it may or may not have acted"
                ) from None
            raise UnreachableError(f"{what} gave no reply within {self.timeout:g}s") from None
        except OSError as err:
            # The program never started, so nothing happened on the cluster.
            raise UnreachableError(f"cannot run {line[0]!r}: {err.strerror}") from None
        if self.quote and done.returncode == SSH_FAILED:
            detail = done.stderr.strip()[:200]
            if any(w in done.stderr.lower() for w in SSH_NEVER_STARTED):
                raise UnreachableError(f"{what}: ssh could not start it ({detail})")
            if effect:
                raise OutcomeUnknownError(
                    f"{what}: the connection failed ({detail}); it may or may not have acted"
                )
            raise UnreachableError(f"{what}: the connection failed ({detail})")
        return Reply(tuple(argv), done.returncode, done.stdout, done.stderr)


def _own_identity() -> str:
    """This process's user as ``id`` prints it (``uid=1000(ada)``; a uid with no passwd entry
    has no name, as with ``id``)."""
    uid = os.getuid()
    try:
        return f"uid={uid}({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid={uid}"
