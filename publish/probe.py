"""Checking that a store can hold publications before a job that needs it is accepted.

Each check runs in order and reports one line; a check that cannot run because an earlier one
failed is reported as skipped. The probe object is deleted at the end.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass

from publish.errors import PublishError
from publish.store import Store

PROBE_PREFIX = "probe/"


@dataclass(frozen=True)
class CheckResult:
    """One check's name, whether it passed, and a detail (never a secret)."""

    name: str
    ok: bool
    detail: str = ""

    def line(self) -> str:
        """The check as one printed line."""
        mark = "ok  " if self.ok else "FAIL"
        return f"{mark} {self.name}" + (f": {self.detail}" if self.detail else "")


def probe(
    store_factory: Callable[[], Store], bucket_check: Callable[[Store], None]
) -> list[CheckResult]:
    """Run the checks: credentials and client, bucket, list, put, refused second put, get, delete.

    `store_factory` builds the store (resolving credentials); `bucket_check` confirms the
    bucket or root exists. Both raise PublishError to fail their check.
    """
    results: list[CheckResult] = []

    def run(name: str, check: Callable[[], str]) -> bool:
        if results and not results[-1].ok:
            results.append(CheckResult(name, False, "skipped after an earlier failure"))
            return False
        try:
            results.append(CheckResult(name, True, check()))
        except PublishError as exc:
            results.append(CheckResult(name, False, str(exc)))
        return results[-1].ok

    holder: list[Store] = []

    def credentials() -> str:
        holder.append(store_factory())
        return holder[0].description

    def bucket() -> str:
        bucket_check(holder[0])
        return ""

    key = f"{PROBE_PREFIX}{secrets.token_hex(8)}"
    body = secrets.token_hex(16).encode()

    def listing() -> str:
        count = sum(1 for _ in zip(range(10), holder[0].list_keys(""), strict=False))
        return f"{count} key(s) seen"

    def put() -> str:
        if not holder[0].create_exclusive(key, body):
            raise PublishError(f"{key} already existed")
        return key

    def second_put() -> str:
        if holder[0].create_exclusive(key, b"second"):
            raise PublishError("a second create of the same key was accepted; no fencing here")
        return "refused as it must be"

    def get() -> str:
        if holder[0].get_bytes(key) != body:
            raise PublishError("read back other content than was written")
        return ""

    def delete() -> str:
        holder[0].delete(key)
        return ""

    run("credentials", credentials)
    run("bucket", bucket)
    run("list", listing)
    put_ok = run("put (If-None-Match: *)", put)
    run("second put refused", second_put)
    run("get", get)
    if put_ok:
        # Always try to clean up, even when a check in between failed.
        deleted = _try(delete)
        results.append(CheckResult("delete", deleted, "" if deleted else "could not delete"))
    else:
        run("delete", delete)
    return results


def _try(action: Callable[[], str]) -> bool:
    try:
        action()
    except PublishError:
        return False
    return True
