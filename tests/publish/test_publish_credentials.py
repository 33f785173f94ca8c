"""Rules of credential sources: order, refusal reasons by name, and no secret ever shown.

The Vault source is tested against a real OpenBao server in test_publish_vault.py; here it is
one source among others.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes_tokenreview import TokenReviewState
from openbao_server import PublishVault

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
    tmp_path: Path, openbao: PublishVault
) -> None:
    # A service-account token of the right account, but not issued by the cluster OpenBao asks.
    forged = TokenReviewState().issue("train", "trainer")
    jwt = tmp_path / "jwt"
    jwt.write_text(forged)
    sources: list[CredentialSource] = [
        EnvSource(env={}),
        FileSource(_credentials_file(tmp_path, 0o640), name="team-file"),
        VaultSource(
            openbao.url, "training/s3", "kubernetes", ProxyRule(), role="trainer", jwt_path=jwt
        ),
    ]
    with pytest.raises(CredentialsUnavailable) as caught:
        resolve_credentials(sources)
    message = str(caught.value)
    assert "env:" in message and "team-file:" in message and "vault:" in message
    assert "Forbidden" in message
    assert SECRET not in message and forged not in message


def test_credentials_repr_hides_the_secret() -> None:
    creds = Credentials("AKIA1", SECRET, "session-token-value")
    assert SECRET not in repr(creds) and "session-token-value" not in repr(creds)


def test_config_file_lists_sources_in_order(tmp_path: Path) -> None:
    config = tmp_path / "publish.toml"
    config.write_text(
        'proxy = "http://proxy.invalid:3128"\n'
        '[[credentials]]\nsource = "env"\n'
        f'[[credentials]]\nsource = "file"\npath = "{tmp_path / "creds"}"\n'
        '[[credentials]]\nsource = "vault"\naddress = "http://vault.invalid:8200"\n'
        'path = "training/s3"\n'
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
