#!/usr/bin/env python3
"""Record what Slurm 22.05 prints for each job situation dispatch must recognise.

Runs against the local cluster (slurm_helpers/localcluster up) and writes, for
each scenario, a folder beside this file:

    submit.txt     the sbatch command line, its exit code, stdout and stderr
    squeue.json    squeue --json            (22.05 ignores -j here: all jobs it knows)
    squeue.txt     squeue -h -t all -j ID -o FORMAT (FORMAT in meta.json)
    scontrol.txt   scontrol show job -o ID
    sacct.txt      sacct -j ID -D -P -n --format=FIELDS (FIELDS in meta.json)
    sacct.json     sacct -j ID -D --json
    meta.json      job id, every command line with its exit code and stderr,
                   sinfo --version, the capture time, and what was done to the job

Standard library only. Usage (as root, cluster up):

    eval "$(slurm_helpers/localcluster env)"
    python3 tests/data/slurm-22.05/record.py [scenario ...]

The whole run takes about two and a half minutes (the time-limit scenario
waits for a real one-minute limit to expire).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

OUT = Path(os.environ.get("RECORD_OUT", Path(__file__).resolve().parent))
SQUEUE_FORMAT = "%i|%j|%T|%r|%k|%S|%e|%V|%M|%l|%D|%N|%P|%u|%a|%h|%E"
SACCT_FIELDS = (
    "JobID,JobIDRaw,JobName,Partition,State,ExitCode,DerivedExitCode,Reason,Comment,"
    "Submit,Eligible,Start,End,Elapsed,Timelimit,NNodes,AllocCPUS,NodeList,Flags"
)
WORKDIR = Path(os.environ.get("RECORD_WORKDIR", "/tmp/slurm-22.05-record"))


def sh(cmd: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, text=True, capture_output=True, timeout=timeout)


def version() -> str:
    return sh(["sinfo", "--version"]).stdout.strip()


def submit(name: str, args: list[str], script: str) -> tuple[int | None, dict[str, Any]]:
    """sbatch; returns (job id or None, record of the call)."""
    cmd = [
        "sbatch",
        "--parsable",
        f"--job-name=dj-{name}",
        f"--comment=dispatch:{name}:1:1",
        f"--output={WORKDIR}/%j.out",
        *args,
        "--wrap",
        script,
    ]
    proc = sh(cmd)
    jobid = int(proc.stdout.strip().split(";")[0]) if proc.returncode == 0 else None
    rec = {"cmd": cmd, "rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}
    return jobid, rec


def state_of(jobid: int) -> str:
    proc = sh(["squeue", "-h", "-t", "all", "-j", str(jobid), "-o", "%T|%r"])
    return proc.stdout.strip()


def wait_until(jobid: int | None, pred: Callable[[str], bool], timeout: float, what: str) -> str:
    if jobid is None:
        raise SystemExit(f"no job to wait for ({what}): sbatch refused it")
    deadline = time.monotonic() + timeout
    while True:
        st = state_of(jobid)
        if pred(st):
            return st
        if time.monotonic() > deadline:
            raise SystemExit(f"job {jobid}: timed out waiting for {what}; last {st!r}")
        time.sleep(0.5)


def capture(
    scenario: str,
    jobid: int | None,
    submit_rec: dict[str, Any],
    notes: list[str],
    folder: str | None = None,
) -> None:
    d = OUT / (folder or scenario)
    d.mkdir(parents=True, exist_ok=True)
    (d / "submit.txt").write_text(
        "$ "
        + " ".join(_quote(a) for a in submit_rec["cmd"])
        + "\n"
        + f"# exit code {submit_rec['rc']}\n"
        + f"# stdout:\n{submit_rec['stdout']}# stderr:\n{submit_rec['stderr']}"
    )
    meta: dict[str, Any] = {
        "scenario": scenario,
        "job_id": jobid,
        "sinfo_version": version(),
        "captured_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "what_was_done": notes,
        "squeue_format": SQUEUE_FORMAT,
        "sacct_fields": SACCT_FIELDS,
        "commands": {},
    }
    if jobid is not None:
        j = str(jobid)
        calls = {
            "squeue.json": ["squeue", "--json"],
            "squeue.txt": ["squeue", "-h", "-t", "all", "-j", j, "-o", SQUEUE_FORMAT],
            "scontrol.txt": ["scontrol", "show", "job", "-o", j],
            "sacct.txt": ["sacct", "-j", j, "-D", "-P", "-n", f"--format={SACCT_FIELDS}"],
            "sacct.json": ["sacct", "-j", j, "-D", "--json"],
        }
        for fname, cmd in calls.items():
            proc = sh(cmd)
            (d / fname).write_text(proc.stdout)
            meta["commands"][fname] = {"cmd": cmd, "rc": proc.returncode, "stderr": proc.stderr}
    (d / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(
        f"recorded {folder or scenario}: job {jobid}: {state_of(jobid) if jobid else '-'}",
        flush=True,
    )


def _quote(a: str) -> str:
    return a if a and all(c.isalnum() or c in "-_=:./%,+@" for c in a) else repr(a)


def cancel(*jobids: int | None) -> None:
    ids = [str(j) for j in jobids if j]
    if ids:
        sh(["scancel", *ids])


def wait_nodes_idle(timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = sh(["sinfo", "-h", "-N", "-o", "%N %T"]).stdout.split("\n")
        states = {line.split()[1] for line in out if line.strip()}
        if states <= {"idle", "mixed", "allocated"} and "completing" not in states:
            return
        time.sleep(0.5)


SLEEP = "sleep 600"


def main(selected: list[str]) -> int:
    WORKDIR.mkdir(parents=True, exist_ok=True)
    os.chdir(WORKDIR)

    def want(scenario: str) -> bool:
        return not selected or scenario in selected

    print(version())

    # --- the time-limit job first: it takes a minute or two to expire. In `high` so
    # that no preemption below touches it.
    timeout_job = None
    if want("timeout"):
        timeout_job, timeout_rec = submit("timeout", ["-p", "high", "--time=1"], SLEEP)
        wait_until(timeout_job, lambda s: s.startswith("RUNNING"), 30, "running")

    if want("held"):
        j, rec = submit("held", ["--hold"], "true")
        time.sleep(1)
        capture("held", j, rec, ["submitted with --hold"])
        cancel(j)

    if want("begin-future"):
        # dispatch's own gate: a start time 10 Julian years ahead (315,576,000 s).
        j, rec = submit("begin-future", ["--begin=now+315576000"], "true")
        time.sleep(1)
        capture("begin-future", j, rec, ["submitted with --begin=now+315576000"])
        cancel(j)

    if want("completed"):
        j, rec = submit("completed", [], "echo done")
        wait_until(j, lambda s: s.startswith("COMPLETED"), 30, "completed")
        time.sleep(1)
        capture("completed", j, rec, ["ran `echo done` to completion"])

    if want("failed-exit3"):
        j, rec = submit("failed-exit3", [], "exit 3")
        wait_until(j, lambda s: s.startswith("FAILED"), 30, "failed")
        time.sleep(1)
        capture("failed-exit3", j, rec, ["the script ran `exit 3`"])

    if want("running"):
        j, rec = submit("running", ["-p", "high"], SLEEP)
        wait_until(j, lambda s: s.startswith("RUNNING"), 30, "running")
        time.sleep(1)
        capture("running", j, rec, ["captured while running"])
        cancel(j)
        wait_until(j, lambda s: s.startswith("CANCELLED"), 30, "cancelled")
        time.sleep(1)
        capture("running", j, rec, ["captured while running", "then scancel"], "cancelled")

    if want("no-capacity"):
        j, rec = submit("no-capacity", ["-N5"], "true")
        time.sleep(1)
        capture("no-capacity", j, rec, ["asked for 5 nodes; the cluster has 4"])
        cancel(j)

    if want("launch-failed"):
        # The prolog fails for a comment containing dispatch-fail-prolog.
        j, rec = submit(
            "launch-failed",
            ["--comment=dispatch:launch-failed:1:1,dispatch-fail-prolog"],
            "echo should-not-run",
        )
        wait_until(
            j,
            lambda s: (
                "launch failed" in s or s.split("|")[0] not in ("PENDING", "CONFIGURING", "RUNNING")
            ),
            30,
            "launch failure",
        )
        time.sleep(1)
        capture(
            "launch-failed",
            j,
            rec,
            [
                "comment contains dispatch-fail-prolog: the prolog exits 1",
                "sinfo -R afterwards: "
                + sh(["sinfo", "-h", "-R", "-o", "%N|%T|%E"]).stdout.strip(),
            ],
        )
        cancel(j)
        sh(["scontrol", "update", "nodename=n[1-4]", "state=resume"])  # undrain
        j2, rec2 = submit(
            "launch-failed-norequeue",
            ["--no-requeue", "--comment=dispatch:launch-failed-norequeue:1:1,dispatch-fail-prolog"],
            "echo should-not-run",
        )
        wait_until(
            j2,
            lambda s: (
                "launch failed" in s or s.split("|")[0] not in ("PENDING", "CONFIGURING", "RUNNING")
            ),
            30,
            "launch failure",
        )
        time.sleep(2)
        capture(
            "launch-failed-norequeue",
            j2,
            rec2,
            [
                "--no-requeue; comment contains dispatch-fail-prolog: the prolog exits 1",
                "sinfo -R afterwards: "
                + sh(["sinfo", "-h", "-R", "-o", "%N|%T|%E"]).stdout.strip(),
            ],
        )
        cancel(j2)
        sh(["scontrol", "update", "nodename=n[1-4]", "state=resume"])
        wait_nodes_idle()

    # --- preemption: a `low` job on three whole nodes, then a `high` job needing them.
    if want("preempted-requeued"):
        lo, rec = submit("preempted-requeued", ["-p", "low", "-N3", "--exclusive"], SLEEP)
        wait_until(lo, lambda s: s.startswith("RUNNING"), 30, "running")
        pend, prec = submit("pending-resources", ["-p", "low", "-N4", "--exclusive"], "true")
        time.sleep(2)
        capture(
            "pending-resources",
            pend,
            prec,
            ["asked for 4 whole nodes while 3 are taken by a running job"],
        )
        cancel(pend)
        hi, hrec = submit("preemptor", ["-p", "high", "-N3", "--exclusive"], SLEEP)
        wait_until(lo, lambda s: not s.startswith("RUNNING"), 30, "preemption")
        wait_until(lo, lambda s: s.startswith("PENDING"), 30, "requeue")
        time.sleep(1)
        capture(
            "preempted-requeued",
            lo,
            rec,
            [
                f"running in `low` (PreemptMode=REQUEUE); job {hi} submitted to `high` "
                "with -N3 --exclusive"
            ],
        )
        capture("preemptor", hi, hrec, [f"the `high` job that preempted job {lo}"])
        cancel(hi)
        # cred_expire=30 in slurm.conf: the requeued job may start again ~31 s later.
        wait_until(lo, lambda s: s.startswith("RUNNING"), 90, "restart after requeue")
        time.sleep(1)
        capture(
            "preempted-requeued",
            lo,
            rec,
            [
                f"preempted by job {hi} and requeued",
                f"job {hi} cancelled",
                "captured once the requeued job runs again",
            ],
            "preempted-requeued-rerun",
        )
        cancel(lo)
        wait_nodes_idle()

    if want("preempted-cancel"):
        lo, rec = submit("preempted-cancel", ["-p", "lowcancel", "-N3", "--exclusive"], SLEEP)
        wait_until(lo, lambda s: s.startswith("RUNNING"), 30, "running")
        hi, hrec = submit("preemptor-cancel", ["-p", "high", "-N3", "--exclusive"], SLEEP)
        wait_until(lo, lambda s: not s.startswith("RUNNING"), 30, "preemption")
        time.sleep(1)
        capture(
            "preempted-cancel",
            lo,
            rec,
            [
                f"running in `lowcancel` (PreemptMode=CANCEL); job {hi} submitted to `high` "
                "with -N3 --exclusive"
            ],
        )
        wait_until(lo, lambda s: not s.startswith("COMPLETING"), 30, "end of completing")
        time.sleep(1)
        capture(
            "preempted-cancel",
            lo,
            rec,
            ["the same, a few seconds later"],
            "preempted-cancel-settled",
        )
        cancel(hi)
        wait_nodes_idle()

    # --- between two runs: `scontrol requeue` raises the restart count at once, while the
    # run it requeued is still COMPLETING (the batch shell ignores SIGTERM, so KillWait runs).
    if want("requeued-completing"):
        script = "trap '' TERM; " + SLEEP
        j, rec = submit("requeued-completing", ["-p", "low", "-N1", "--requeue"], script)
        wait_until(j, lambda s: s.startswith("RUNNING"), 30, "running")
        time.sleep(2)  # accounting has the run's start
        sh(["scontrol", "requeue", str(j)])
        wait_until(j, lambda s: s.startswith("COMPLETING"), 10, "completing")
        time.sleep(1)
        capture(
            "requeued-completing",
            j,
            rec,
            ["running with --requeue, its shell ignoring SIGTERM; `scontrol requeue` it"],
        )
        wait_until(j, lambda s: s.startswith("RUNNING"), 120, "restart after requeue")
        time.sleep(2)
        sh(["scancel", str(j)])
        wait_until(j, lambda s: s.startswith("COMPLETING"), 10, "completing")
        time.sleep(1)
        capture(
            "requeued-completing",
            j,
            rec,
            ["the same job running again after the requeue; `scancel` it"],
            "requeued-rerun-completing",
        )
        cancel(j)
        wait_nodes_idle()

    # --- node failure: the job's first node is set down while it runs.
    if want("node-failed"):
        # Keep clear of the node running the time-limit job: setting it down would
        # end that job too.
        avoid = (
            sh(["squeue", "-h", "-j", str(timeout_job), "-o", "%N"]).stdout.strip()
            if timeout_job
            else ""
        )
        exclude = [f"--exclude={avoid}"] if avoid else []
        for name, extra in (("node-failed", []), ("node-failed-norequeue", ["--no-requeue"])):
            j, rec = submit(name, ["-p", "high", "-N2", *exclude, *extra], SLEEP)
            wait_until(j, lambda s: s.startswith("RUNNING"), 30, "running")
            nodes = sh(["squeue", "-h", "-j", str(j), "-o", "%N"]).stdout.strip()
            first = sh(["scontrol", "show", "hostnames", nodes]).stdout.split()[0]
            sh(["scontrol", "update", f"nodename={first}", "state=down", "reason=dispatch-test"])
            wait_until(j, lambda s: not s.startswith("RUNNING"), 30, "node failure")
            time.sleep(2)
            capture(
                name,
                j,
                rec,
                [
                    f"running on {nodes}; `scontrol update nodename={first} "
                    "state=down reason=dispatch-test`"
                ],
            )
            cancel(j)
            sh(["scontrol", "update", f"nodename={first}", "state=resume"])
            wait_nodes_idle()

    if timeout_job is not None:
        wait_until(
            timeout_job, lambda s: not s.startswith(("RUNNING", "COMPLETING")), 200, "time limit"
        )
        time.sleep(1)
        capture("timeout", timeout_job, timeout_rec, ["--time=1 and `sleep 600`"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
