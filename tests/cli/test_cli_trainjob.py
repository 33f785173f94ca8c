"""``dispatch trainjob``'s input: the manifest (a file or stdin), dispatch's options as flags or
in the manifest's annotation, and every way either can be wrong (no cluster: each refusal
comes before the API server is asked, and records nothing)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from dispatch.cli.main import main
from dispatch.cli.trainjob import job_spec, manifest_options, parse_manifest, split
from dispatch.model.enums import Action, CauseKind
from dispatch.model.errors import InvalidError

MANIFEST = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: finetune
  annotations:
    dispatch.dev/options: --rule=preempted,node-lost:resubmit:3 --key=ft-1
spec:
  runtimeRef: {name: dispatch-torch}
  trainer:
    numNodes: 2
    numProcPerNode: 4
    image: registry.example.com/train:1
    command: [torchrun, train.py]
    args: [--lr, "3e-4"]
"""


def run(tmp_path: Path, *words: str, stdin: str | None = None) -> tuple[int, str, str]:
    config = tmp_path / "config.toml"
    if not config.exists():
        config.write_text(
            f'ledger = "{tmp_path / "ledger"}"\n[backend]\nname = "kubeflow"\n'
            '[backend.settings]\nqueue = "main"\nnamespace = "ada"\n'
        )
    result = CliRunner().invoke(
        main, ["trainjob", "--config", str(config), *words], input=stdin, catch_exceptions=False
    )
    return result.exit_code, result.stdout, result.stderr


def test_the_manifest_says_the_jobs_name_shape_and_recovery() -> None:
    body = parse_manifest(MANIFEST, "finetune.yaml")
    options = manifest_options(body, "finetune.yaml")
    spec = job_spec(body, "finetune.yaml", options)
    assert (spec.name, spec.nodes, spec.procs_per_node) == ("finetune", 2, 4)
    assert spec.command == ("torchrun", "train.py", "--lr", "3e-4")
    assert spec.image == "registry.example.com/train:1"
    (rule,) = spec.recovery.rules
    assert (rule.on, rule.action, rule.budget) == (
        (CauseKind.PREEMPTED, CauseKind.NODE_LOST),
        Action.RESUBMIT,
        3,
    )
    assert options.key == "ft-1"
    # The manifest travels with the job, exactly as read.
    assert spec.trainjob is not None and spec.trainjob.body() == body


def test_a_flag_wins_over_the_manifests_annotation() -> None:
    cmd = split(["--rule=unknown:resubmit:1", "--name=other", "finetune.yaml"])
    assert cmd.manifest == "finetune.yaml"
    from dispatch.batch.dispatch_lines import Reader

    body = parse_manifest(MANIFEST, "finetune.yaml")
    options = Reader("the command line").take(cmd.job).over(manifest_options(body, "x"))
    spec = job_spec(body, "finetune.yaml", options)
    assert spec.name == "other"
    assert [r.on for r in spec.recovery.rules] == [(CauseKind.UNKNOWN,)]


def test_an_option_may_take_its_value_as_the_next_word() -> None:
    cmd = split(["--rule", "preempted:resubmit:1", "--config", "c.toml", "-"])
    assert (cmd.job, cmd.config, cmd.manifest) == (
        ("--rule", "preempted:resubmit:1"),
        "c.toml",
        "-",
    )


@pytest.mark.parametrize(
    "text, named",
    [
        (
            "kind: TrainJob\n",
            "dispatch trainjob submits a TrainJob of trainer.kubeflow.org/v1alpha1",
        ),
        (MANIFEST.replace("kind: TrainJob", "kind: Job"), "kind 'Job'"),
        (MANIFEST + "---\n" + MANIFEST, "holds 2 documents"),
        ("", "holds 0 documents"),
        ("- a\n- b\n", "expected a TrainJob, not list"),
        ("kind: [TrainJob\n", "not YAML"),
        (MANIFEST.replace("spec:\n", "spec: 3\nx:\n"), "spec: a TrainJob has a spec"),
        (MANIFEST.replace("name: finetune", "name: 2026-01-01"), "values JSON has none of"),
        (
            "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: x\nspec: {}\n",
            "metadata: expected a mapping",
        ),
    ],
)
def test_a_manifest_that_is_not_one_trainjob_is_refused_saying_why(text: str, named: str) -> None:
    with pytest.raises(InvalidError) as err:
        parse_manifest(text, "m.yaml")
    assert named in err.value.message


