"""Choosing a transport: pyslurm in-process where it matches the release, else the CLI
(local, under a prefix, or over ssh). With pyslurm, find and every effect on an object go
through it; the CLI runner stays for the probes (release, user, config) and for batch-script
jobs, whose sbatch options only sbatch reads."""

from __future__ import annotations

import os

from dispatch.adapters.slurm import parse, render
from dispatch.adapters.slurm.pyslurm_run import (
    PyslurmTransport,
    pyslurm_built_for,
    pyslurm_unusable,
    pyslurm_version,
)
from dispatch.adapters.slurm.run import CommandRunner
from dispatch.adapters.slurm.settings import SlurmSettings
from dispatch.model.errors import InvalidError, UnavailableError


def command_runner(s: SlurmSettings) -> CommandRunner:
    """The CLI runner the settings ask for."""
    env = {"SLURM_CONF": s.slurm_conf} if s.slurm_conf else {}
    if s.transport == "ssh" or (s.transport == "auto" and s.ssh_host):
        runner = CommandRunner.ssh(s.ssh_host, timeout=s.timeout, options=s.ssh_options)
        runner.env.update(env)
        runner.commands = s.commands
        return runner
    return CommandRunner(
        prefix=s.prefix, timeout=s.timeout, env=env, commands=s.commands, keep_probes=True
    )


def pyslurm_matches(built_for: tuple[int, int] | None, release: tuple[int, int]) -> bool:
    """pyslurm fits a cluster only when compiled against the cluster's Slurm release."""
    return built_for is not None and built_for == release


def _release(runner: CommandRunner) -> tuple[int, int] | None:
    reply = runner.probe(render.version_argv())
    if not reply.ok:
        return None
    try:
        return parse.parse_version(reply.stdout)
    except InvalidError:
        return None


def choose_transport(s: SlurmSettings) -> tuple[CommandRunner, PyslurmTransport | None, str]:
    """The runner, the pyslurm transport when pyslurm is asked for or fits automatically, and
    which transport that is and why, in words (``dispatch sbatch --plan`` prints them)."""
    runner = command_runner(s)
    cli = "ssh" if s.transport == "ssh" or (s.transport == "auto" and s.ssh_host) else "cli"
    if s.transport in ("cli", "ssh"):
        return runner, None, f"{cli} (transport = {s.transport!r} in the config)"
    if s.slurm_conf:
        # libslurm reads the environment's SLURM_CONF when pyslurm is imported.
        os.environ["SLURM_CONF"] = s.slurm_conf
    unusable = pyslurm_unusable()
    version = None if unusable else pyslurm_version()
    if s.transport == "pyslurm":
        if version is None:
            why = unusable or "it does not import"
            raise UnavailableError(f"transport 'pyslurm' asked for, but {why}")
        return (
            runner,
            PyslurmTransport(),
            f"pyslurm {version} (transport = 'pyslurm' in the config)",
        )
    if version is None:
        why = unusable or "pyslurm does not import"
        return runner, None, f"{cli} (transport = 'auto': {why})"
    built_for, release = pyslurm_built_for(), _release(runner)
    if release is None:
        return runner, None, f"{cli} (transport = 'auto': the cluster's release is unknown)"
    if pyslurm_matches(built_for, release):
        return (
            runner,
            PyslurmTransport(),
            f"pyslurm {version} (transport = 'auto': built for Slurm {_dotted(release)}, "
            "the cluster's release)",
        )
    built = _dotted(built_for) if built_for else "an unknown release"
    return (
        runner,
        None,
        f"{cli} (transport = 'auto': pyslurm {version} is built for Slurm {built}, "
        f"the cluster runs {_dotted(release)})",
    )


def _dotted(release: tuple[int, int]) -> str:
    return f"{release[0]}.{release[1]:02d}"
