"""The sweep's CronJob as rendered (no cluster): the pod's config read back as the login host's
config reads, the objects' mounts, schedule and identity, and ``owner`` accepted only from a
service account of the namespace."""

from __future__ import annotations

import tomllib
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dispatch.adapters.kubeflow import KubeflowBackend
from dispatch.adapters.kubeflow.cronjob import (
    CONFIG_PATH,
    SweepCronJob,
    Wanted,
    name_for,
    pod_config,
    toml_value,
)
from dispatch.adapters.kubeflow.settings import load_settings
from dispatch.cli.main import main
from dispatch.config import load, parse
from dispatch.model.errors import InvalidError, UnauthorizedError

CONFIG = """\
ledger = "ledger"
[backend]
name = "kubeflow"
[backend.settings]
kubeconfig = "/home/ada/.kube/config"
context = "prod"
namespace = "ada"
queue = "main"
resources_per_node = {cpu = "4", memory = "16Gi"}
namespaces = ["old"]
timeout = 12.5
[deliver]
webhook = "https://hooks.example.com/T0/secret-path"
timeout = "7s"
[sweep]
time_limit = "40s"
metrics = "metrics.prom"
pack_after = "never"
[supervise]
poll = "15s"
"""


def write_config(tmp_path: Path, text: str = CONFIG) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_the_pods_config_reads_as_the_login_hosts_without_its_kubeconfig(tmp_path: Path) -> None:
    settings = load(write_config(tmp_path))
    text = pod_config(settings, "ada")
    in_pod = parse(tomllib.loads(text), Path(CONFIG_PATH))
    assert in_pod.ledger == settings.ledger == tmp_path / "ledger"
    assert in_pod.sweep_metrics == settings.sweep_metrics == tmp_path / "metrics.prom"
    kept = {
        k: v for k, v in settings.backend_settings.items() if k not in ("kubeconfig", "context")
    }
    assert in_pod.backend_settings == {**kept, "owner": "ada"}
    for same in (
        "backend",
        "deliver_webhook",
        "deliver_timeout",
        "sweep_time_limit",
        "pack_after",
        "forget_after",
        "poll",
    ):
        assert getattr(in_pod, same) == getattr(settings, same), same
    assert load_settings(in_pod.backend_settings).owner == "ada"
    assert "kube/config" not in text and "prod" not in text


def test_an_owner_set_in_the_config_is_kept(tmp_path: Path) -> None:
    settings = load(
        write_config(
            tmp_path, CONFIG.replace('queue = "main"', 'queue = "main"\nowner = "ada@corp"')
        )
    )
    in_pod = tomllib.loads(pod_config(settings, "sa-name"))
    assert in_pod["backend"]["settings"]["owner"] == "ada@corp"


@pytest.mark.parametrize(
    "value",
    [
        'quote " and \\ backslash',
        "new\nline\ttab",
        "del \x7f and nul-free \x01",
        "ünïcode ✓",
        "",
        0.1,
        -3,
        1e-05,
        True,
        ["a", 1, [False]],
        {"k.y": "v", "n": {"x": 1}},
    ],
)
def test_every_value_is_written_as_toml_that_reads_back_the_same(value: Any) -> None:
    assert tomllib.loads(f"v = {toml_value(value)}\n")["v"] == value


def test_a_value_toml_cannot_hold_is_refused() -> None:
    with pytest.raises(InvalidError, match="cannot be written"):
        toml_value(None)


def sweep(tmp_path: Path, **kw: Any) -> SweepCronJob:
    settings = load(write_config(tmp_path))
    want: dict[str, Any] = {
        "schedule": "*/5 * * * *",
        "every": timedelta(minutes=5),
        "image": "registry.example.com/dispatch:1",
        "service_account": "dispatch-sweeper",
        "claim": "home",
        "uid": 1001,
        "gid": 1002,
    }
    return SweepCronJob(
        config=settings.path,
        namespace="ada",
        owner="ada",
        ledger=settings.ledger,
        pod_config=pod_config(settings, "ada"),
        want=Wanted(**{**want, **kw}),
    )


