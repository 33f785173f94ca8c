"""Recovery latency in sweeps and seconds, live on the local Slurm cluster, against a baseline.

For each sweep interval (1 s and 5 s by default) one supervised job goes through its life while
``dispatch sweep`` runs as cron runs it (a new process each tick, from the config file):

* launch: from the job's record being created to its first execution's release (the open);
* recovery: from the preempting ``high`` job's submission to the release of the next
  submission;
* settle: from the last execution's end to the record's settle.

Sweeps are counted from the one that saw the event (the first whose record holds the ending;
for the launch, the first sweep) to the one that completed the stage, both included; seconds
from the event itself. Each is printed in sweeps and in seconds (read from the ledger's commit
times), for this checkout and, side by side, for a baseline revision of the repository
(``--baseline``, by default the one before sweeps carried jobs through several stages), run from
a temporary ``git worktree`` of it with the same Python. Then the scheduler queries of one idle
sweep at 10 and 100 idle jobs, for both, beside issue 17's goal (the controller asked once, slurmdbd
never): the controller's RPCs by message type (``sdiag``, reset first) and slurmdbd's job
queries (``DBD_GET_JOBS_COND`` of ``sacctmgr show stats``, what sacct asks).

    slurm_helpers/localcluster up && eval "$(slurm_helpers/localcluster env)"
    .venv/bin/python benchmarks/recovery_latency.py [--every 1,5] [--sizes 10,100]
        [--baseline REV]
    .venv/bin/python benchmarks/recovery_latency.py --every= --baseline 0d1dd35^   # idle RPCs only

With ``--shared``, instead: how long after a preemption a job with a shared checkpoint
(``#DISPATCH --checkpoint=shared``) runs again, in sweeps and seconds, with the SPANK plugin
(its spool from ``LOCALCLUSTER_SPANK_SPOOL``: ``localcluster up --spank``) and without it,
side by side for each sweep interval. Without it the recovery hold waits for a person (24 h);
the run says so once the hold has stood ``--give-up`` seconds.

    slurm_helpers/localcluster up --spank && eval "$(slurm_helpers/localcluster env)"
    .venv/bin/python benchmarks/recovery_latency.py --shared [--every 1,5] [--give-up 180]

Run it on a quiet cluster: other clients' jobs and RPCs would count too.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import dispatch
from dispatch.adapters.slurm.backend import SlurmBackend
from dispatch.adapters.slurm.run import CommandRunner
from dispatch.adapters.slurm.settings import SlurmSettings
from dispatch.core.fold import fold
from dispatch.core.job import Job
from dispatch.records.file import FileRecords

REPO = Path(__file__).resolve().parents[1]
ADA = dispatch.Actor(kind=dispatch.ActorKind.HUMAN, id="bench")
# The commit that made a sweep carry each job through every stage it can establish; the
# baseline is its parent.
CARRY_COMMIT = ":/A sweep carries each job as far as it safely can"
PATIENCE = 240.0  # seconds: every wait below is bounded by this


@dataclass
class Variant:
    """A checkout whose ``dispatch sweep`` is run: this one, or a baseline worktree."""

    name: str
    source: Path

    def sweep(self, config: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(self.source)}
        done = subprocess.run(
            [sys.executable, "-m", "dispatch.cli.main", "sweep", "--config", str(config)],
            env=env,
            cwd=tempfile.gettempdir(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode not in (0, 1):
            raise SystemExit(f"{self.name}: dispatch sweep exited {done.returncode}: {done.stderr}")


@dataclass
class Site:
    """A ledger, its config file, and the slurm backend this process reads it with."""

    root: Path
    spool: str = ""
    shared: bool = False

    def __post_init__(self) -> None:
        self.config = self.root / "dispatch.toml"
        spool = f'spank_spool = "{self.spool}"\n' if self.spool else ""
        self.config.write_text(
            f'ledger = "{self.root / "ledger"}"\n[backend]\nname = "slurm"\n'
            f'[backend.settings]\ntransport = "cli"\nslurm_conf = "{os.environ["SLURM_CONF"]}"\n'
            + spool
        )
        self.config.chmod(0o600)
        env = {"SLURM_CONF": os.environ["SLURM_CONF"]}
        runner = CommandRunner(env=env, timeout=60)
        self.backend = SlurmBackend(runner, SlurmSettings(transport="cli", spank_spool=self.spool))
        self.store = FileRecords(self.root / "ledger")
        self.cluster = dispatch.compose(self.backend, dispatch.Config(store=self.store))

    def submit(self, n: int = 1) -> list[str]:
        rule = dispatch.Rule(on=["preempted"], action="resubmit", budget=3)
        spec = dispatch.JobSpec(
            command=(
                "sh",
                "-c",
                f'until [ -e "{self.root}/go-$DISPATCH_SUBMISSION" ]; do sleep 1; done',
            ),
            partition="low",
            working_directory=str(self.root),
            output_path="/dev/null",
            recovery=dispatch.RecoveryPolicy(rules=[rule]),
            extensions=[dispatch.SharedCheckpoint()] if self.shared else [],
        )
        return [self.cluster.operator.submit(spec, ADA, supervised=True).job for _ in range(n)]

    def job(self, job: str) -> Job:
        return fold(self.store.read(job), dispatch.SystemClock().now())

    def opened(self, job: str, n: int) -> float | None:
        """When submission ``n``'s canonical object was opened (epoch seconds), if it was."""
        sub = self.job(job).submission(n)
        if sub is None or sub.canonical is None:
            return None
        rec = self.job(job).object(sub.canonical)
        return rec.opening_at.timestamp() if rec is not None and rec.opening_at else None

    def settled_at(self, job: str) -> float | None:
        view = self.store.read(job)
        for commit in view.commits:
            for entry in commit.entries:
                if entry.kind == "settle":
                    return entry.at.timestamp()  # type: ignore[union-attr]
        return None


