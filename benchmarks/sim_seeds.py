"""Benchmark of the simulator: seeds per second, calls per seed, the fault mix, mutant hunts.

Runs the same seed range with one worker and with ``--workers`` processes, and prints how often
each fault class was switched on across the seeds and the mean per-opportunity probabilities.
With ``--mutants``, also hunts every mutant and prints the seeds it took. Run from the
repository root:

    .venv/bin/python benchmarks/sim_seeds.py [--seeds 2000] [--workers 2] [--mutants]
"""

from __future__ import annotations

import argparse
import os
import random
import time
from collections.abc import Callable
from dataclasses import asdict

from dispatch.sim.batch import run_batch, scratch_root
from dispatch.sim.faults import draw
from dispatch.sim.mutants import MUTANTS, hunt
from dispatch.sim.world import run_seed

BAD_ENDS = ("fail", "preempt", "lose_node", "out_of_memory", "time_limit", "launch_fail")

# What a trace line says when each kind of fault happened.
EVENTS: dict[str, Callable[[str], bool]] = {
    "supervisor crash": lambda t: "CRASH" in t,
    "power cut": lambda t: "POWER CUT" in t,
    "owner lock revoked": lambda t: "revoked" in t,
    "start refused or reply lost": lambda t: "start raised" in t,
    "call failed before effect": lambda t: "failed before its effect" in t,
    "call reply lost": lambda t: "reply lost" in t,
    "find failed": lambda t: "find failed" in t,
    "delivery failed": lambda t: " deliver " in t and t.endswith(" failed"),
    "bad end of a run": lambda t: any(f" {k} " in t for k in BAD_ENDS),
    "purge": lambda t: " purge " in t,
    "administrator hold": lambda t: " admin_hold " in t,
    "foreign object": lambda t: "inject_foreign" in t,
    "person acted": lambda t: (
        " person " in t
        and (
            "cancel" in t
            or "hold" in t
            or "release" in t
            or "resubmit" in t
            or "give_up" in t
            or "abandon" in t
        )
    ),
}


def main() -> None:
    """Print the tables."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--mutants", action="store_true")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}")
    print(f"{'workers':>8} {'seeds':>7} {'seconds':>8} {'seeds/s':>8} {'calls/seed':>10} failures")
    for workers in sorted({1, args.workers}):
        r = run_batch(range(args.seeds), workers=workers)
        print(
            f"{workers:>8} {r.seeds:>7} {r.seconds:>8.1f} {r.per_second:>8.1f} "
            f"{r.calls / r.seeds:>10.0f} {len(r.failures)}"
        )
    print()
    print("fault mix over the seeds (share of seeds with the fault on; mean value when on)")
    on: dict[str, int] = {}
    total: dict[str, float] = {}
    for seed in range(args.seeds):
        mix = draw(random.Random(seed))
        for name, value in asdict(mix).items():
            v = float(value)
            if v:
                on[name] = on.get(name, 0) + 1
                total[name] = total.get(name, 0.0) + v
    for name in asdict(draw(random.Random(0))):
        n = on.get(name, 0)
        mean = total.get(name, 0.0) / n if n else 0.0
        print(f"  {name:<16} {100 * n / args.seeds:6.1f}%  mean {mean:.3f}")
    print()
    print(f"fault events per seed (mean over the first {min(args.seeds, 500)} seeds' traces)")
    counts: dict[str, int] = dict.fromkeys(EVENTS, 0)
    runs = min(args.seeds, 500)
    for seed in range(runs):
        for line in run_seed(seed, scratch_root()).trace:
            for name, seen in EVENTS.items():
                if seen(line):
                    counts[name] += 1
    for name, n in counts.items():
        print(f"  {name:<28} {n / runs:6.2f}")
    if args.mutants:
        print()
        print(f"{'mutant':<36} {'seeds to find':>13} {'seconds':>8}  invariant")
        for name in MUTANTS:
            t = time.perf_counter()
            h = hunt(name, root=scratch_root())
            found = h.found.violations[0].invariant if h.found else "SURVIVED"
            print(f"{name:<36} {h.seeds_tried:>13} {time.perf_counter() - t:>8.1f}  {found}")


if __name__ == "__main__":
    main()
