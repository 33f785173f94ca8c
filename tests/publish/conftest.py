"""Fixtures for the publish tests: a real S3 API (moto's server over HTTP, authentication on),
a real Vault API (an OpenBao dev server), a checkpoint root on local disk, and save folders to
publish.
"""

from __future__ import annotations

import json
import secrets
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import boto3
import pytest
import requests
from moto.server import ThreadedMotoServer

sys.path.insert(0, str(Path(__file__).parent))

from kubernetes_tokenreview import TokenReviewServer, TokenReviewState  # noqa: E402
from openbao_server import OpenBao, PublishVault, configure_for_publish  # noqa: E402
from publish_testbed import REGION, Bucket, S3Server  # noqa: E402

from publish.credentials import Credentials  # noqa: E402
from publish.posix_store import PosixStore  # noqa: E402
from publish.proxy import ProxyRule  # noqa: E402
from publish.s3_store import S3Location, S3Store, make_client  # noqa: E402
from publish.store import Store  # noqa: E402


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Keep the developer's AWS settings, proxies and epoch out of every test."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "NO_PROXY",
        "https_proxy",
        "http_proxy",
        "no_proxy",
        "DISPATCH_EPOCH",
        "PUBLISH_STORE",
        "PUBLISH_ENDPOINT_URL",
        "PUBLISH_CONFIG",
        "SLURM_JOB_ID",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """moto's S3 over real HTTP on 127.0.0.1 with SigV4 authentication enforced.

    moto checks signatures only once its "initial no-auth action count" is used up; the IAM
    user and key are created before that, then the count is set to 0 so every later request
    must be signed by that key (a wrong key gets 403, see test_publish_s3_server.py).
    """
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    iam = boto3.client(
        "iam",
        endpoint_url=url,
        region_name=REGION,
        aws_access_key_id="setup",
        aws_secret_access_key="setup",
    )
    iam.create_user(UserName="trainer")
    iam.put_user_policy(
        UserName="trainer",
        PolicyName="s3",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
            }
        ),
    )
    key = iam.create_access_key(UserName="trainer")["AccessKey"]
    requests.post(f"{url}/moto-api/reset-auth", data=b"0", timeout=10).raise_for_status()
    try:
        yield S3Server(url, Credentials(key["AccessKeyId"], key["SecretAccessKey"]))
    finally:
        requests.post(f"{url}/moto-api/reset-auth", data=b"inf", timeout=10)
        server.stop()


@pytest.fixture(scope="session")
def tokenreview(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TokenReviewState]:
    """The stand-in of Kubernetes' TokenReview endpoint that OpenBao's kubernetes auth asks."""
    with TokenReviewServer(tmp_path_factory.mktemp("apiserver")) as state:
        yield state


@pytest.fixture(scope="session")
def openbao(
    tmp_path_factory: pytest.TempPathFactory, tokenreview: TokenReviewState
) -> Iterator[PublishVault]:
    """One OpenBao dev server for the session, set up as `PublishVault` describes."""
    with OpenBao(tmp_path_factory.mktemp("openbao")) as server:
        yield configure_for_publish(server, tokenreview)


@pytest.fixture
def sealed_openbao(tmp_path: Path) -> Iterator[OpenBao]:
    """An OpenBao dev server of its own, sealed with `bao operator seal`."""
    with OpenBao(tmp_path / "sealed-openbao") as server:
        server.bao("operator", "seal")
        yield server


@pytest.fixture
def bucket(s3_server: S3Server) -> Bucket:
    """A new, empty bucket for one test."""
    name = f"ckpt-{secrets.token_hex(6)}"
    made = Bucket(s3_server, name)
    made.client().create_bucket(Bucket=name)
    return made


@pytest.fixture
def s3_env(bucket: Bucket, monkeypatch: pytest.MonkeyPatch) -> Bucket:
    """The bucket, with its good key in the environment (the 'env' credential source)."""
    creds = bucket.server.credentials
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", creds.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", creds.secret_access_key)
    return bucket


S3StoreFactory = Callable[..., S3Store]


@pytest.fixture
def s3_store(bucket: Bucket) -> S3StoreFactory:
    """Build an S3Store on the test bucket, optionally through a proxy or with tight timeouts."""

    def build(
        proxy: str | None = None,
        read_timeout: float = 60.0,
        max_attempts: int = 5,
        credentials: Credentials | None = None,
    ) -> S3Store:
        rule = ProxyRule(explicit=proxy)
        client = make_client(
            credentials or bucket.server.credentials,
            rule,
            bucket.server.url,
            REGION,
            read_timeout=read_timeout,
            max_attempts=max_attempts,
        )
        return S3Store(client, S3Location.parse(bucket.store_url))

    return build


@pytest.fixture
def make_save(tmp_path: Path) -> Callable[..., Path]:
    """Write a save folder with the given files (relative path -> bytes)."""
    counter = iter(range(10**6))

    def write(files: dict[str, bytes] | None = None, name: str | None = None) -> Path:
        folder = tmp_path / "saves" / (name or f"save-{next(counter)}")
        for relative, data in (files or {"model.bin": b"weights", "opt/state.bin": b"s"}).items():
            path = folder / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        return folder

    return write


@pytest.fixture(params=["posix", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    """Each rule that holds for every store runs against a checkpoint root and against S3."""
    if request.param == "posix":
        return PosixStore(tmp_path / "root")
    factory: S3StoreFactory = request.getfixturevalue("s3_store")
    return factory()


TinyFilesystem = Callable[[int], Path]


@pytest.fixture
def tiny_filesystem(tmp_path: Path) -> Iterator[TinyFilesystem]:
    """Mount real tmpfs filesystems of a given size (bytes) under tmp_path, for ENOSPC.

    Needs root (the test machine runs as root); skipped, saying so, where mounting is refused.
    Every mount is lazily unmounted at the end, whatever the test left in it.
    """
    import subprocess

    mounted: list[Path] = []

    def mount(size: int) -> Path:
        point = tmp_path / f"tiny-{len(mounted)}"
        point.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        subprocess.run(["umount", "-l", str(point)], check=False)


def fill(folder: Path, leave: int = 0) -> None:
    """Fill the filesystem holding `folder` until fewer than `leave` bytes are free."""
    import os

    stats = os.statvfs(folder)
    free = stats.f_bavail * stats.f_frsize
    with open(folder / "filler", "wb") as handle:
        try:
            handle.write(b"\0" * max(free - leave, 0))
            handle.flush()
        except OSError:
            pass
