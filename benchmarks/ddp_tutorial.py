"""PyTorch's DDP tutorial job preempted, live on the local Slurm cluster: from the preemption to
the job running again, in sweep ticks and seconds, against Slurm's own requeue as the baseline.

The job is the shape of PyTorch's DDP tutorial (``multinode.py`` of the ddp-tutorial-series:
``torchrun`` on each of two nodes, a c10d rendezvous on the first node, a snapshot file it saves
every few epochs and resumes from), on CPU with gloo, each epoch slowed down so that it does
not take a core. It is submitted twice, one after the other:

* with ``dispatch sbatch`` and ``#DISPATCH --rule=preempted:resubmit:3``, swept as cron sweeps
  (``dispatch sweep --config FILE``, a new process each tick, every ``--every`` seconds);
* with plain ``sbatch --requeue``, recovered by Slurm alone (its preempted job is requeued and
  held back ``cred_expire + 1`` seconds, 31 s on the local cluster, before it may start again).

Once the job has run and saved a snapshot, a ``high`` partition job preempts one of its nodes.
Measured from that preemptor's submission: until Slurm shows the job (dispatch's next
submission, or the requeued job) running again, and until the training printed that it resumed
from its snapshot. Ticks are the sweeps that began in between.

    slurm_helpers/localcluster up && eval "$(slurm_helpers/localcluster env)"
    .venv/bin/python benchmarks/ddp_tutorial.py [--every 1,5]

Run it on a quiet cluster: the job needs two of the four nodes, and the preemptor one of them.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
PATIENCE = 240.0  # seconds: every wait below is bounded by this
DISPATCH = str(Path(sys.executable).parent / "dispatch")

# The tutorial's multinode.py, its model and data inlined (datautils.py's MyTrainDataset), on CPU.
TRAINER = """
import os, sys, time
import torch
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class MyTrainDataset(Dataset):
    def __init__(self, size):
        self.data = [(torch.rand(20), torch.rand(1)) for _ in range(size)]

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return self.data[i]


class Trainer:
    def __init__(self, model, train_data, optimizer, save_every, snapshot_path):
        self.global_rank = int(os.environ["RANK"])
        self.model = model
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.epochs_run = 0
        self.snapshot_path = snapshot_path
        if os.path.exists(snapshot_path):
            snapshot = torch.load(snapshot_path)
            self.model.load_state_dict(snapshot["MODEL_STATE"])
            self.epochs_run = snapshot["EPOCHS_RUN"]
            print(f"{time.time():.3f} Resuming training from snapshot at Epoch {self.epochs_run}",
                  flush=True)
        self.model = DDP(self.model)

    def _run_epoch(self, epoch):
        self.train_data.sampler.set_epoch(epoch)
        for source, targets in self.train_data:
            self.optimizer.zero_grad()
            F.cross_entropy(self.model(source), targets).backward()
            self.optimizer.step()
        time.sleep(float(os.environ.get("EPOCH_SECONDS", "0")))

    def train(self, max_epochs):
        for epoch in range(self.epochs_run, max_epochs):
            self._run_epoch(epoch)
            if self.global_rank == 0 and epoch % self.save_every == 0:
                snapshot = {"MODEL_STATE": self.model.module.state_dict(), "EPOCHS_RUN": epoch}
                torch.save(snapshot, self.snapshot_path + ".tmp")
                os.replace(self.snapshot_path + ".tmp", self.snapshot_path)
                print(f"{time.time():.3f} Epoch {epoch} | Training snapshot saved", flush=True)


def main(total_epochs, save_every, batch_size):
    init_process_group(backend="gloo")
    dataset = MyTrainDataset(2048)
    model = torch.nn.Linear(20, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = DataLoader(dataset, batch_size=batch_size, pin_memory=False, shuffle=False,
                      sampler=DistributedSampler(dataset))
    Trainer(model, data, optimizer, save_every, "snapshot.pt").train(total_epochs)
    destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 32)
"""

SCRIPT = """#!/bin/bash
#SBATCH --job-name=ddp-tutorial
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --partition=low
#SBATCH --output={folder}/{name}-%j.out
{directive}
nodes=( $( scontrol show hostnames "$SLURM_JOB_NODELIST" ) )
head_node_ip=$(srun --nodes=1 --ntasks=1 -w "${{nodes[0]}}" hostname --ip-address | head -n 1)
export EPOCH_SECONDS=0.5 OMP_NUM_THREADS=1
srun {torchrun} --nnodes 2 --nproc_per_node 1 --rdzv_id "$SLURM_JOB_ID" \\
    --rdzv_backend c10d --rdzv_endpoint "$head_node_ip:{port}" multinode.py 100000 2
