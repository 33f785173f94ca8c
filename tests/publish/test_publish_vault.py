"""The Vault credential source against a real OpenBao server (Vault's open fork, same HTTP API).

KV v2 reads, AppRole and Kubernetes login, wrong roles, token expiry, a sealed server and an
unreachable one. OpenBao is real; only the Kubernetes API server that its kubernetes auth asks
to review a service-account token is a stand-in (kubernetes_tokenreview.py), since no
Kubernetes runs here.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import hvac.exceptions
import pytest
from click.testing import CliRunner
from openbao_server import OpenBao, PublishVault, closed_port
from publish_testbed import Bucket
from recording_proxy import Fault, ProxyServer, RecordingProxy

from publish.cli import main
from publish.credentials import SourceFailed, resolve_credentials
from publish.errors import CredentialsUnavailable
from publish.proxy import ProxyRule
from publish.vault import VaultSource

SECRET = "wJalrXUtnFEMI-vault-secret"
EXIT_UNAVAILABLE = 6


@pytest.fixture
def vault(openbao: PublishVault) -> PublishVault:
    """The session's OpenBao with `secret/training/s3` holding a known key pair."""
    openbao.write_secret("training/s3", {"access_key_id": "AKIAVAULT", "secret_access_key": SECRET})
    return openbao