def sweeps_until(
    variant: Variant,
    site: Site,
    every: float,
    done: Callable[[], float | None],
    seen: Callable[[], bool] = lambda: True,
) -> tuple[int, float]:
    """Sweep every ``every`` seconds until ``done`` gives a time: the sweeps run from the first
    one after which ``seen`` held (the sweep that saw the event) to that one, and the time."""
    deadline = time.monotonic() + PATIENCE
    sweeps = 0
    while time.monotonic() < deadline:
        variant.sweep(site.config)
        if sweeps or seen():
            sweeps += 1
        at = done()
        if at is not None:
            return sweeps, at
        time.sleep(every)
    raise SystemExit(f"{variant.name}: gave up after {PATIENCE:g}s")


def ended_seen(site: Site, job: str, n: int) -> Callable[[], bool]:
    """Whether the record holds the end of submission ``n``'s execution (a sweep saw it)."""

    def seen() -> bool:
        sub = site.job(job).submission(n)
        if sub is None or sub.canonical is None:
            return False
        rec = site.job(job).object(sub.canonical)
        return rec is not None and rec.last is not None and rec.last.state.value == "ended"

    return seen


def running_node(site: Site, job: str) -> str:
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        ref = site.job(job).submissions[-1].canonical
        if ref is not None:
            obs = site.backend.inspect(ref)
            if obs.state.value == "running" and obs.nodes:
                return obs.nodes[0]
        time.sleep(0.5)
    raise SystemExit("the job never ran")


def ended_at(site: Site, job: str) -> float:
    """Wait until the latest execution has ended in Slurm; when it ended (this clock)."""
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        ref = site.job(job).submissions[-1].canonical
        if ref is not None and site.backend.inspect(ref).state.value == "ended":
            return time.time()
        time.sleep(0.2)
    raise SystemExit("the job never ended")