def test_the_cronjob_sweeps_as_the_service_account_and_the_users_uid(tmp_path: Path) -> None:
    job = sweep(tmp_path)
    secret, cron = job.objects()
    assert secret["kind"] == "Secret" and secret["metadata"]["name"] == cron["metadata"]["name"]
    assert secret["stringData"]["config.toml"] == job.pod_config
    spec = cron["spec"]
    assert (spec["schedule"], spec["concurrencyPolicy"]) == ("*/5 * * * *", "Forbid")
    assert spec["jobTemplate"]["spec"]["activeDeadlineSeconds"] == 300
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "dispatch-sweeper"
    assert pod["securityContext"] == {"runAsUser": 1001, "runAsGroup": 1002}
    (container,) = pod["containers"]
    assert container["command"] == ["dispatch", "sweep", "--config", CONFIG_PATH]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["config"]["mountPath"] == CONFIG_PATH and mounts["config"]["readOnly"]
    assert mounts["ledger"] == {"name": "ledger", "mountPath": str(tmp_path / "ledger")}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["ledger"]["persistentVolumeClaim"] == {"claimName": "home"}
    labels = spec["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
    assert labels == cron["metadata"]["labels"] == job.labels()


def test_a_subpath_mounts_the_ledgers_folder_within_the_claim_and_root_sets_no_uid(
    tmp_path: Path,
) -> None:
    cron = sweep(tmp_path, claim_path="users/ada/ledger", uid=None, gid=None).cronjob()
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert "securityContext" not in pod
    ledger = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "ledger")
    assert ledger["subPath"] == "users/ada/ledger"


def test_the_name_is_the_configs_and_fits_a_kubernetes_name(tmp_path: Path) -> None:
    a, b = name_for(tmp_path / "a.toml"), name_for(tmp_path / "b.toml")
    assert a != b and a == name_for(tmp_path / "a.toml")
    assert len(a) <= 52 and a.startswith("dispatch-sweep-")  # a CronJob's name limit


class Caller:
    """Stands in for the API client: only says who it is."""

    def __init__(self, name: str) -> None:
        self.name = name

    def whoami(self) -> str:
        return self.name


def backend(owner: str, caller: str) -> KubeflowBackend:
    settings = load_settings({"queue": "main", "namespace": "ada", "owner": owner})
    return KubeflowBackend(settings, api=Caller(caller))  # type: ignore[arg-type]


def test_owner_is_taken_from_a_service_account_of_the_namespace_only() -> None:
    assert backend("ada", "system:serviceaccount:ada:dispatch-sweeper").user == "ada"
    assert backend("", "bob").user == "bob"
    assert backend("bob", "bob").user == "bob"
    for caller in ("bob", "system:serviceaccount:bob:dispatch-sweeper"):
        with pytest.raises(UnauthorizedError, match="'owner' = 'ada'.*remove the setting"):
            _ = backend("ada", caller).user


def install(tmp_path: Path, *words: str) -> tuple[int, str]:
    config = tmp_path / "config.toml"
    if not config.exists():
        write_config(tmp_path)
    result = CliRunner().invoke(
        main, ["supervise", "install", "--config", str(config), *words], catch_exceptions=False
    )
    return result.exit_code, result.stderr


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (["--cron", "--image=x"], "--image goes with --kubernetes"),
        (["--scrontab", "--ledger-claim=home"], "--ledger-claim goes with --kubernetes"),
        (["--kubernetes", "--cron"], "one of --cron and --kubernetes, not both"),
        (["--kubernetes", "--cron", "--scrontab"], "not all three"),
        (["--kubernetes", "--user=bob", "--ledger-claim=home"], "--user goes with --cron"),
        (["--kubernetes", "--log=x.log", "--ledger-claim=home"], "do not go with --kubernetes"),
        (["--kubernetes", "--every=7m"], "cannot be a cron schedule"),
        (["--kubernetes"], "--ledger-claim is needed"),
    ],
)
def test_wrong_install_words_are_refused_before_the_cluster_is_asked(
    tmp_path: Path, words: list[str], said: str
) -> None:
    code, err = install(tmp_path, *words)
    assert code == 2 and said in err, err


def test_a_config_of_another_adapter_is_refused_naming_what_to_use(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        f'ledger = "{tmp_path / "l"}"\n[backend]\nname = "memory"\n'
    )
    code, err = install(tmp_path, "--kubernetes", "--ledger-claim=home")
    assert code == 2 and "uses the memory adapter" in err and "--cron or --scrontab" in err


def test_metrics_outside_the_ledger_the_pod_mounts_are_refused(tmp_path: Path) -> None:
    code, err = install(tmp_path, "--kubernetes", "--ledger-claim=home", "--image=x")
    assert code == 2, err
    assert f"sweep.metrics {tmp_path / 'metrics.prom'}" in err
    assert "outside the ledger folder" in err and "leave sweep.metrics out" in err