@pytest.fixture
def approle_env(vault: PublishVault, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """VAULT_ROLE_ID and VAULT_SECRET_ID of the `trainer` role, set in the environment."""
    role_id, secret_id = vault.approle("trainer")
    monkeypatch.setenv("VAULT_ROLE_ID", role_id)
    monkeypatch.setenv("VAULT_SECRET_ID", secret_id)
    return role_id, secret_id


@pytest.fixture
def proxy() -> Iterator[RecordingProxy]:
    with ProxyServer() as state:
        yield state


def _jwt(tmp_path: Path, token: str) -> Path:
    path = tmp_path / "serviceaccount-token"
    path.write_text(token + "\n")
    return path


def _approle(
    vault: PublishVault, path: str = "training/s3", secret_id_path: Path | None = None
) -> VaultSource:
    return VaultSource(vault.url, path, "approle", ProxyRule(), secret_id_path=secret_id_path)


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _config(tmp_path: Path, address: str, name: str = "vault") -> Path:
    config = tmp_path / "publish.toml"
    config.write_text(
        f'[[credentials]]\nsource = "vault"\nname = "{name}"\n'
        f'address = "{address}"\npath = "training/s3"\nauth = "approle"\n'
    )
    return config


# Reading the KV v2 secret after a login.


def test_kubernetes_login_reads_the_kv2_secret(vault: PublishVault, tmp_path: Path) -> None:
    jwt = _jwt(tmp_path, vault.tokenreview.issue("train", "trainer"))
    creds = VaultSource(
        vault.url, "training/s3", "kubernetes", ProxyRule(), role="trainer", jwt_path=jwt
    ).load()
    assert (creds.access_key_id, creds.secret_access_key) == ("AKIAVAULT", SECRET)
    assert vault.tokenreview.reviews[-1] == ("train/trainer", True)


def test_approle_login_reads_the_kv2_secret(
    vault: PublishVault, approle_env: tuple[str, str]
) -> None:
    creds = _approle(vault).load()
    assert (creds.access_key_id, creds.secret_access_key) == ("AKIAVAULT", SECRET)
    assert creds.source == "vault"


def test_approle_secret_id_may_come_from_a_file(
    vault: PublishVault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    role_id, secret_id = vault.approle("trainer")
    monkeypatch.setenv("VAULT_ROLE_ID", role_id)
    secret_file = tmp_path / "secret-id"
    secret_file.write_text(secret_id + "\n")
    assert _approle(vault, secret_id_path=secret_file).load().access_key_id == "AKIAVAULT"


def test_the_newest_version_of_the_secret_is_read(
    vault: PublishVault, approle_env: tuple[str, str]
) -> None:
    vault.write_secret("training/rotated", {"access_key_id": "OLD", "secret_access_key": "o"})
    vault.write_secret("training/rotated", {"access_key_id": "NEW", "secret_access_key": "n"})
    assert _approle(vault, "training/rotated").load().access_key_id == "NEW"


def test_a_secret_without_the_keys_is_a_failure(
    vault: PublishVault, approle_env: tuple[str, str]
) -> None:
    vault.write_secret("training/empty", {"unrelated": "x"})
    with pytest.raises(SourceFailed, match="lacks access_key_id"):
        _approle(vault, "training/empty").load()


@pytest.mark.parametrize("case", ["never written", "newest version deleted"])
def test_a_secret_that_is_missing_or_whose_newest_version_is_deleted_is_a_failure(
    vault: PublishVault, approle_env: tuple[str, str], case: str
) -> None:
    path = f"training/{case.replace(' ', '-')}"
    if case == "newest version deleted":
        vault.write_secret(path, {"access_key_id": "A", "secret_access_key": "B"})
        client = vault.server.client()
        try:
            client.secrets.kv.v2.delete_latest_version_of_secret(path)
        finally:
            client.adapter.close()
    with pytest.raises(SourceFailed, match="Vault answered InvalidPath"):
        _approle(vault, path).load()


def test_a_secret_outside_the_roles_policy_is_forbidden(
    vault: PublishVault, approle_env: tuple[str, str]
) -> None:
    vault.write_secret("elsewhere/s3", {"access_key_id": "A", "secret_access_key": "B"})
    with pytest.raises(SourceFailed, match="Vault answered Forbidden"):
        _approle(vault, "elsewhere/s3").load()


# Wrong roles and credentials: refused by the server, reported by class, never echoed.


@pytest.mark.parametrize("wrong", ["role id", "secret id"])
def test_approle_login_with_an_unknown_role_id_or_secret_id_is_refused(
    vault: PublishVault, monkeypatch: pytest.MonkeyPatch, wrong: str
) -> None:
    role_id, secret_id = vault.approle("trainer")
    if wrong == "role id":
        role_id = "4c0e3bd5-0000-4000-8000-000000000000"
    else:
        secret_id = "9d1f2ce6-0000-4000-8000-000000000000"
    monkeypatch.setenv("VAULT_ROLE_ID", role_id)
    monkeypatch.setenv("VAULT_SECRET_ID", secret_id)
    with pytest.raises(CredentialsUnavailable) as caught:
        resolve_credentials([_approle(vault)])
    message = str(caught.value)
    assert "vault:" in message and "Vault answered InvalidRequest" in message
    assert secret_id not in message


def test_kubernetes_login_to_an_unknown_role_is_refused(
    vault: PublishVault, tmp_path: Path
) -> None:
    jwt = _jwt(tmp_path, vault.tokenreview.issue("train", "trainer"))
    source = VaultSource(
        vault.url, "training/s3", "kubernetes", ProxyRule(), role="inference", jwt_path=jwt
    )
    with pytest.raises(SourceFailed, match="Vault answered InvalidRequest"):
        source.load()


def test_kubernetes_login_of_an_account_the_role_is_not_bound_to_is_forbidden(
    vault: PublishVault, tmp_path: Path
) -> None:
    jwt = _jwt(tmp_path, vault.tokenreview.issue("train", "notebook"))
    source = VaultSource(
        vault.url, "training/s3", "kubernetes", ProxyRule(), role="trainer", jwt_path=jwt
    )
    with pytest.raises(SourceFailed, match="Vault answered Forbidden"):
        source.load()


@pytest.mark.parametrize("case", ["folder", "not utf-8"])
def test_a_token_file_that_is_a_folder_or_not_utf8_is_a_failure_not_a_crash(
    vault: PublishVault, tmp_path: Path, case: str
) -> None:
    jwt = tmp_path / "jwt"
    if case == "folder":
        jwt.mkdir()
    else:
        jwt.write_bytes(b"\xff\xfe-token")
    source = VaultSource(
        vault.url, "training/s3", "kubernetes", ProxyRule(), role="trainer", jwt_path=jwt
    )
    with pytest.raises(CredentialsUnavailable, match="cannot read|UTF-8"):
        resolve_credentials([source])


# Token lifetime: each load is one login and one read; the token is never kept or renewed.


def test_each_load_logs_in_again_so_an_expired_token_is_never_reused(
    vault: PublishVault, monkeypatch: pytest.MonkeyPatch
) -> None:
    role_id, secret_id = vault.approle("short-lived")
    monkeypatch.setenv("VAULT_ROLE_ID", role_id)
    monkeypatch.setenv("VAULT_SECRET_ID", secret_id)
    # The premise: a token of this role (TTL 2 s) is refused once its TTL has passed. A TTL
    # of 2 s rather than 1 leaves a load, one login and one read, room on a busy machine.
    client = vault.server.client(token="")
    try:
        client.auth.approle.login(role_id=role_id, secret_id=secret_id)
        time.sleep(3)
        with pytest.raises(hvac.exceptions.Forbidden):
            client.auth.token.lookup_self()
    finally:
        client.adapter.close()
    source = _approle(vault)
    assert source.load().access_key_id == "AKIAVAULT"
    time.sleep(3)
    assert source.load().access_key_id == "AKIAVAULT"


def test_a_token_that_expires_between_login_and_read_is_reported_as_forbidden(
    vault: PublishVault, proxy: RecordingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    role_id, secret_id = vault.approle("short-lived")
    monkeypatch.setenv("VAULT_ROLE_ID", role_id)
    monkeypatch.setenv("VAULT_SECRET_ID", secret_id)
    # The login's reply is held back past the token's 2 s TTL, then the read uses it.
    proxy.faults.append(Fault("POST", "/v1/auth/approle/login", delay=3.0))
    source = VaultSource(vault.url, "training/s3", "approle", ProxyRule(explicit=proxy.url))
    with pytest.raises(CredentialsUnavailable) as caught:
        resolve_credentials([source])
    assert "vault: " in str(caught.value) and "Vault answered Forbidden" in str(caught.value)
    assert proxy.seen("GET", "/v1/secret/data/training/s3") == 1


# A server that cannot answer: one line, exit 6, naming the source.


def test_a_sealed_vault_exits_6_in_one_line_naming_the_source(
    sealed_openbao: OpenBao, bucket: Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VAULT_ROLE_ID", "role")
    monkeypatch.setenv("VAULT_SECRET_ID", "secret")
    config = _config(tmp_path, sealed_openbao.url, name="vault-prod")
    code, _, err = _run(
        "resolve",
        "--store",
        bucket.store_url,
        "--endpoint-url",
        bucket.server.url,
        "--config",
        str(config),
        "--epoch",
        "1000000",
    )
    assert code == EXIT_UNAVAILABLE
    assert err.count("\n") == 1 and err.startswith("publish: no credentials: vault-prod: ")
    assert "Vault answered VaultDown" in err


def test_an_unreachable_vault_exits_6_in_one_line_naming_the_source(
    bucket: Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VAULT_ROLE_ID", "role")
    monkeypatch.setenv("VAULT_SECRET_ID", "secret")
    address = f"http://127.0.0.1:{closed_port()}"
    config = _config(tmp_path, address, name="vault-a")
    code, _, err = _run(
        "resolve",
        "--store",
        bucket.store_url,
        "--endpoint-url",
        bucket.server.url,
        "--config",
        str(config),
        "--epoch",
        "1000000",
    )
    assert code == EXIT_UNAVAILABLE
    assert err == f"publish: no credentials: vault-a: {address}: ConnectionError\n"


# End to end: the key pair read from OpenBao is the one the S3 store accepts.


def test_save_and_resolve_with_the_s3_key_read_from_vault(
    vault: PublishVault, approle_env: tuple[str, str], bucket: Bucket, tmp_path: Path
) -> None:
    key = bucket.server.credentials
    vault.write_secret(
        "training/s3-real",
        {"access_key_id": key.access_key_id, "secret_access_key": key.secret_access_key},
    )
    config = tmp_path / "publish.toml"
    config.write_text(
        f'[[credentials]]\nsource = "vault"\naddress = "{vault.url}"\n'
        'path = "training/s3-real"\nauth = "approle"\n'
    )
    folder = tmp_path / "save"
    folder.mkdir()
    (folder / "model.bin").write_bytes(b"weights")
    common = [
        "--store",
        bucket.store_url,
        "--endpoint-url",
        bucket.server.url,
        "--config",
        str(config),
        "--epoch",
        "1000000",
    ]
    code, _, err = _run("save", str(folder), "--step", "5", *common)
    assert code == 0, err
    code, _, err = _run("resolve", "--into", str(tmp_path / "out"), *common)
    assert code == 0, err
    assert (tmp_path / "out" / "model.bin").read_bytes() == b"weights"