def lifecycle(variant: Variant, every: float) -> dict[str, tuple[int, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        site = Site(Path(tmp))
        (job,) = site.submit()
        created = time.time()
        launch = sweeps_until(variant, site, every, lambda: site.opened(job, 1))
        node = running_node(site, job)
        preempted = time.time()
        high = subprocess.run(
            [
                "sbatch",
                "--parsable",
                "--partition=high",
                f"--nodelist={node}",
                "--exclusive",
                "--output=/dev/null",
                "--wrap=sleep 10",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        try:
            recovery = sweeps_until(
                variant, site, every, lambda: site.opened(job, 2), ended_seen(site, job, 1)
            )
            running_node(site, job)
            (site.root / "go-2").touch()
            end = ended_at(site, job)
            settle = sweeps_until(
                variant, site, every, lambda: site.settled_at(job), ended_seen(site, job, 2)
            )
        finally:
            subprocess.run(["scancel", high], capture_output=True)
            site.backend.stop_job(job, "benchmark done")
        return {
            "launch": (launch[0], launch[1] - created),
            "recovery": (recovery[0], recovery[1] - preempted),
            "settle": (settle[0], max(0.0, settle[1] - end)),
        }


def shared_recovery(spool: str, every: float, give_up: float) -> tuple[int, float] | None:
    """Sweeps and seconds from a preemption to the next submission's release, for a shared
    checkpoint; None when the hold still stood after ``give_up`` seconds."""
    variant = Variant("this", REPO)
    with tempfile.TemporaryDirectory() as tmp:
        site = Site(Path(tmp), spool=spool, shared=True)
        (job,) = site.submit()
        sweeps_until(variant, site, every, lambda: site.opened(job, 1))
        node = running_node(site, job)
        preempted = time.time()
        high = subprocess.run(
            [
                "sbatch",
                "--parsable",
                "--partition=high",
                f"--nodelist={node}",
                "--exclusive",
                "--output=/dev/null",
                "--wrap=sleep 10",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        try:
            seen, sweeps = ended_seen(site, job, 1), 0
            while time.time() - preempted < give_up:
                variant.sweep(site.config)
                if sweeps or seen():
                    sweeps += 1
                at = site.opened(job, 2)
                if at is not None:
                    return sweeps, at - preempted
                time.sleep(every)
            return None
        finally:
            subprocess.run(["scancel", high], capture_output=True)
            site.backend.stop_job(job, "benchmark done")


def shared_main(everies: list[float], give_up: float) -> None:
    spool = os.environ.get("LOCALCLUSTER_SPANK_SPOOL", "")
    if not spool:
        raise SystemExit("no LOCALCLUSTER_SPANK_SPOOL: run `localcluster up --spank` and its env")
    print(f"{'every':>6} | {'with the plugin: sweeps':>23} {'seconds':>8} | without the plugin")
    for every in everies:
        got = shared_recovery(spool, every, give_up)
        without = shared_recovery("", every, give_up)
        with_text = f"{got[0]:>23} {got[1]:>8.1f}" if got else f"{'still held':>23} {'-':>8}"
        assert without is None, "a shared checkpoint recovered without the plugin"
        print(
            f"{every:>5g}s | {with_text} | still held after {give_up:g} s: the 24 h hold "
            "waits for a person",
            flush=True,
        )


def _by_type(out: str) -> dict[str, int]:
    section = out.split("Remote Procedure Call statistics by message type")[1]
    section = section.split("Remote Procedure Call statistics by user")[0]
    found = re.finditer(r"(\w+)\s+\(\s*\d+\)\s+count:(\d+)", section)
    return {m.group(1): int(m.group(2)) for m in found}


def rpcs() -> dict[str, int]:
    """The controller's RPC counts by message type since the last reset, sdiag's own left out."""
    counts = _by_type(subprocess.run(["sdiag"], capture_output=True, text=True, check=True).stdout)
    counts.pop("REQUEST_STATS_INFO", None)
    return {k: v for k, v in counts.items() if v}


def dbd_queries() -> int:
    """slurmdbd's job queries so far (DBD_GET_JOBS_COND: what sacct asks)."""
    out = subprocess.run(["sacctmgr", "show", "stats"], capture_output=True, text=True, check=True)
    return _by_type(out.stdout).get("DBD_GET_JOBS_COND", 0)


def idle_rpcs(variants: list[Variant], n: int) -> dict[str, tuple[dict[str, int], int]]:
    """Per variant: the controller RPCs by type and slurmdbd's job queries of one idle sweep."""
    with tempfile.TemporaryDirectory() as tmp:
        site = Site(Path(tmp))
        jobs = site.submit(n)
        try:
            for _ in range(8):  # launch them all (the baseline takes a stage a sweep)
                variants[0].sweep(site.config)
            out = {}
            for v in variants:
                v.sweep(site.config)  # anything left to observe, observed
                subprocess.run(["sdiag", "--reset"], capture_output=True, check=True)
                before = dbd_queries()
                v.sweep(site.config)
                out[v.name] = (rpcs(), dbd_queries() - before)
            return out
        finally:
            for job in jobs:
                site.backend.stop_job(job, "benchmark done")


def worktree(rev: str, into: Path) -> Path:
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(into), rev],
        capture_output=True,
        check=True,
    )
    return into


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--every",
        default="1,5",
        help="sweep intervals in seconds (empty: none, only the idle sweep's RPCs)",
    )
    ap.add_argument("--sizes", default="10,100", help="idle jobs for the RPC count")
    ap.add_argument(
        "--baseline",
        default=None,
        help="the git revision to compare (default: "
        "the one before sweeps carried jobs through several stages)",
    )
    ap.add_argument(
        "--shared",
        action="store_true",
        help="a shared checkpoint's recovery with "
        "and without the SPANK plugin (no baseline, no RPC counts)",
    )
    ap.add_argument(
        "--give-up",
        type=float,
        default=180.0,
        help="with --shared: seconds a hold may stand before it counts as waiting for a person",
    )
    args = ap.parse_args()
    if args.shared:
        shared_main([float(e) for e in args.every.split(",") if e], args.give_up)
        return
    if args.baseline is None:
        carry = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", CARRY_COMMIT],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        args.baseline = f"{carry}^"
    with tempfile.TemporaryDirectory() as tmp:
        base = worktree(args.baseline, Path(tmp) / "baseline")
        try:
            variants = [Variant("this", REPO), Variant(f"baseline {args.baseline}", base)]
            print(
                f"{'every':>6} {'stage':>9} | {'this: sweeps':>12} {'seconds':>8} | "
                f"{'baseline: sweeps':>16} {'seconds':>8} | {'ratio (s)':>9}"
            )
            results = {}
            for every in (float(e) for e in args.every.split(",") if e):
                got = {v.name: lifecycle(v, every) for v in variants}
                results[every] = got
                for stage in ("launch", "recovery", "settle"):
                    (ts, tsec), (bs, bsec) = (got[v.name][stage] for v in variants)
                    ratio = bsec / tsec if tsec > 0 else float("inf")
                    print(
                        f"{every:>5g}s {stage:>9} | {ts:>12} {tsec:>8.1f} | {bs:>16} {bsec:>8.1f} "
                        f"| {ratio:>8.1f}x",
                        flush=True,
                    )
            print(
                f"\n{'idle jobs':>9} | {'goal: ctld':>10} {'dbd':>4} | {'this: ctld':>10} "
                f"{'dbd':>4} | {'baseline: ctld':>14} {'dbd':>4} | "
                "controller RPCs by type (this; baseline)"
            )
            for n in (int(s) for s in args.sizes.split(",")):
                counts = idle_rpcs(variants, n)
                (this, this_dbd), (base, base_dbd) = (counts[v.name] for v in variants)
                kinds = "; ".join(
                    ", ".join(f"{k}={v}" for k, v in sorted(c.items())) for c in (this, base)
                )
                print(
                    f"{n:>9} | {1:>10} {0:>4} | {sum(this.values()):>10} {this_dbd:>4} | "
                    f"{sum(base.values()):>14} {base_dbd:>4} | {kinds}",
                    flush=True,
                )
            print(json.dumps({str(k): v for k, v in results.items()}))
        finally:
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)],
                capture_output=True,
            )


if __name__ == "__main__":
    main()
