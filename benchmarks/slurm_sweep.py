"""Scheduler RPCs per sweep, and recovery latency, on the live local Slurm cluster.

For N supervised jobs (10, then 50) running on the cluster, one idle sweep is measured by the
controller's own counters (``sdiag``: RPCs by message type, reset before the sweep with
``sdiag --reset``). The figure must not grow with N: one ``squeue`` and at most one ``sacct`` per
sweep. The baseline beside it is what a naive poller pays: one ``squeue`` per job.

Recovery latency: one job is preempted by a ``high`` job while a follow-mode loop sweeps every
``--every`` seconds; the time from the preempting submission to the release (open) of the next
submission is read from the ledger and printed.

    slurm_helpers/localcluster up && eval "$(slurm_helpers/localcluster env)"
    .venv/bin/python benchmarks/slurm_sweep.py [--sizes 10,50] [--every 1]

Run it on a quiet cluster: other clients' RPCs would count too.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

import dispatch
from dispatch.adapters.slurm.backend import SlurmBackend
from dispatch.adapters.slurm.run import CommandRunner
from dispatch.adapters.slurm.settings import SlurmSettings
from dispatch.core.fold import fold
from dispatch.records.file import FileRecords
from dispatch.supervise import Supervisor

ADA = dispatch.Actor(kind=dispatch.ActorKind.HUMAN, id="bench")


def rpcs() -> dict[str, int]:
    out = subprocess.run(["sdiag"], capture_output=True, text=True, check=True).stdout
    section = out.split("Remote Procedure Call statistics by message type")[1]
    section = section.split("Remote Procedure Call statistics by user")[0]
    return {
        m.group(1): int(m.group(2)) for m in re.finditer(r"(\w+)\s+\(\s*\d+\) count:(\d+)", section)
    }


def reset() -> None:
    subprocess.run(["sdiag", "--reset"], capture_output=True, check=True)


def run_jobs(n: int, root: Path) -> tuple[Supervisor, FileRecords, SlurmBackend, list[str]]:
    env = {"SLURM_CONF": os.environ["SLURM_CONF"]}
    backend = SlurmBackend(CommandRunner(env=env, timeout=60), SlurmSettings(transport="cli"))
    store = FileRecords(root / "ledger")
    cluster = dispatch.compose(backend, dispatch.Config(store=store))
    rule = dispatch.Rule(on=["preempted"], action="resubmit", budget=3)
    spec = dispatch.JobSpec(
        command=("sleep", "900"),
        partition="low",
        working_directory=str(root),
        output_path="/dev/null",
        recovery=dispatch.RecoveryPolicy(rules=[rule]),
    )
    jobs = [cluster.operator.submit(spec, ADA, supervised=True).job for _ in range(n)]
    sup = Supervisor(backend, store)
    for _ in range(6):  # authorize, start, canonical, open: a few sweeps launch everything
        sup.sweep()
    return sup, store, backend, jobs


def idle_sweep_rpcs(sup: Supervisor) -> tuple[int, dict[str, int], float]:
    reset()
    start = time.perf_counter()
    sup.sweep()
    took = time.perf_counter() - start
    counts = {k: v for k, v in rpcs().items() if v}
    counts.pop("REQUEST_STATS_INFO", None)  # sdiag's own request
    return sum(counts.values()), counts, took


def naive_rpcs(backend: SlurmBackend, jobs: list[str]) -> int:
    reset()
    for job in jobs:
        subprocess.run(["squeue", "-h", "--name", f"dj-{job}"], capture_output=True, check=True)
    counts = rpcs()
    counts.pop("REQUEST_STATS_INFO", None)
    return sum(counts.values())


def recovery_latency(
    sup: Supervisor, store: FileRecords, backend: SlurmBackend, job: str, every: float
) -> float:
    view = store.read(job)
    ref = fold(view, dispatch.SystemClock().now()).submissions[0].canonical
    assert ref is not None
    node = backend.inspect(ref).nodes[0]
    started = time.time()
    high = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--partition=high",
            f"--nodelist={node}",
            "--exclusive",
            "--output=/dev/null",
            "--wrap=sleep 30",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            sup.sweep()
            j = fold(store.read(job), dispatch.SystemClock().now())
            second = j.submission(2)
            if second is not None and second.canonical is not None:
                rec = j.object(second.canonical)
                if rec is not None and rec.opening_at is not None:
                    return rec.opening_at.timestamp() - started
            time.sleep(every)
        raise SystemExit("submission 2 was never released")
    finally:
        subprocess.run(["scancel", high], capture_output=True)


def _running(store: FileRecords, backend: SlurmBackend, job: str) -> bool:
    ref = fold(store.read(job), dispatch.SystemClock().now()).submissions[0].canonical
    return ref is not None and bool(backend.inspect(ref).nodes)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10,50")
    ap.add_argument("--every", type=float, default=1.0)
    args = ap.parse_args()
    print(f"{'jobs':>5} {'RPCs/sweep':>11} {'naive RPCs':>11} {'ratio':>7} {'sweep s':>8}  by type")
    for n in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            sup, store, backend, jobs = run_jobs(n, Path(tmp))
            try:
                total, counts, took = idle_sweep_rpcs(sup)
                naive = naive_rpcs(backend, jobs)
                kinds = ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))
                ratio = naive / max(total, 1)
                figures = f"{n:>5} {total:>11} {naive:>11} {ratio:>7.1f} {took:>8.2f}"
                print(f"{figures}  {kinds}", flush=True)
                if n == int(args.sizes.split(",")[0]):
                    job = next(j for j in jobs if _running(store, backend, j))
                    latency = recovery_latency(sup, store, backend, job, args.every)
                    print(
                        "recovery latency, preemption to the next submission's release: "
                        f"{latency:.1f} s (sweeping every {args.every:g} s)"
                    )
            finally:
                for job in jobs:
                    backend.stop_job(job, "benchmark done")


if __name__ == "__main__":
    main()
