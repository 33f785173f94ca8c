"""dispatch sbatch from the shell: submit, plan only, bad input refused with nothing recorded.

The scheduler is the memory adapter (registered by ``Site``) and the ledger a real file ledger;
the live tests in tests/e2e run the same command against the local Slurm cluster.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from cli_setup import Site

from dispatch.adapters.memory import MemoryBackend
from dispatch.cli.sbatch import OUTPUT_LINE
from dispatch.model.errors import RejectedError
from dispatch.model.objects import StartRequest

SCRIPT = """#!/bin/bash
#SBATCH --nodes=2
#DISPATCH --rule=preempted,node-lost:resubmit:3
torchrun train.py "$@"
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Site:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.sbatch").write_text(SCRIPT)
    return Site(tmp_path)


def sbatch(site: Site, *words: str, stdin: str | None = None) -> tuple[int, str, str]:
    from click.testing import CliRunner

    from dispatch.cli.main import main

    result = CliRunner().invoke(
        main, ["sbatch", "--config", str(site.config), *words], input=stdin, catch_exceptions=False
    )
    return result.exit_code, result.stdout, result.stderr


def recorded(site: Site) -> list[str]:
    return site.store.jobs(include_settled=True)


def test_a_script_is_planned_recorded_and_launched(site: Site) -> None:
    code, out, err = sbatch(site, "train.sbatch", "--epochs", "3")
    assert code == 0, err
    [job] = recorded(site)
    assert out.splitlines() == [
        "rule 0: on preempted, node-lost: resubmit, at most 3 times: enforced by the supervisor",
        "not covered: out-of-memory, time-limit, non-zero-exit, launch-failed, no-capacity, "
        "requeued, unknown (the job fails on these)",
        f"Submitted dispatch job {job} (train.sbatch): scheduler object "
        f"{site.cluster.observer.get(job).submissions[0].canonical} (submission 1)",
    ]
    st = site.cluster.observer.get(job)
    assert str(st.state) == "running"
    script = site.store.read(job).header.spec.script
    assert script is not None and script.args == ("--epochs", "3")
    assert script.directory == str(site.tmp) and script.text == SCRIPT
    assert site.store.read(job).header.creator.kind == "human"


def test_parsable_prints_the_job_id_alone_and_json_prints_the_ids_and_plan(site: Site) -> None:
    code, out, _ = sbatch(site, "--parsable", "train.sbatch")
    assert code == 0 and out.strip() in recorded(site)
    code, out, _ = sbatch(site, "--json", "train.sbatch")
    got = json.loads(out)
    assert code == 0 and got["job"] in recorded(site)
    # The state as the launch last looked, before it lifted the gate: queued, not yet running.
    assert (got["state"], got["submission"], got["name"]) == ("pending", 1, "train.sbatch")
    assert got["plan"]["rules"][0]["enforcer"] == "supervisor"


def test_plan_prints_the_plan_and_creates_nothing(site: Site) -> None:
    code, out, _ = sbatch(site, "--plan", "train.sbatch")
    assert code == 0
    assert out.splitlines()[-1] == "nothing was created (--plan)"
    assert recorded(site) == [] and not site.backend.objects
    # The script does not choose how its output file is opened: dispatch does, and says so.
    assert OUTPUT_LINE in out.splitlines()
    Path("kept.sbatch").write_text(
        SCRIPT.replace("#DISPATCH", "#SBATCH --open-mode=truncate\n#DISPATCH")
    )
    code, out, err = sbatch(site, "--plan", "kept.sbatch")
    assert code == 0 and OUTPUT_LINE not in out.splitlines()
    # ... and is told what a requeued run then loses.
    assert "--open-mode=truncate: each run writes over the output file" in err, err


class CheckingBackend(MemoryBackend):
    """The memory scheduler with a stand-in for Slurm's dry run (``sbatch --test-only``): it
    refuses with ``refusal`` when given one, and notes the thread each check was asked from."""

    def __init__(self, refusal: str = "") -> None:
        super().__init__(auto_run=True)
        self.refusal = refusal
        self.asked_from: list[threading.Thread] = []

    def check(self, req: StartRequest, *, reuse: bool = False) -> str:
        self.asked_from.append(threading.current_thread())
        if self.refusal:
            raise RejectedError(self.refusal)
        return f"job {req.spec.name} would start now"


