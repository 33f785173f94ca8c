"""Choosing a transport: pyslurm in-process where it matches the release, else the CLI
(local, under a prefix, or over ssh). With pyslurm, find and every effect on an object go
through it; the CLI runner stays for the probes (release, user, config) and for batch-script
jobs, whose sbatch options only sbatch reads."""

from __future__ import annotations

from dispatch.adapters.slurm import parse, render
from dispatch.adapters.slurm.pyslurm_run import PyslurmTransport, pyslurm_version
from dispatch.adapters.slurm.run import CommandRunner
from dispatch.adapters.slurm.settings import SlurmSettings
from dispatch.model.errors import UnavailableError


def command_runner(s: SlurmSettings) -> CommandRunner:
    """The CLI runner the settings ask for."""
    env = {"SLURM_CONF": s.slurm_conf} if s.slurm_conf else {}
    if s.transport == "ssh" or (s.transport == "auto" and s.ssh_host):
        runner = CommandRunner.ssh(s.ssh_host, timeout=s.timeout, options=s.ssh_options)
        runner.env.update(env)
        runner.commands = s.commands
        return runner
    return CommandRunner(prefix=s.prefix, timeout=s.timeout, env=env, commands=s.commands)


def pyslurm_matches(version: str | None, release: tuple[int, int]) -> bool:
    """pyslurm's version starts with the Slurm release it was built for (25.11.x)."""
    if not version:
        return False
    try:
        return parse.parse_version(version) == release
    except Exception:
        return False


def choose_transport(s: SlurmSettings) -> tuple[CommandRunner, PyslurmTransport | None]:
    """The runner, and the pyslurm transport when pyslurm is asked for or fits automatically."""
    runner = command_runner(s)
    if s.transport in ("cli", "ssh"):
        return runner, None
    version = pyslurm_version()
    if s.transport == "pyslurm":
        if version is None:
            raise UnavailableError("transport 'pyslurm' asked for, but pyslurm does not import")
        return runner, PyslurmTransport()
    if version is None:
        return runner, None
    reply = runner.run(render.version_argv())
    if reply.ok and pyslurm_matches(version, parse.parse_version(reply.stdout)):
        return runner, PyslurmTransport()
    return runner, None
