#!/usr/bin/env python3
"""A tiny CPU training loop that saves and resumes like a real one, for end-to-end tests.

It fits y = 3x + 1 by stochastic gradient descent in pure Python (no numpy, no torch, no
download). Every `--save-every` steps, and when SIGUSR1 or SIGTERM arrives, it writes a save
folder `<saves>/step-<N>/` holding `state.json`, then the completion marker `.complete` (the
step number) that `publish watch` waits for. With `--resume DIR` it continues from the
`state.json` there. It exits 0 when all steps are done and 143 when a signal stopped it early.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time
from pathlib import Path
from types import FrameType

INTERRUPTED_EXIT = 143  # 128 + SIGTERM, the shell's convention for "terminated"


def save(saves: Path, step: int, w: float, b: float) -> None:
    """Write the save folder, then its completion marker last."""
    final = saves / f"step-{step}"
    staging = saves / f".step-{step}.partial"
    staging.mkdir(parents=True, exist_ok=True)
    (staging / "state.json").write_text(json.dumps({"step": step, "w": w, "b": b}))
    os.replace(staging, final)
    (final / ".complete").write_text(f"{step}\n")
    print(f"saved step {step}", flush=True)


def main() -> int:
    """Train, saving periodically and on a stop signal."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--saves", type=Path, required=True)
    parser.add_argument("--resume", type=Path, default=None)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--save-every", type=int, default=50)
    parser.add_argument("--step-seconds", type=float, default=0.0)
    args = parser.parse_args()

    stop = {"signal": 0}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop["signal"] = signum

    signal.signal(signal.SIGUSR1, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    step, w, b = 0, 0.0, 0.0
    if args.resume is not None and (args.resume / "state.json").is_file():
        state = json.loads((args.resume / "state.json").read_text())
        step, w, b = int(state["step"]), float(state["w"]), float(state["b"])
        print(f"resumed from step {step}", flush=True)
    else:
        print("starting from scratch", flush=True)

    rng = random.Random(step)
    while step < args.steps:
        x = rng.uniform(-1, 1)
        error = (w * x + b) - (3 * x + 1)
        w -= 0.1 * error * x
        b -= 0.1 * error
        step += 1
        if step % args.save_every == 0:
            save(args.saves, step, w, b)
        if stop["signal"]:
            if step % args.save_every:
                save(args.saves, step, w, b)
            print(f"stopped by signal {stop['signal']} at step {step}", flush=True)
            return INTERRUPTED_EXIT
        time.sleep(args.step_seconds)
    print(f"done step {step} w={w:.3f} b={b:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
