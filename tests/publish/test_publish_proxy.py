"""The one proxy rule, and proof from the recording proxy that S3 and Vault both follow it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import S3StoreFactory
from openbao_server import PublishVault
from publish_testbed import Bucket
from recording_proxy import ProxyServer, RecordingProxy

from publish.config import load_config
from publish.connect import open_store
from publish.epoch import Epoch
from publish.proxy import ProxyRule
from publish.resolve import resolve
from publish.save import save
from publish.vault import VaultSource


@pytest.fixture
def proxy() -> Iterator[RecordingProxy]:
    with ProxyServer() as state:
        yield state


@pytest.fixture
def vault(openbao: PublishVault, monkeypatch: pytest.MonkeyPatch) -> PublishVault:
    """The session's OpenBao with `secret/training/p`, and an AppRole login in the environment."""
    openbao.write_secret("training/p", {"access_key_id": "A", "secret_access_key": "B"})
    role_id, secret_id = openbao.approle("trainer")
    monkeypatch.setenv("VAULT_ROLE_ID", role_id)
    monkeypatch.setenv("VAULT_SECRET_ID", secret_id)
    return openbao


def test_explicit_proxy_wins_over_the_environment() -> None:
    rule = ProxyRule.from_env("http://explicit:1", {"HTTPS_PROXY": "http://env:2"})
    assert rule.proxy_for("https://s3.example") == "http://explicit:1"


def test_environment_proxy_is_chosen_by_the_target_scheme() -> None:
    rule = ProxyRule.from_env(None, {"HTTPS_PROXY": "http://tls:1", "http_proxy": "http://p:2"})
    assert rule.proxy_for("https://s3.example") == "http://tls:1"
    assert rule.proxy_for("http://minio.local:9000") == "http://p:2"


@pytest.mark.parametrize("no_proxy", ["vault.corp", ".corp", "corp", "x, vault.corp", "*"])
def test_no_proxy_exempts_matching_hosts_even_from_an_explicit_proxy(no_proxy: str) -> None:
    rule = ProxyRule.from_env("http://explicit:1", {"NO_PROXY": no_proxy})
    assert rule.proxy_for("https://vault.corp:8200") is None


def test_no_proxy_does_not_exempt_a_host_that_only_ends_alike() -> None:
    rule = ProxyRule.from_env(None, {"NO_PROXY": "corp", "HTTPS_PROXY": "http://p:1"})
    assert rule.proxy_for("https://notcorp:1") == "http://p:1"


def test_s3_requests_go_through_the_proxy_the_rule_names(
    s3_store: S3StoreFactory, make_save: object, proxy: RecordingProxy, tmp_path: Path
) -> None:
    store = s3_store(proxy=proxy.url)
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "m").write_bytes(b"x")
    save(store, folder, 1, Epoch.of(1, 0))
    resolve(store, Epoch.of(1, 0), into=tmp_path / "out")
    assert proxy.seen("PUT", "/ckpt/data/") == 1
    assert proxy.seen("PUT", "/ckpt/log/") == 1
    assert proxy.seen("GET", "/ckpt/data/") >= 1


def test_s3_environment_proxy_is_ignored_for_a_no_proxy_host(
    s3_store: S3StoreFactory, proxy: RecordingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    store = s3_store()  # the fixture's rule has no explicit proxy and reads nothing itself
    store.put_bytes("k", b"v")
    assert proxy.requests == []


def test_vault_requests_go_through_the_proxy_the_rule_names(
    vault: PublishVault, proxy: RecordingProxy
) -> None:
    rule = ProxyRule.from_env(None, {"HTTP_PROXY": proxy.url})
    assert VaultSource(vault.url, "training/p", "approle", rule).load().access_key_id == "A"
    assert proxy.seen("POST", "/v1/auth/approle/login") == 1
    assert proxy.seen("GET", "/v1/secret/data/training/p") == 1


def test_vault_kubernetes_login_goes_through_the_proxy_the_environment_names(
    vault: PublishVault, proxy: RecordingProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jwt = tmp_path / "jwt"
    jwt.write_text(vault.tokenreview.issue("train", "trainer"))
    config = tmp_path / "publish.toml"
    config.write_text(
        f'[[credentials]]\nsource = "vault"\naddress = "{vault.url}"\n'
        'path = "training/p"\nauth = "kubernetes"\nrole = "trainer"\n'
        f'jwt_path = "{jwt}"\n'
    )
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "vault.corp, 10.0.0.0/8, 127.0.0.1:1")  # none is this host
    (source,) = load_config(config).sources
    assert source.load().access_key_id == "A"
    assert proxy.seen("POST", "/v1/auth/kubernetes/login") == 1
    assert proxy.seen("GET", "/v1/secret/data/training/p") == 1


def test_vault_bypasses_the_proxy_for_a_no_proxy_host(
    vault: PublishVault, proxy: RecordingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)  # requests' own env reading must stay off
    rule = ProxyRule.from_env(None, {"HTTP_PROXY": proxy.url, "NO_PROXY": "127.0.0.1"})
    assert VaultSource(vault.url, "training/p", "approle", rule).load().access_key_id == "A"
    assert proxy.requests == []


# Issue 12, finding 6: NO_PROXY as curl and requests read it; AWS_ENDPOINT_URL obeys the rule.


@pytest.mark.parametrize(
    ("no_proxy", "url"),
    [
        ("127.0.0.0/8", "http://127.0.0.1:9000"),
        ("10.0.0.0/8", "https://10.20.30.40"),
        ("192.168.1.0/24, other", "http://192.168.1.7:80/x"),
        ("::1/128", "http://[::1]:9000"),
        ("::1", "http://[::1]:9000"),
        ("[::1]", "http://[::1]:9000"),
        ("minio.local:9000", "http://minio.local:9000"),
        ("10.1.1.1:443", "https://10.1.1.1"),
        ("[::1]:9000", "http://[::1]:9000"),
    ],
)
def test_no_proxy_cidr_and_host_port_entries_exempt_matching_targets(
    no_proxy: str, url: str
) -> None:
    rule = ProxyRule.from_env("http://explicit:1", {"NO_PROXY": no_proxy})
    assert rule.proxy_for(url) is None


@pytest.mark.parametrize(
    ("no_proxy", "url"),
    [
        ("127.0.0.0/8", "http://128.0.0.1:9000"),
        ("10.0.0.0/8", "https://minio.10.0.0.0"),
        ("minio.local:9000", "http://minio.local:9001"),
        ("minio.local:9000", "http://minio.local"),
        ("10.1.1.1:443", "http://10.1.1.1"),
        ("not/a/cidr", "http://not"),
    ],
)
def test_no_proxy_cidr_and_host_port_entries_exempt_nothing_else(no_proxy: str, url: str) -> None:
    rule = ProxyRule.from_env("http://explicit:1", {"NO_PROXY": no_proxy})
    assert rule.proxy_for(url) == "http://explicit:1"


def test_aws_endpoint_url_goes_through_the_proxy_the_rule_names(
    s3_env: Bucket, proxy: RecordingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_env.server.url)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    store = open_store(s3_env.store_url, load_config(None))
    store.put_bytes("k", b"v")
    assert proxy.seen("PUT", "/ckpt/k") == 1


def test_aws_endpoint_url_in_a_no_proxy_range_goes_direct(
    s3_env: Bucket, proxy: RecordingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_env.server.url)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.0/8")
    store = open_store(s3_env.store_url, load_config(None))
    store.put_bytes("k", b"v")
    assert store.get_bytes("k") == b"v"
    assert proxy.requests == []