def test_slurms_check_waits_beside_the_command_and_its_refusal_records_nothing(
    site: Site,
) -> None:
    # The command makes the record's schemas ready while the scheduler checks the request.
    site.backend = checking = CheckingBackend()
    code, out, err = sbatch(site, "--parsable", "train.sbatch")
    assert code == 0, err
    assert recorded(site) == [out.strip()]
    [thread] = checking.asked_from
    assert thread is not threading.main_thread()
    code, out, _ = sbatch(site, "--plan", "train.sbatch")
    assert code == 0 and "Slurm would take it: job train.sbatch would start now" in out
    site.backend = CheckingBackend("Requested node configuration is not available")
    code, _, err = sbatch(site, "--parsable", "train.sbatch")
    assert code == 2
    assert err == (
        "error: dispatch: invalid: Slurm refuses the job as it stands: Requested node "
        "configuration is not available; nothing was recorded\n"
    )
    assert len(recorded(site)) == 1


def test_the_script_may_come_on_stdin_as_with_sbatch(site: Site) -> None:
    code, out, err = sbatch(site, "--parsable", stdin="#!/bin/sh\necho hi\n")
    assert code == 0, err
    assert site.cluster.observer.get(out.strip()).name == "sbatch"


def test_the_same_key_gives_back_the_first_job(site: Site) -> None:
    first = sbatch(site, "--parsable", "--key=run-7", "train.sbatch")[1]
    again = sbatch(site, "--parsable", "--key=run-7", "train.sbatch")[1]
    assert first == again and len(recorded(site)) == 1


def test_a_rule_nobody_enforces_is_refused_with_the_flag_that_accepts_it(site: Site) -> None:
    code, _, err = sbatch(site, "--unsupervised", "train.sbatch")
    assert code == 2
    assert err.count("\n") == 1 and "--accept-unenforced" in err
    assert recorded(site) == []
    assert sbatch(site, "--unsupervised", "--accept-unenforced", "train.sbatch")[0] == 0


BAD = [
    ("#DISPATCH --retries=3", (), "train.sbatch line 4: --retries=3: unknown dispatch option"),
    ("#DISPATCH --rule=preemted:resubmit:3", (), "line 4: --rule: cause 'preemted' is not one"),
    ("#DISPATCH --rule=preempted:resubmit:lots", (), "line 4: --rule: the budget 'lots' is not"),
    ("#DISPATCH --rule=preempted:resubmit:0", (), "line 4: --rule: the budget 0 in "),
    ("", ("--plan", "--rule=node-lost:hold:0:1h", "train.sbatch"), "would never fire: write 1"),
    ("", ("missing.sbatch",), "script missing.sbatch: no such file in"),
    ("", ("--array=0-9%0", "train.sbatch"), "--array=0-9%0: %0 would let no task run"),
    ("", ("-a", "9-0", "train.sbatch"), "--array=9-0: 9-0 ends before it starts"),
    ("#SBATCH --array=0-9%0", (), "train.sbatch line 4: --array=0-9%0: %0 would let no task"),
    ("", ("--requeue", "train.sbatch"), "--requeue: recovery is dispatch's"),
    ("", ("--rule", "preempted", "train.sbatch"), "the command line: --rule: 'preempted' is not"),
]


@pytest.mark.parametrize(("line", "words", "why"), BAD)
def test_bad_input_is_one_line_exit_2_and_nothing_recorded(
    site: Site, line: str, words: tuple[str, ...], why: str
) -> None:
    text = SCRIPT.replace("torchrun", f"{line}\ntorchrun") if line else SCRIPT
    (site.tmp / "train.sbatch").write_text(text)
    code, out, err = sbatch(site, *(words or ("train.sbatch",)))
    assert code == 2
    assert out == "" and err.count("\n") == 1 and why in err, err
    assert err.startswith("error: dispatch: invalid: ")
    assert recorded(site) == [] and not site.backend.objects


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"echo no shebang\n", "train.sbatch is not a batch script: its first line must start"),
        (b"#!/bin/bash\necho \xff\n", "script train.sbatch is not UTF-8 text"),
        (b"#!/bin/bash\r\necho dos\r\n", "DOS line breaks"),
    ],
)
def test_a_file_that_is_not_a_batch_script_is_refused(site: Site, content: bytes, why: str) -> None:
    (site.tmp / "train.sbatch").write_bytes(content)
    code, _, err = sbatch(site, "train.sbatch")
    assert code == 2 and err.count("\n") == 1 and why in err, err
    assert recorded(site) == []


def test_a_folder_is_not_a_script(site: Site) -> None:
    (site.tmp / "runs").mkdir()
    code, _, err = sbatch(site, "runs")
    assert code == 2 and "script runs is a folder" in err and recorded(site) == []


