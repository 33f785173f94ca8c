#!/usr/bin/env python3
"""A small data-parallel PyTorch training run that saves and resumes like a real one.

Run it under torchrun (one process per rank; CPU and gloo unless CUDA is there). It fits a
linear model to y = 3x + 1 with DistributedDataParallel: every rank trains on its own slice of
the data and the gradients are averaged across ranks. Every ``--save-every`` steps, and when
SIGUSR1 or SIGTERM reaches any rank, the ranks agree to save: rank ``--save-rank`` (any rank,
on any node) writes ``<saves>/step-<N>/`` holding ``model.pt``, then the completion marker
``.complete`` that ``publish watch`` waits for. With ``--resume DIR`` it continues from the
``model.pt`` there. It exits 0 when all steps are done and 143 when a signal stopped it.

    torchrun --nnodes=2 --nproc-per-node=1 ... ddp_train.py --saves DIR [--resume DIR]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

INTERRUPTED_EXIT = 143  # 128 + SIGTERM, the shell's convention for "terminated"


def save(saves: Path, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Write the save folder under a temporary name, then its completion marker last."""
    final = saves / f"step-{step}"
    staging = saves / f".step-{step}.partial"
    staging.mkdir(parents=True, exist_ok=True)
    state = {"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()}
    torch.save(state, staging / "model.pt")
    os.replace(staging, final)
    (final / ".complete").write_text(f"{step}\n")
    print(f"rank {dist.get_rank()} saved step {step}", flush=True)


def main() -> int:
    """Train, saving periodically and when a stop signal reaches any rank."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--saves", type=Path, required=True)
    parser.add_argument("--resume", type=Path, default=None)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--save-every", type=int, default=50)
    parser.add_argument("--save-rank", type=int, default=0, help="the rank that writes saves")
    parser.add_argument("--step-seconds", type=float, default=0.0)
    args = parser.parse_args()

    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    save_rank = args.save_rank % world
    stop = {"signal": 0}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop["signal"] = signum

    signal.signal(signal.SIGUSR1, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(1, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    step = 0
    if args.resume is not None and (args.resume / "model.pt").is_file():
        state = torch.load(args.resume / "model.pt", weights_only=True)
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = int(state["step"])
        print(f"rank {rank} resumed from step {step}", flush=True)
    else:
        print(f"rank {rank} starting from scratch", flush=True)

    while step < args.steps:
        gen = torch.Generator().manual_seed(step * world + rank)
        x = torch.rand(16, 1, generator=gen) * 2 - 1
        loss = torch.nn.functional.mse_loss(model(x), 3 * x + 1)
        optimizer.zero_grad()
        loss.backward()  # DDP averages the gradients of every rank here
        optimizer.step()
        step += 1
        # Every rank stops at the same step: a signal seen by any of them stops them all.
        flag = torch.tensor([stop["signal"]])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        stopping = int(flag.item()) != 0
        if (step % args.save_every == 0 or stopping) and rank == save_rank:
            save(args.saves, step, model.module, optimizer)
        if stopping:
            print(f"rank {rank} stopped by signal {int(flag.item())} at step {step}", flush=True)
            dist.destroy_process_group()
            return INTERRUPTED_EXIT
        time.sleep(args.step_seconds)
    w, b = (p.item() for p in model.module.parameters())
    print(f"rank {rank} done step {step} w={w:.3f} b={b:.3f}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
