"""Which decisions a launch's call follows on the same look.

A pass whose steps are only decisions a launch makes (a new submission, what was seen of the
launched object and that it is the canonical one) decides again on the same look; when what
follows is the call they lead to (attempt 1 of the submission just authorized, or the open),
the decisions go in with that call's intent, as one revision (``docs/protocol.md``, step
kinds). Anything else is decided by the next pass, on a look taken after they are in.
"""

from __future__ import annotations

from dispatch.core import steps as st
from dispatch.model.record import AttemptEntry, View

# Passes ``launch`` gives a new job, and rounds a sweep gives a job that moves: authorize and
# start share one, canonical and open another (after an ending, observe joins the first), and
# a start whose outcome was unknown, or a pass lost to a racing actor, may need more.
LAUNCH_PASSES = 8


def attempted(view: View) -> bool:
    """Whether the record holds an attempt: before one, no object can bear its numbers."""
    return any(isinstance(e, AttemptEntry) for c in view.commits for e in c.entries)


def launching(steps: list[st.Step]) -> bool:
    """Whether ``steps`` are decisions that a launch's call may follow on the same look: a new
    submission (its first attempt follows), what was seen of the launched object and that it
    is the submission's canonical one (its open follows)."""
    return all(isinstance(s, st.Observe | st.Canonical | st.Authorize | st.Wait) for s in steps)


def follows(steps: list[st.Step], before: list[st.Step]) -> bool:
    """Whether ``steps``, decided on the look the decisions ``before`` them were decided on,
    are the launch's next call: the open of the object they made canonical, or the first
    attempt of the submission they authorized (no object can bear its numbers before that
    attempt is in, so the look has nothing newer to show of it). Anything else (a settle, a
    stop, a retried start) is decided on a look taken after those decisions are in, as every
    pass of a sweep's rounds is: an object that appeared since, or a person's command, must be
    seen first."""
    calls = [s for s in steps if not isinstance(s, st.Wait)]
    if len(calls) != 1:
        return False
    call = calls[0]
    if isinstance(call, st.Open):
        return True
    authorized = {s.submission for s in before if isinstance(s, st.Authorize)}
    return isinstance(call, st.Start) and call.attempt == 1 and call.submission in authorized
