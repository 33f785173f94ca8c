"""End to end on the local Slurm cluster: 48 eight-second jobs submitted and run to the end,
by ``dispatch sbatch`` one call after another (supervised by ``dispatch supervise --follow``
sweeping every ``--every`` seconds), against submitit's executor (one job array) in the same
run. With ``--array``, dispatch submits them as submitit does, as one array: one
``dispatch sbatch --array=0-47`` call (one held Slurm array, released by one command).

submitit comes from PyPI into its own virtualenv (``--submitit-python``, default
``/tmp/submitit-venv/bin/python``; make it with ``python3 -m venv /tmp/submitit-venv &&
/tmp/submitit-venv/bin/pip install submitit``), so the project never depends on it. For each
side: the seconds to submit all 48, and the seconds from the first submission until every job
has ended (dispatch: every job settled in the ledger; submitit: every result returned). Both
use the ``low`` partition, one task a job, ``--time=00:10:00``.

    LOCALCLUSTER_PORT_BASE=... .venv/bin/python benchmarks/sbatch_vs_submitit.py [--jobs 48]
        [--every 1] [--array] [--runs 1]

Each run measures submitit first, then dispatch, and prints its own rows; the poll that
notices the end is the same for both sides' figures where it can be: dispatch's is a
``dispatch list --json`` every ``POLL`` seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sbatch import cluster_env  # noqa: E402

DISPATCH = str(Path(sys.executable).parent / "dispatch")
SECONDS = 8
POLL = 0.2  # seconds between two looks at dispatch's unsettled jobs

SUBMITIT = """
import sys, time, submitit
folder, jobs, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
def work(i):
    time.sleep(seconds)
    return i
ex = submitit.AutoExecutor(folder=folder, cluster="slurm")
ex.update_parameters(slurm_partition="low", timeout_min=10, tasks_per_node=1, nodes=1)
t0 = time.perf_counter()
running = ex.map_array(work, range(jobs))
submitted = time.perf_counter() - t0
assert sorted(j.result() for j in running) == list(range(jobs))
print(submitted, time.perf_counter() - t0)
"""


def run_dispatch(
    folder: Path, env: dict[str, str], jobs: int, every: float, array: bool
) -> tuple[float, float]:
    """Submit ``jobs`` with ``dispatch sbatch``, one after another or (``array``) as one array,
    a supervisor sweeping beside them; seconds to submit them all, and until every one
    settled."""
    config = folder / "dispatch.toml"
    config.write_text(
        f'ledger = "{folder / "ledger"}"\n[backend]\nname = "slurm"\n[backend.settings]\n'
        f'transport = "cli"\nslurm_conf = "{env["SLURM_CONF"]}"\n'
    )
    env = {**env, "DISPATCH_CONFIG": str(config), "XDG_CACHE_HOME": str(folder / "cache")}
    (folder / "job.sbatch").write_text(
        "#!/bin/bash\n#SBATCH --partition=low\n#SBATCH --time=00:10:00\n"
        f"#SBATCH --output=/dev/null\n#DISPATCH --rule=preempted:resubmit:2\nsleep {SECONDS}\n"
    )
    sweeper = subprocess.Popen(
        [DISPATCH, "supervise", "--follow", "--every", f"{every:g}s"],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        calls = [[f"--array=0-{jobs - 1}"]] if array else [[]] * jobs
        t0 = time.perf_counter()
        for flags in calls:
            subprocess.run(
                [DISPATCH, "sbatch", "--parsable", *flags, "job.sbatch"],
                cwd=folder,
                env=env,
                check=True,
                capture_output=True,
            )
        submitted = time.perf_counter() - t0
        deadline = time.monotonic() + 900
        while _listed(env, "--json"):  # the unsettled jobs
            if time.monotonic() > deadline:
                raise SystemExit("dispatch: jobs still unsettled after 15 minutes")
            time.sleep(POLL)
        settled = time.perf_counter() - t0
        rows = _listed(env, "--all", "--tasks", "--json")
        if len(rows) != jobs or {r["state"] for r in rows} != {"succeeded"}:
            ended = sorted((r["job"], r["state"], r["cause"]) for r in rows)
            kept = Path(tempfile.mkdtemp(prefix="dispatch-e2e-failed-"))
            shutil.copytree(folder / "ledger", kept / "ledger")
            raise SystemExit(f"dispatch: not every job succeeded: {ended}; ledger kept in {kept}")
        return submitted, settled
    finally:
        sweeper.send_signal(signal.SIGTERM)
        sweeper.wait(60)


def _listed(env: dict[str, str], *flags: str) -> list[dict[str, object]]:
    done = subprocess.run([DISPATCH, "list", *flags], env=env, capture_output=True, text=True)
    rows: list[dict[str, object]] = json.loads(done.stdout or "[]")
    return rows


def run_submitit(python: str, folder: Path, env: dict[str, str], jobs: int) -> tuple[float, float]:
    done = subprocess.run(
        [python, "-c", SUBMITIT, str(folder / "submitit"), str(jobs), str(SECONDS)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"submitit failed:\n{done.stderr[-2000:]}")
    submitted, settled = (float(x) for x in done.stdout.split()[-2:])
    return submitted, settled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=48)
    parser.add_argument("--every", type=float, default=1.0, help="seconds between sweeps")
    parser.add_argument("--array", action="store_true", help="dispatch submits one array")
    parser.add_argument("--runs", type=int, default=1, help="pairs, submitit then dispatch")
    parser.add_argument("--submitit-python", default="/tmp/submitit-venv/bin/python")
    args = parser.parse_args()
    env = {**os.environ, **cluster_env()}
    calls = 1 if args.array else args.jobs
    how = f"--array=0-{args.jobs - 1}, one call" if args.array else f"x{args.jobs}"
    for run in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="dispatch-e2e-bench-") as tmp:
            folder = Path(tmp)
            load = os.getloadavg()[0]
            s_sub, s_all = run_submitit(args.submitit_python, folder, env, args.jobs)
            d_sub, d_all = run_dispatch(folder, env, args.jobs, args.every, args.array)
            load = max(load, os.getloadavg()[0])
        print(
            f"run {run}: {args.jobs} jobs of {SECONDS} s on the local cluster, load up to "
            f"{load:.1f} (shared machine: noisy)"
        )
        print(f"{'':<52}{'submit all s':>13}{'all ended s':>13}{'per call s':>11}")
        print(
            f"{f'dispatch sbatch {how}, sweeps every {args.every:g} s':<52}"
            f"{d_sub:>13.2f}{d_all:>13.1f}{d_sub / calls:>11.2f}"
        )
        print(f"{'submitit (one array)':<52}{s_sub:>13.2f}{s_all:>13.1f}{'-':>11}")
        print(f"{'ratio dispatch/submitit, all ended':<52}{'':>13}{d_all / s_all:>13.3f}")


if __name__ == "__main__":
    main()
