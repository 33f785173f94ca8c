"""``dispatch sim``: replay one seed of the simulator, run a batch of seeds, or hunt the mutants.

Exit codes: 0 every invariant held (and every mutant was found), 1 a seed broke an invariant
(or a mutant survived), 2 bad usage.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from dispatch.sim.batch import keep_failing, load_failing, run_batch, scratch_root
from dispatch.sim.mutants import MUTANTS, hunt, switched_on
from dispatch.sim.world import run_seed


@click.command("sim")
@click.option("--seed", type=int, help="Replay this one seed exactly.")
@click.option("--stop-at", type=int, help="With --seed: stop at this call and show the state.")
@click.option("--seeds", "count", type=int, help="Run this many seeds, from --first.")
@click.option("--first", type=int, default=0, show_default=True, help="The first seed of a batch.")
@click.option("--workers", type=int, default=1, show_default=True, help="Processes for a batch.")
@click.option(
    "--failing-seeds",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Rerun the seeds in this file first; add the batch's failing seeds to it.",
)
@click.option(
    "--mutant",
    "mutants",
    multiple=True,
    type=click.Choice(sorted(MUTANTS)),
    help="Switch a mutant (a re-introduced bug) on.",
)
@click.option("--hunt", "hunt_all", is_flag=True, help="Hunt every mutant; print seeds each took.")
def sim(
    seed: int | None,
    stop_at: int | None,
    count: int | None,
    first: int,
    workers: int,
    failing_seeds: Path | None,
    mutants: tuple[str, ...],
    hunt_all: bool,
) -> None:
    """Run the deterministic simulator of the supervisor (see docs/simulator.md).

    \b
    Example:
      $ dispatch sim --seeds 1000 --workers 2
      $ dispatch sim --seed 1605 --stop-at 340
    """
    if sum(x is not None and x is not False for x in (seed, count, hunt_all or None)) != 1:
        click.echo("error: give exactly one of --seed, --seeds or --hunt", err=True)
        sys.exit(2)
    if seed is not None:
        sys.exit(_replay(seed, stop_at, mutants))
    if hunt_all:
        sys.exit(_hunt())
    assert count is not None
    sys.exit(_batch(first, count, workers, failing_seeds, mutants))


def _replay(seed: int, stop_at: int | None, mutants: tuple[str, ...]) -> int:
    with switched_on(*mutants):
        out = run_seed(seed, scratch_root(), stop_at)
    click.echo(f"seed {seed}: {out.steps} calls" + (f", stopped at {stop_at}" if stop_at else ""))
    click.echo("fault mix:")
    for name, value in out.mix.table():
        click.echo(f"  {name:<16} {value}")
    click.echo("trace:")
    for line in out.trace:
        click.echo(line)
    click.echo("record:")
    for line in out.record:
        click.echo(line)
    click.echo("ground truth (the scheduler's objects):")
    for line in out.truth:
        click.echo(f"  {line}")
    for v in out.violations:
        click.echo(f"VIOLATION at call {v.step}: {v.invariant}: {v.detail}")
    if not out.violations and out.stopped_at is None:
        click.echo(f"ok: every invariant held; settled {out.quiet_steps} steps after faults")
    return 1 if out.violations else 0


def _batch(
    first: int, count: int, workers: int, failing: Path | None, mutants: tuple[str, ...]
) -> int:
    seeds = load_failing(failing) if failing is not None else []
    kept = len(seeds)
    seeds += [s for s in range(first, first + count) if s not in set(seeds)]
    result = run_batch(seeds, workers=workers, mutants=mutants)
    click.echo(
        f"{result.seeds} seeds ({kept} kept failing seeds first) in {result.seconds:.1f}s: "
        f"{result.per_second:.1f} seeds/s, {result.calls / max(result.seeds, 1):.0f} calls/seed, "
        f"{workers} worker(s)"
    )
    click.echo("seeds with each fault class on:")
    for name, n in sorted(result.faults_on.items()):
        click.echo(f"  {name:<16} {n:6d}  {100 * n / max(result.seeds, 1):5.1f}%")
    for f in result.failures:
        click.echo(f"FAILED seed {f.seed}: {f.invariant}: {f.detail}")
    if failing is not None and result.failures:
        added = keep_failing(failing, result.failures)
        click.echo(f"kept {len(added)} new failing seeds in {failing}")
    return 1 if result.failures else 0


def _hunt() -> int:
    survived = 0
    root = scratch_root()
    for name in MUTANTS:
        h = hunt(name, root=root)
        if h.found is None:
            survived += 1
            click.echo(f"{name:<36} SURVIVED {h.seeds_tried} seeds")
            continue
        v = h.found.violations[0]
        click.echo(
            f"{name:<36} found after {h.seeds_tried:5d} seeds (seed {h.found.seed}): {v.invariant}"
        )
    return 1 if survived else 0
