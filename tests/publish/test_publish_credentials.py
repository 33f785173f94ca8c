"""Rules of credential sources: order, refusal reasons by name, and no secret ever shown.

Vault is the stand-in in vault_standin.py (no Vault server can run here), driven by real hvac.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from vault_standin import VaultServer, VaultState

from publish.config import load_config
from publish.credentials import (
    Credentials,
    CredentialSource,
    EnvSource,
    FileSource,
    SourceFailed,
    resolve_credentials,
)
from publish.errors import CredentialsUnavailable, InvalidInput
from publish.proxy import ProxyRule
from publish.vault import VaultSource

SECRET = "wJalrXUtnFEMI-test-secret"


@pytest.fixture
def vault(tmp_path: Path) -> Iterator[VaultState]:
    with VaultServer() as state:
        state.kubernetes_roles["trainer"] = "jwt-of-the-pod"
        state.approles["role-1"] = "secret-1"
        state.secrets["secret/training/s3"] = {
            "access_key_id": "AKIAVAULT", "secret_access_key": SECRET}
        yield state


def _credentials_file(tmp_path: Path, mode: int) -> Path:
    path = tmp_path / "credentials"
    path.write_text(f"# test\naccess_key_id = AKIAFILE\nsecret_access_key = {SECRET}\n")
    path.chmod(mode)
    return path


def test_environment_source_reads_the_aws_variables() -> None:
    creds = EnvSource(env={"AWS_ACCESS_KEY_ID": "AKIAENV", "AWS_SECRET_ACCESS_KEY": SECRET}).load()
    assert (creds.access_key_id, creds.secret_access_key) == ("AKIAENV", SECRET)
    assert creds.source == "env"


def test_credentials_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    path = _credentials_file(tmp_path, 0o644)
    with pytest.raises(SourceFailed, match="chmod 600"):
        FileSource(path).load()
    assert FileSource(_credentials_file(tmp_path, 0o600)).load().access_key_id == "AKIAFILE"


def test_first_source_that_yields_credentials_wins(tmp_path: Path) -> None:
    env = EnvSource(env={"AWS_ACCESS_KEY_ID": "AKIAENV", "AWS_SECRET_ACCESS_KEY": SECRET})
    file = FileSource(_credentials_file(tmp_path, 0o600))
    assert resolve_credentials([file, env]).source == "file"
    assert resolve_credentials([env, file]).source == "env"


def test_every_failed_source_is_reported_by_name_without_secrets(
    tmp_path: Path, vault: VaultState
) -> None:
    jwt = tmp_path / "jwt"
    jwt.write_text("wrong-jwt")
    sources: list[CredentialSource] = [
        EnvSource(env={}),
        FileSource(_credentials_file(tmp_path, 0o640), name="team-file"),
        VaultSource(vault.url, "training/s3", "kubernetes", ProxyRule(), role="trainer",
                    jwt_path=jwt),
    ]
    with pytest.raises(CredentialsUnavailable) as caught:
        resolve_credentials(sources)
    message = str(caught.value)
    assert "env:" in message and "team-file:" in message and "vault:" in message
    assert "Forbidden" in message
    assert SECRET not in message and "wrong-jwt" not in message


def test_credentials_repr_hides_the_secret() -> None:
    creds = Credentials("AKIA1", SECRET, "session-token-value")
    assert SECRET not in repr(creds) and "session-token-value" not in repr(creds)


def test_vault_kubernetes_login_reads_the_kv2_secret(tmp_path: Path, vault: VaultState) -> None:
    jwt = tmp_path / "jwt"
    jwt.write_text("jwt-of-the-pod\n")
    creds = VaultSource(vault.url, "training/s3", "kubernetes", ProxyRule(), role="trainer",
                        jwt_path=jwt).load()
    assert (creds.access_key_id, creds.secret_access_key) == ("AKIAVAULT", SECRET)
    assert vault.paths == ["POST /v1/auth/kubernetes/login", "GET /v1/secret/data/training/s3"]


def test_vault_approle_login_reads_the_kv2_secret(
    vault: VaultState, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VAULT_ROLE_ID", "role-1")
    monkeypatch.setenv("VAULT_SECRET_ID", "secret-1")
    creds = VaultSource(vault.url, "training/s3", "approle", ProxyRule()).load()
    assert creds.access_key_id == "AKIAVAULT"
    assert vault.paths[0] == "POST /v1/auth/approle/login"


def test_vault_secret_without_the_keys_is_a_failure(
    vault: VaultState, monkeypatch: pytest.MonkeyPatch
) -> None:
    vault.secrets["secret/empty"] = {"unrelated": "x"}
    monkeypatch.setenv("VAULT_ROLE_ID", "role-1")
    monkeypatch.setenv("VAULT_SECRET_ID", "secret-1")
    with pytest.raises(SourceFailed, match="lacks access_key_id"):
        VaultSource(vault.url, "empty", "approle", ProxyRule()).load()


def test_unreachable_vault_is_reported_by_source_name() -> None:
    source = VaultSource("http://127.0.0.1:9", "x", "approle", ProxyRule(), name="vault-a")
    with pytest.raises(CredentialsUnavailable, match="vault-a:"):
        resolve_credentials([source])


def test_config_file_lists_sources_in_order(tmp_path: Path, vault: VaultState) -> None:
    config = tmp_path / "publish.toml"
    config.write_text(
        'proxy = "http://proxy.invalid:3128"\n'
        '[[credentials]]\nsource = "env"\n'
        f'[[credentials]]\nsource = "file"\npath = "{tmp_path / "creds"}"\n'
        f'[[credentials]]\nsource = "vault"\naddress = "{vault.url}"\npath = "training/s3"\n'
        'auth = "kubernetes"\nrole = "trainer"\n'
    )
    loaded = load_config(config)
    assert [s.name for s in loaded.sources] == ["env", "file", "vault"]
    assert loaded.proxy.explicit == "http://proxy.invalid:3128"


def test_config_with_an_unknown_source_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "publish.toml"
    config.write_text('[[credentials]]\nsource = "instance-metadata"\n')
    with pytest.raises(InvalidInput, match="credentials\\[0\\]"):
        load_config(config)


@pytest.mark.parametrize("case", ["folder", "not utf-8"])
def test_vault_token_file_that_is_a_folder_or_not_utf8_is_a_failure_not_a_crash(
    tmp_path: Path, vault: VaultState, case: str
) -> None:
    jwt = tmp_path / "jwt"
    if case == "folder":
        jwt.mkdir()
    else:
        jwt.write_bytes(b"\xff\xfe-token")
    source = VaultSource(vault.url, "training/s3", "kubernetes", ProxyRule(), role="trainer",
                         jwt_path=jwt)
    with pytest.raises(CredentialsUnavailable, match="cannot read|UTF-8"):
        resolve_credentials([source])
