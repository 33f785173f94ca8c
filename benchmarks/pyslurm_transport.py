"""The pyslurm transport against the CLI transport, side by side on the same cluster.

For each transport, in turn on the same Slurm: N supervised jobs (``--jobs``, default 10) are
launched one at a time, each through submit-held, record and release (``Supervisor.launch``: the
held start, its record, the open), then one idle sweep of all N is measured. The figures are
the controller's own counters (``sdiag``: RPCs by message type, reset before each measured part),
the wall time, and what the transport itself did: the processes it started (Slurm commands) and
the calls it made in-process (pyslurm). The CLI transport is the baseline, printed first.
While it measures, one ``high`` job holds every node, so the jobs stay pending: no job starts,
and the cluster's prolog (which runs ``scontrol show job``) and the nodes add no RPCs.

pyslurm links the cluster's libslurm, so this runs where pyslurm imports: for the sid chroot,

    slurm_helpers/localcluster --release sid up && slurm_helpers/pyslurm/build
    slurm_helpers/pyslurm/in-chroot python benchmarks/pyslurm_transport.py [--jobs 10]

Run it on a quiet cluster: other clients' RPCs would count too.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

import dispatch
from dispatch.adapters.slurm.backend import SlurmBackend
from dispatch.adapters.slurm.pyslurm_run import PyslurmTransport
from dispatch.adapters.slurm.run import CommandRunner
from dispatch.adapters.slurm.settings import SlurmSettings
from dispatch.records.file import FileRecords
from dispatch.supervise import Supervisor

ADA = dispatch.Actor(kind=dispatch.ActorKind.HUMAN, id="bench")


def rpcs() -> Counter[str]:
    """The controller's RPC counts by message type since the last reset, sdiag's own left out."""
    out = subprocess.run(["sdiag"], capture_output=True, text=True, check=True).stdout
    section = out.split("Remote Procedure Call statistics by message type")[1]
    section = section.split("Remote Procedure Call statistics by user")[0]
    found = Counter(
        {m[1]: int(m[2]) for m in re.finditer(r"(\w+)\s+\(\s*\d+\) count:(\d+)", section)}
    )
    found.pop("REQUEST_STATS_INFO", None)
    return +found


def reset() -> None:
    subprocess.run(["sdiag", "--reset"], capture_output=True, check=True)


def backend_for(transport: str) -> SlurmBackend:
    env = {"SLURM_CONF": os.environ["SLURM_CONF"]}
    runner = CommandRunner(env=env, timeout=60)
    if transport == "pyslurm":
        return SlurmBackend(runner, SlurmSettings(transport="pyslurm"), reader=PyslurmTransport())
    return SlurmBackend(runner, SlurmSettings(transport="cli"))


def hold_the_nodes() -> str:
    """A ``high`` job on every node, running; its id."""
    job = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--partition=high",
            "--nodes=4",
            "--exclusive",
            "--output=/dev/null",
            "--job-name=bench-blocker",
            "--wrap=sleep 900",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        state = subprocess.run(
            ["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True
        ).stdout.strip()
        if state == "RUNNING":
            time.sleep(3)  # its prolog's RPCs are done
            return job
        time.sleep(0.5)
    raise SystemExit(f"the blocking job {job} never ran")


def work(backend: SlurmBackend) -> Counter[str]:
    """What the transport did so far: processes started, and pyslurm calls made."""
    done = Counter({f"process {k}": v for k, v in backend.runner.counts.items()})
    if backend.reader is not None:
        done.update({k: v for k, v in backend.reader.counts.items()})
    return done


def measure(transport: str, n: int, root: Path) -> list[str]:
    backend = backend_for(transport)
    store = FileRecords(root / "ledger")
    cluster = dispatch.compose(backend, dispatch.Config(store=store))
    spec = dispatch.JobSpec(
        command=("sleep", "900"),
        partition="low",
        working_directory=str(root),
        output_path="/dev/null",
    )
    sup = Supervisor(backend, store)
    jobs = [cluster.operator.submit(spec, ADA, supervised=True).job for _ in range(n)]
    backend.capabilities()  # the probes once, outside both measured parts
    lines = []
    try:
        before = work(backend)
        reset()
        start = time.perf_counter()
        for job in jobs:
            sup.launch(job)
        took = time.perf_counter() - start
        lines.append(row(transport, "launch (per job)", rpcs(), work(backend) - before, took, n))
        before = work(backend)
        reset()
        start = time.perf_counter()
        sup.sweep()
        took = time.perf_counter() - start
        lines.append(row(transport, f"idle sweep of {n}", rpcs(), work(backend) - before, took, 1))
    finally:
        for job in jobs:
            backend.stop_job(job, "benchmark done")
    return lines


def row(
    transport: str, what: str, calls: Counter[str], done: Counter[str], s: float, per: int
) -> str:
    kinds = ", ".join(f"{k}={v / per:g}" for k, v in sorted(calls.items()))
    procs = sum(v for k, v in done.items() if k.startswith("process "))
    inproc = sum(v for k, v in done.items() if k.startswith("pyslurm."))
    return (
        f"{transport:<8} {what:<18} {sum(calls.values()) / per:>6.1f} {procs / per:>6.1f} "
        f"{inproc / per:>6.1f} {s / per * 1000:>9.0f}  {kinds}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10)
    args = ap.parse_args()
    print(f"{'via':<8} {'what':<18} {'RPCs':>6} {'forks':>6} {'calls':>6} {'wall ms':>9}  by type")
    blocker = hold_the_nodes()
    try:
        for transport in ("cli", "pyslurm"):
            with tempfile.TemporaryDirectory() as tmp:
                for line in measure(transport, args.jobs, Path(tmp)):
                    print(line, flush=True)
    finally:
        subprocess.run(["scancel", blocker], capture_output=True)


if __name__ == "__main__":
    main()
