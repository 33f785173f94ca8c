"""How a submission is decided: the submit options, the plan and a new job's id."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from dispatch.core.plan import plan_rules
from dispatch.model.enums import UnmatchedPolicy
from dispatch.model.errors import InvalidError
from dispatch.model.values import JobID, JobSpec, Plan, SubmitOptions
from dispatch.spi import Backend, IdentityWeakener


def new_job_id(rand: Callable[[int], bytes]) -> JobID:
    """A job id: 10 random bytes as 16 lowercase base32 characters."""
    return base64.b32encode(rand(10)).decode("ascii").lower()


def submit_options(
    *,
    supervised: bool = False,
    idempotency_key: str = "",
    unmatched: UnmatchedPolicy | str = UnmatchedPolicy.RESIDUAL,
    accept_unverified: dict[int, Any] | None = None,
    accept_unenforced: Any = (),
    submit_retries: int = 2,
    cleanup_deadline: Any = None,
    unresolved_age: Any = None,
) -> SubmitOptions:
    """The keyword options of ``submit`` and ``make_plan`` as a validated SubmitOptions."""
    data: dict[str, Any] = {
        "supervised": supervised,
        "idempotency_key": idempotency_key,
        "unmatched": unmatched,
        "accept_unverified": accept_unverified or {},
        "accept_unenforced": frozenset(accept_unenforced),
        "submit_retries": submit_retries,
    }
    if cleanup_deadline is not None:
        data["cleanup_deadline"] = cleanup_deadline
    if unresolved_age is not None:
        data["unresolved_age"] = unresolved_age
    return SubmitOptions(**data)


def make_plan(backend: Backend, job: JobID, spec: JobSpec, **options: Any) -> Plan:
    """The plan ``submit`` would record for ``spec``, without creating anything."""
    return plan_with(backend, job, spec, submit_options(**options))


def plan_with(backend: Backend, job: JobID, spec: JobSpec, opts: SubmitOptions) -> Plan:
    """The plan for ``spec`` under already-validated submit options."""
    if not isinstance(spec, JobSpec):
        raise InvalidError(f"spec must be a JobSpec, not {type(spec).__name__}")
    support = backend.rules(spec, spec.recovery)
    weakened = backend.identity_weakened(spec) if isinstance(backend, IdentityWeakener) else ""
    return plan_rules(job, spec, opts, support, weakened)