"""


@dataclass
class Ticker:
    """``dispatch sweep --config FILE`` every ``every`` seconds in a thread, as cron runs it;
    the start of each sweep (epoch seconds)."""

    config: Path
    every: float
    starts: list[float] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            self.starts.append(time.time())
            subprocess.run(
                [DISPATCH, "sweep", "--config", str(self.config)],
                capture_output=True,
                timeout=120,
                check=False,
                cwd=tempfile.gettempdir(),
            )
            self.stop.wait(self.every)


def free_port() -> int:
    """A TCP port nobody listens on now, for the rendezvous."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def squeue(name: str) -> list[tuple[str, str, str]]:
    """(Slurm job id, state, nodes) of every job named ``name``."""
    out = subprocess.run(
        ["squeue", "-h", f"--name={name}", "-o", "%i|%T|%N"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = [line.split("|") for line in out.splitlines() if line.count("|") == 2]
    return [(r[0], r[1], r[2]) for r in rows]


def wait(what: str, probe: Callable[[], T], poll: float = 0.1) -> T:
    """``probe()`` once it is truthy, polling every ``poll`` s for at most ``PATIENCE``."""
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        got = probe()
        if got:
            return got
        time.sleep(poll)
    raise SystemExit(f"gave up after {PATIENCE:g}s waiting for {what}")


def resumed_at(folder: Path, after: float) -> float | None:
    """When the training printed that it resumed from its snapshot, after ``after``."""
    for out in folder.glob("*.out"):
        for m in re.finditer(r"^(\d+\.\d+) Resuming training", out.read_text(), re.M):
            if float(m.group(1)) > after:
                return float(m.group(1))
    return None


def one_run(folder: Path, dispatched: bool, every: float) -> tuple[int | None, float, float]:
    """Ticks, seconds to running again and seconds to resumed training, for one job."""
    (folder / "multinode.py").write_text(TRAINER)
    torchrun = str(Path(sys.executable).parent / "torchrun")
    name = "dispatch" if dispatched else "slurm"
    directive = "#DISPATCH --rule=preempted:resubmit:3" if dispatched else "#SBATCH --requeue"
    (folder / "ddp.sbatch").write_text(
        SCRIPT.format(
            folder=folder, name=name, directive=directive, torchrun=torchrun, port=free_port()
        )
    )
    env = dict(os.environ)
    ticker: Ticker | None = None
    if dispatched:
        config = folder / "dispatch.toml"
        config.write_text(
            f'ledger = "{folder / "ledger"}"\n[backend]\nname = "slurm"\n'
            f'[backend.settings]\ntransport = "cli"\nslurm_conf = "{env["SLURM_CONF"]}"\n'
        )
        env["DISPATCH_CONFIG"] = str(config)
        job = subprocess.run(
            [DISPATCH, "sbatch", "--parsable", "ddp.sbatch"],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        slurm_name = f"dj-{job}"
        ticker = Ticker(config, every)
        threading.Thread(target=ticker.run, daemon=True).start()
    else:
        subprocess.run(
            ["sbatch", "ddp.sbatch"], cwd=folder, env=env, check=True, capture_output=True
        )
        slurm_name = "ddp-tutorial"
    try:
        first = wait("the first run", lambda: [r for r in squeue(slurm_name) if r[1] == "RUNNING"])
        wait("the first snapshot", lambda: (folder / "snapshot.pt").exists(), 0.5)
        node = first[0][2].split(",")[0]
        node = subprocess.run(
            ["scontrol", "show", "hostnames", node], capture_output=True, text=True, check=True
        ).stdout.split()[0]
        preempted = time.time()
        high = subprocess.run(
            [
                "sbatch",
                "--parsable",
                "--partition=high",
                f"--nodelist={node}",
                "--exclusive",
                "--output=/dev/null",
                "--wrap=sleep 20",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        first_id = first[0][0]

        def again() -> bool:
            rows = squeue(slurm_name)
            if dispatched:
                return any(r[0] != first_id and r[1] == "RUNNING" for r in rows)
            # Slurm's requeue keeps the id: running again once it left RUNNING and came back.
            return any(r[0] == first_id and r[1] == "RUNNING" for r in rows) and left[0]

        left = [False]

        def watch() -> bool:
            rows = squeue(slurm_name)
            if not any(r[0] == first_id and r[1] == "RUNNING" for r in rows):
                left[0] = True
            return again()

        wait("the job to run again", watch)
        running = time.time()
        resumed = wait("the training to resume", lambda: resumed_at(folder, preempted) or 0.0, 0.2)
        ticks = None if ticker is None else sum(preempted <= t <= running for t in ticker.starts)
        subprocess.run(["scancel", high], capture_output=True)
        return ticks, running - preempted, resumed - preempted
    finally:
        if ticker is not None:
            ticker.stop.set()
        subprocess.run(["scancel", f"--name={slurm_name}"], capture_output=True)
        if dispatched:
            subprocess.run(
                [DISPATCH, "cancel", job, "--reason", "benchmark done"],
                env=env,
                capture_output=True,
            )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--every", default="1,5", help="sweep intervals in seconds, comma-separated")
    args = ap.parse_args()
    if "SLURM_CONF" not in os.environ:
        raise SystemExit('no SLURM_CONF: eval "$(slurm_helpers/localcluster env)" first')
    print(
        "PyTorch's DDP tutorial (two nodes, torchrun), preempted on one node: from the "
        "preemptor's submission to"
    )
    print(f"{'recovered by':<32} | {'ticks':>5} | {'running again':>13} | {'training resumed':>16}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        baseline = one_run(Path(tmp), dispatched=False, every=0)
        rows.append(("Slurm's own requeue (baseline)", baseline))
    for every in [float(e) for e in args.every.split(",") if e]:
        with tempfile.TemporaryDirectory() as tmp:
            rows.append(
                (
                    f"dispatch, a sweep every {every:g} s",
                    one_run(Path(tmp), dispatched=True, every=every),
                )
            )
    for label, (ticks, running, resumed) in rows:
        shown = "-" if ticks is None else str(ticks)
        print(f"{label:<32} | {shown:>5} | {running:>12.1f}s | {resumed:>15.1f}s", flush=True)


if __name__ == "__main__":
    main()