@pytest.mark.parametrize(
    "options, named",
    [
        ("--rule=sunspots:resubmit:1", "--rule: cause 'sunspots'"),
        ("--retries=3", "unknown dispatch option"),
        ("'--rule=preempted:resubmit:1", "No closing quotation"),
    ],
)
def test_a_bad_annotation_is_refused_naming_the_annotation(options: str, named: str) -> None:
    said = "dispatch.dev/options: --rule=preempted,node-lost:resubmit:3 --key=ft-1"
    text = MANIFEST.replace(said, f"dispatch.dev/options: {json.dumps(options)}")
    body = parse_manifest(text, "m.yaml")
    with pytest.raises(InvalidError) as err:
        manifest_options(body, "m.yaml")
    assert "manifest m.yaml, annotation dispatch.dev/options" in err.value.message
    assert named in err.value.message


def test_the_command_refuses_bad_input_in_one_line_with_exit_2_and_records_nothing(
    tmp_path: Path,
) -> None:
    (tmp_path / "two.yaml").write_text(MANIFEST + "---\n" + MANIFEST)
    (tmp_path / "bad.yaml").write_text(MANIFEST.replace("numNodes: 2", "numNodes: [2"))
    for words, named in [
        ((), "give the TrainJob manifest to submit"),
        (("missing.yaml",), "manifest missing.yaml: no such file"),
        ((str(tmp_path),), "is a folder"),
        ((str(tmp_path / "two.yaml"),), "holds 2 documents"),
        (("--bogus", "x.yaml"), "--bogus: not an option of dispatch trainjob"),
        (("a.yaml", "b.yaml"), "b.yaml: one manifest per submission"),
        ((str(tmp_path / "bad.yaml"),), "(line 11): not YAML: expected ',' or ']'"),
    ]:
        code, out, err = run(tmp_path, *words)
        assert (code, out) == (2, ""), (words, err)
        assert err.startswith("error: ") and named in err, (words, err)
        assert err.count("\n") == 1
    assert not (tmp_path / "ledger").exists()


def test_the_manifest_may_come_on_stdin_and_a_bad_one_there_is_named_stdin(
    tmp_path: Path,
) -> None:
    code, _, err = run(tmp_path, "-", stdin=MANIFEST.replace("kind: TrainJob", "kind: Pod"))
    assert code == 2 and "manifest stdin: kind 'Pod'" in err


def test_a_config_of_another_adapter_is_refused_naming_its_backend(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        f'ledger = "{tmp_path / "ledger"}"\n[backend]\nname = "slurm"\n'
    )
    (tmp_path / "m.yaml").write_text(MANIFEST)
    code, _, err = run(tmp_path, str(tmp_path / "m.yaml"))
    assert code == 2
    assert (
        "backend.name is 'slurm'; dispatch trainjob creates TrainJobs through the kubeflow" in err
    )
    assert not (tmp_path / "ledger").exists()


def test_help_shows_the_options_the_annotation_and_an_example(tmp_path: Path) -> None:
    code, out, _ = run(tmp_path, "--help")
    assert code == 0
    for needed in (
        "--rule=CAUSES:ACTION:BUDGET",
        "dispatch.dev/options",
        "--plan",
        "trainjob finetune.yaml",
    ):
        assert needed in out


@pytest.mark.parametrize("peer", ["down", "silent"])
def test_an_api_server_down_or_silent_is_said_in_one_line_and_nothing_is_recorded(
    tmp_path: Path, peer: str
) -> None:
    """No API server listens (down), or one accepts and never answers (silent): the command
    ends within the config's timeout, saying the server is unreachable, exit 1."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    held: list[socket.socket] = []
    stop = threading.Event()

    def hold() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    holder = threading.Thread(target=hold, daemon=True)
    if peer == "down":
        listener.close()
    else:
        listener.listen(8)
        holder.start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": f"https://127.0.0.1:{port}",
                            "insecure-skip-tls-verify": True,
                        },
                    }
                ],
                "users": [{"name": "u", "user": {"token": "not-a-real-token"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    (tmp_path / "config.toml").write_text(
        f'ledger = "{tmp_path / "ledger"}"\n[backend]\nname = "kubeflow"\n'
        f'[backend.settings]\nkubeconfig = "{kubeconfig}"\nnamespace = "ada"\n'
        'queue = "main"\ntimeout = 1\n'
    )
    (tmp_path / "m.yaml").write_text(MANIFEST)
    try:
        # A process of its own, so that a hang fails the test instead of holding the suite.
        done = subprocess.run(
            [str(Path(sys.executable).parent / "dispatch"), "trainjob"]
            + ["--config", str(tmp_path / "config.toml"), str(tmp_path / "m.yaml")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        code, out, err = done.returncode, done.stdout, done.stderr
    finally:
        stop.set()
        if holder.is_alive():
            holder.join(10)
        listener.close()
        for conn in held:
            conn.close()
    assert (code, out) == (1, ""), err
    assert err.startswith("error: dispatch: unreachable: who am I (SelfSubjectReview)"), err
    assert err.count("\n") == 1
    assert not list(tmp_path.glob("ledger/**/*.json*"))