def test_an_unknown_option_before_a_missing_script_hints_at_its_value(site: Site) -> None:
    code, _, err = sbatch(site, "--container-image", "nvcr.io/pytorch", "train.sbatch")
    assert code == 2
    assert "write --container-image=nvcr.io/pytorch" in err


def test_help_shows_the_dispatch_options_and_an_example(site: Site) -> None:
    code, out, _ = sbatch(site, "--help")
    assert code == 0
    assert "--rule=CAUSES:ACTION:BUDGET[:HOLD_FOR]" in out and "#DISPATCH --rule=" in out


def test_a_non_utf8_environment_value_is_refused_in_one_line_and_no_partial_job_is_left(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A value of bytes that are not UTF-8 crashed with a serialization traceback and left a
    job folder without a header (the next ``list`` reported it damaged)."""
    monkeypatch.setenv("LATIN1", "caf\udce9")  # the bytes b"caf\xe9", as Python reads them
    code, out, err = sbatch(site, "train.sbatch")
    assert (code, out) == (2, "")
    assert err.startswith("error: dispatch: invalid: environment variable b'LATIN1' holds bytes")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert recorded(site) == [] and not list((site.ledger / "jobs").iterdir())
    # Left out by --export, it is no obstacle.
    code, _, err = sbatch(site, "--export=NONE,PATH", "train.sbatch")
    assert code == 0, err
    assert len(recorded(site)) == 1


def test_control_characters_in_a_name_are_escaped_on_the_submitted_line(site: Site) -> None:
    """ESC and bidirectional marks in a job's name reached the terminal raw through the
    ``Submitted ...`` line; they are shown escaped, as ``status`` shows them."""
    code, out, err = sbatch(site, "--job-name=a\x1b[2Jb\u202ec\x01", "train.sbatch")
    assert code == 0, err
    assert "(a\\x1b[2Jb\\u202ec\\x01)" in out.splitlines()[-1]
    assert "\x1b" not in out + err and "\u202e" not in out + err and "\x01" not in out + err


def test_without_user_or_a_passwd_entry_the_submitter_is_named_by_uid(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A container's bare uid has no ``USER`` and no passwd entry: ``getpwuid`` raised
    ``KeyError`` as a traceback. (The missing entry is stood in by making ``pwd.getpwuid``
    raise, as it does for such a uid.)"""
    import os
    import pwd

    def no_entry(uid: int) -> pwd.struct_passwd:
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    for name in ("USER", "LOGNAME", "LNAME", "USERNAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    code, _, err = sbatch(site, "train.sbatch")
    assert code == 0, err
    [job] = recorded(site)
    assert site.store.read(job).header.creator.id == f"uid{os.getuid()}"


@pytest.mark.parametrize(
    "words",
    [
        ["--rule=out-of-memory:hold:1:99999999999999999999d"],
        ["--cleanup-deadline=" + "9" * 5000 + "s"],
        ["--unresolved-age=366d"],
    ],
    ids=["hold-for", "5000-digits", "past-a-year"],
)
def test_a_huge_duration_in_a_flag_or_directive_is_one_line_not_an_overflow(
    site: Site, words: list[str]
) -> None:
    """Huge durations raised ``OverflowError`` as a traceback; they are refused in one line
    naming the limit, on the command line and in a ``#DISPATCH`` line alike."""
    (site.tmp / "big.sbatch").write_text(f"#!/bin/bash\n#DISPATCH {words[0]}\ntrue\n")
    for argv in ([*words, "train.sbatch"], ["big.sbatch"]):
        code, out, err = sbatch(site, *argv)
        assert (code, out) == (2, ""), err
        assert "is longer than the most allowed, 365d" in err and err.count("\n") == 1
        assert len(err) < 300 and recorded(site) == []


def test_a_fifo_as_the_script_is_refused_in_one_line_not_waited_on(site: Site) -> None:
    """A FIFO named as the script blocked ``dispatch sbatch`` until someone wrote to it."""
    import os
    import threading

    os.mkfifo(site.tmp / "pipe.sbatch")
    said: list[tuple[int, str, str]] = []
    worker = threading.Thread(target=lambda: said.append(sbatch(site, "pipe.sbatch")), daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "dispatch sbatch waited on the FIFO"
    ((code, out, err),) = said
    assert (code, out) == (2, "") and "is not a regular file" in err and err.count("\n") == 1
    assert recorded(site) == []
