"""Rules of probing a store before a job is accepted."""

from __future__ import annotations

from pathlib import Path

from conftest import S3StoreFactory
from recording_proxy import Fault, ProxyServer

from publish.connect import check_bucket
from publish.errors import CredentialsUnavailable
from publish.posix_store import PosixStore
from publish.probe import probe
from publish.store import Store

CHECKS = [
    "credentials",
    "bucket",
    "list",
    "put (If-None-Match: *)",
    "second put refused",
    "get",
    "delete",
]


def test_probe_passes_every_check_on_a_good_s3_store(s3_store: S3StoreFactory) -> None:
    results = probe(s3_store, check_bucket)
    assert [r.name for r in results] == CHECKS
    assert all(r.ok for r in results), [r.line() for r in results]
    assert list(s3_store().list_keys("probe/")) == []


def test_probe_fails_a_store_that_accepts_the_second_conditional_put(
    s3_store: S3StoreFactory,
) -> None:
    with ProxyServer() as proxy:
        # Answer 200 to the second PutObject of the probe key, as a store ignoring the header.
        proxy.faults.append(Fault("PUT", "/ckpt/probe/", status=200, skip=1))
        results = probe(lambda: s3_store(proxy=proxy.url), check_bucket)
    failed = [r.name for r in results if not r.ok]
    assert failed[0] == "second put refused"
    assert results[-1].name == "delete" and results[-1].ok


def test_probe_reports_credentials_failure_and_skips_the_rest() -> None:
    def no_credentials() -> Store:
        raise CredentialsUnavailable("no credentials: env: not set")

    results = probe(no_credentials, check_bucket)
    assert [r.ok for r in results] == [False] * len(CHECKS)
    assert "env: not set" in results[0].line()
    assert "skipped" in results[1].detail


def test_probe_fails_a_missing_bucket(s3_store: S3StoreFactory, bucket: object) -> None:
    from publish.s3_store import S3Location, S3Store

    good = s3_store()
    missing = S3Store(good.client, S3Location("no-such-bucket-here", "ckpt/"))
    results = probe(lambda: missing, check_bucket)
    assert results[1].name == "bucket" and not results[1].ok


def test_probe_passes_on_a_checkpoint_root(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    results = probe(lambda: PosixStore(tmp_path / "root"), check_bucket)
    assert all(r.ok for r in results), [r.line() for r in results]
