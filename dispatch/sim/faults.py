"""The fault mix of one seed: which faults are on and how often each fires, drawn from the seed;
and the delivery channel's own faults (``ChannelFaults``).

Every probability is per opportunity (per call boundary, per scheduler move, per person move),
so a seed's mix is a small table that ``dispatch sim --seed S`` prints.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class FaultMix:
    """What can go wrong in one seed."""

    file_store: bool
    kubeflow_shape: bool
    supervisors: int
    sweep_mode: bool
    jobs: int
    submit_retries: int
    # Per call boundary of a supervisor: crash there.
    crash: float
    # Per call boundary: let another actor move in between.
    interleave: float
    # Per start call: refused, or its reply lost (object created or not).
    refuse: float
    lose_reply: float
    # Per open/stop/find call: the call fails or its reply is lost.
    call_fault: float
    # Per scheduler move: which kind of ending a running object gets.
    end_bad: float
    purge: float
    admin_hold: float
    foreign: float
    # Per world step: an owner lock revoked from a live holder; a power cut of the file store.
    revoke: float
    power_cut: float
    # Per person move: an operator action; per delivery: the delivery fails.
    people: float
    deliver_fail: float

    def table(self) -> list[tuple[str, str]]:
        """The mix as (name, value) rows, in field order."""
        rows = asdict(self).items()
        return [(k, f"{v:.3f}" if isinstance(v, float) else str(v)) for k, v in rows]


def draw(rng: random.Random) -> FaultMix:
    """Draw a fault mix; about a third of the seeds keep a fault class off entirely."""

    def some(high: float) -> float:
        return 0.0 if rng.random() < 0.3 else rng.uniform(0.0, high)

    file_store = rng.random() < 0.25
    return FaultMix(
        file_store=file_store,
        kubeflow_shape=rng.random() < 0.3,
        supervisors=rng.choice((1, 2, 2)),
        sweep_mode=rng.random() < 0.5,
        jobs=rng.choice((1, 1, 2)),
        submit_retries=rng.choice((0, 1, 2)),
        crash=some(0.04),
        interleave=rng.uniform(0.0, 0.4),
        refuse=some(0.3),
        lose_reply=some(0.3),
        call_fault=some(0.15),
        end_bad=rng.uniform(0.3, 0.9),
        purge=some(0.3),
        admin_hold=some(0.03),
        foreign=some(0.03),
        revoke=some(0.03),
        power_cut=some(0.02) if file_store else 0.0,
        people=some(0.05),
        deliver_fail=some(0.4),
    )


def inherited_environment(seed: int) -> dict[str, str]:
    """The environment the seed's scheduler submits from: in half the seeds, that of a shell
    inside an allocation, carrying the variables Slurm set for that allocation's job
    (``SLURM_RESTART_COUNT`` among them). Drawn from its own generator, so the seed's other
    draws stay as they were."""
    rng = random.Random(f"{seed}/environment")
    if rng.random() < 0.5:
        return {"HOME": "/home/ada"}
    return {
        "HOME": "/home/ada",
        "SLURM_JOB_ID": str(rng.randint(1, 99_999)),
        "SLURM_RESTART_COUNT": str(rng.randint(1, 9)),
        "SLURM_NTASKS": str(rng.randint(1, 64)),
    }


class ChannelFaults:
    """The delivery channel's own faults, drawn from a generator of the seed's own so that the
    seed's other draws stay as they were: now and then it goes down for a few offers in a row,
    answers too late, or redirects (which is not a delivery)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(f"{seed}/channel")
        self.outage = self.rng.random() < 0.5  # a third of the seeds keep the channel up
        self.down_for = 0
        self.why = "down"

    def failure(self) -> str | None:
        """How this offer fails (``down``, ``slow``, ``redirecting``), or None: delivered."""
        if self.down_for > 0:
            self.down_for -= 1
            return self.why
        if self.outage and self.rng.random() < 0.15:
            self.down_for = self.rng.randint(0, 4)
            self.why = self.rng.choice(("down", "slow", "redirecting"))
            return self.why
        return None
