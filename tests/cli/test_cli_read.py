"""``dispatch status``, ``list``, ``escalations`` and ``logs``: tables for people, ``--json`` for
scripts, the record enough to answer when the scheduler is not, and never a ledger created."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from cli_setup import ADA, Site
from local_webhook import Hook

import dispatch
from dispatch.model.errors import UnreachableError

ME = {"USER": "ada"}

STATUS_KEYS = {
    "job",
    "name",
    "state",
    "cause",
    "created_at",
    "created_by",
    "age_seconds",
    "supervised",
    "supersedes",
    "superseded_by",
    "after",
    "array",
    "settled",
    "cleanup",
    "submissions",
    "rules",
    "uncovered",
    "holds",
    "escalations",
    "waiting",
    "history",
    "actions",
    "cessation",
    "stale",
    "scheduler",
    "unfenced",
}
LIST_KEYS = {
    "job",
    "name",
    "state",
    "cause",
    "submissions",
    "created_at",
    "created_by",
    "age_seconds",
    "settled",
    "waiting",
}


def sweeps(site: Site, n: int = 6) -> None:
    for _ in range(n):
        assert site.sweep().exit_code == 0


def read(site: Site, *args: str) -> tuple[int, str, str]:
    result = site.run([*args, "--config", str(site.config)], env=ME)
    return result.exit_code, result.stdout, result.stderr


def preempted_then_recovered(site: Site) -> str:
    rule = dispatch.Rule(on=["preempted"], action="resubmit", budget=2)
    spec = site.spec.model_copy(update={"recovery": dispatch.RecoveryPolicy(rules=(rule,))})
    job = site.cluster.operator.submit(spec, ADA, supervised=True).job
    sweeps(site)
    env = site.backend.env()
    first = site.cluster.observer.get(job).submissions[0].canonical
    assert first is not None
    env.preempt(first)
    sweeps(site)
    second = site.cluster.observer.get(job).submissions[1].canonical
    assert second is not None
    env.complete(second)
    sweeps(site)
    return job


def test_status_tells_the_whole_story_of_a_preempted_then_recovered_job(tmp_path: Path) -> None:
    site = Site(tmp_path)
    job = preempted_then_recovered(site)
    code, out, err = read(site, "status", job)
    assert code == 0, err
    rows = [line.split(None, 1) for line in out.splitlines()]
    fields = {k: v for k, v in (r for r in rows if len(r) == 2)}
    assert fields["state"] == "succeeded" and fields["settled"] == "yes"
    first, second = site.cluster.observer.get(job).submissions
    assert f"object {first.canonical} (first, authorized " in out
    assert f"object {second.canonical} (rule 0, authorized " in out
    assert "ended; preempted (preempted by a higher-priority job); started 20" in out
    assert "nodes n1" in out
    assert "on preempted: resubmit, fired 1 of 2, 1 left (enforced by the supervisor)" in out
    history = [v for k, v in rows if k == "history"]
    assert len(history) == 2
    assert "pending -> recovering (submission 2, preempted" in history[0]
    assert "recovering -> succeeded (submission 2) by supervisor:" in history[1]

    data = json.loads(read(site, "status", job, "--json")[1])
    assert set(data) == STATUS_KEYS
    assert first.canonical is not None and second.canonical is not None
    assert [s["object"] for s in data["submissions"]] == [first.canonical.id, second.canonical.id]
    execution = data["submissions"][0]["executions"][0]
    assert execution["cause"]["kind"] == "preempted" and execution["nodes"] == ["n1"]
    assert execution["started"] and execution["ended"]
    assert data["rules"][0]["firings"] == 1 and data["rules"][0]["left"] == 1
    assert data["scheduler"]["reachable"] is True


def test_status_json_history_names_from_not_the_python_field_from_(tmp_path: Path) -> None:
    site = Site(tmp_path)
    job = preempted_then_recovered(site)
    data = json.loads(read(site, "status", job, "--json")[1])
    assert [(e["from"], e["to"]) for e in data["history"]] == [
        ("pending", "recovering"),
        ("recovering", "succeeded"),
    ]
    assert all("from_" not in e for e in data["history"])
    assert all(e["by"].startswith("supervisor:") for e in data["history"])


def test_status_history_and_actions_name_each_actor(tmp_path: Path) -> None:
    site = Site(tmp_path)
    (job,) = site.submit()
    sweeps(site)
    assert site.run(["hold", job, "--config", str(site.config)], env=ME).exit_code == 0
    bob = {"USER": "bob"}
    args = ["release", job, "--override", "--config", str(site.config)]
    assert site.run(args, env=bob).exit_code == 0
    data = json.loads(read(site, "status", job, "--json")[1])
    assert [(e["to"], e["by"]) for e in data["history"]][-2:] == [
        ("held", "human:ada"),
        ("pending", "human:bob"),
    ]
    assert [(a["action"], a["by"]) for a in data["actions"]] == [
        ("hold", "human:ada"),
        ("release", "human:bob"),
    ]
    assert data["holds"][0]["override"] is True


def test_status_and_list_answer_from_the_record_when_the_controller_is_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = Site(tmp_path)
    job = preempted_then_recovered(site)

    def down(*args: object, **kw: object) -> None:
        raise UnreachableError("squeue: Unable to contact slurm controller (connect failure)")

    monkeypatch.setattr(site.backend, "find", down)
    monkeypatch.setattr(site.backend, "find_many", down)
    code, out, err = read(site, "status", job)
    assert code == 0, err
    assert "state           succeeded" in out
    assert "scheduler now   unreachable (squeue: Unable to contact slurm controller" in out
    data = json.loads(read(site, "status", job, "--json")[1])
    assert data["scheduler"]["reachable"] is False and data["state"] == "succeeded"
    code, out, err = read(site, "list", "--all")
    assert code == 0
    assert out.splitlines()[1].split()[:3] == [job, "finetune", "succeeded"]
    assert err.startswith("note: the scheduler is unreachable")


def test_list_shows_a_table_and_filters_by_state_escalation_and_user(tmp_path: Path) -> None:
    site = Site(tmp_path)
    done, live = site.submit(2)
    site.cluster.operator.cancel(done, ADA, "not needed")
    sweeps(site)
    code, out, _ = read(site, "list")
    table = out.splitlines()
    assert table[0].split() == ["JOB", "NAME", "STATE", "CAUSE", "SUBMISSIONS", "AGE", "WAITING"]
    assert [row.split()[0] for row in table[1:]] == [live]
    everything = json.loads(read(site, "list", "--all", "--json")[1])
    assert all(set(row) == LIST_KEYS for row in everything)
    assert {s["job"]: s["state"] for s in everything} == {done: "cancelled", live: "running"}
    only = json.loads(read(site, "list", "--all", "--state", "cancelled", "--json")[1])
    assert [s["job"] for s in only] == [done]
    assert json.loads(read(site, "list", "--all", "--user", "bob", "--json")[1]) == []
    assert len(json.loads(read(site, "list", "--all", "--user", "ada", "--json")[1])) == 2
    assert json.loads(read(site, "list", "--escalated", "--json")[1]) == []
    site.backend.env().inject_foreign(live)
    sweeps(site, 2)
    (row,) = json.loads(read(site, "list", "--escalated", "--json")[1])
    assert row["job"] == live and row["waiting"][0].startswith("foreign:")
    assert read(site, "list", "--state", "bogus")[0] == 2


def test_one_damaged_record_does_not_make_list_fail_entirely(tmp_path: Path) -> None:
    site = Site(tmp_path)
    good, bad = site.submit(2)
    sweeps(site, 2)
    damaged = site.ledger / "jobs" / bad / "r0000000002.json"
    damaged.write_text("{not json")
    code, out, err = read(site, "list")
    assert code == 1
    assert [row.split()[0] for row in out.splitlines()[1:]] == [good]
    (line,) = err.splitlines()
    assert line.startswith("error: damaged record: ") and str(site.ledger / "jobs" / bad) in line
    code, out, err = read(site, "status", bad)
    assert (code, out) == (1, "")
    assert err.startswith("error: damaged record: ") and str(damaged) in err


def test_terminal_escape_sequences_in_job_names_never_reach_the_terminal(tmp_path: Path) -> None:
    site = Site(tmp_path)
    evil = "\x1b]0;owned\x07\x1b[2J\x9bfinetune"
    spec = site.spec.model_copy(update={"name": evil})
    job = site.cluster.operator.submit(spec, ADA, supervised=True).job
    sweeps(site)
    config = ["--config", str(site.config)]
    assert site.run(["hold", job, "--reason", "\x1b[31mred\nline", *config], env=ME).exit_code == 0
    hostile_actor = ["--as", "human:\x1b[5m", *config]
    assert site.run(["release", job, "--override", *hostile_actor], env=ME).exit_code == 0
    assert site.run(["hold", job, *hostile_actor], env=ME).exit_code == 0
    overriding = site.run(["release", job, "--override", *config], env=ME).stdout
    assert site.run(["cancel", job, *hostile_actor], env=ME).exit_code == 0
    outputs = [
        overriding,
        read(site, "status", job)[1],
        read(site, "list", "--all")[1],
        read(site, "escalations", job)[1],
        read(site, "status", "\x1b[2Jnope")[2],
    ]
    for text in outputs:
        assert not any(ord(c) < 32 and c != "\n" or 0x7F <= ord(c) <= 0x9F for c in text), text
    assert "(overriding human:\\x1b[5m)" in outputs[0]
    assert "\\x1b]0;owned\\x07\\x1b[2J\\x9bfinetune" in outputs[1]
    assert "\\x1b[31mred\\x0aline" in outputs[1]
    # JSON stays exact: it is for programs, and escapes control characters by itself.
    assert json.loads(read(site, "status", job, "--json")[1])["name"] == evil


def test_escalations_lists_each_with_its_delivery_and_answer(tmp_path: Path) -> None:
    site = Site(tmp_path)
    (job,) = site.submit()
    sweeps(site)
    foreign = site.backend.env().inject_foreign(job)
    sweeps(site, 2)
    rows = read(site, "escalations", job)[1].splitlines()
    assert rows[0].split() == ["ID", "AT", "DELIVERY", "DETAIL", "ANSWER"]
    assert rows[1].startswith(f"foreign:{foreign.id} ")
    # No channel is configured: the sweep only wrote it to its log, and says so.
    assert "logged only (no delivery configured)" in rows[1]
    assert rows[1].endswith(f"dispatch abandon {job} foreign:{foreign.id}")
    (e,) = json.loads(read(site, "escalations", job, "--json")[1])
    assert e["id"] == f"foreign:{foreign.id}" and e["detail"]
    assert e["delivered"] is None and e["logged"] is not None
    status = read(site, "status", job)[1]
    assert f"foreign:{foreign.id}" in status and "logged only (no delivery configured)" in status
    assert "delivered" not in status
    # The answer runs as printed (the config from the environment), and then nothing waits.
    printed = rows[1][rows[1].index("dispatch abandon ") :]
    done = site.run(printed.split()[1:], env={**ME, "DISPATCH_CONFIG": str(site.config)})
    assert done.exit_code == 0, done.output
    assert read(site, "escalations", job)[1].splitlines()[1].endswith(" -")


@pytest.mark.parametrize("answer", [200, 503])
def test_status_says_which_channel_delivered_an_escalation_or_why_it_failed(
    tmp_path: Path, answer: int
) -> None:
    with Hook() as hook:
        hook.status = answer
        site = Site(tmp_path, extra=f'[deliver]\nwebhook = "{hook.url}"\n')
        (job,) = site.submit()
        sweeps(site)
        foreign = site.backend.env().inject_foreign(job)
        sweeps(site, 2)
    via = f"webhook http://127.0.0.1:{hook.server.server_address[1]}"
    (row,) = read(site, "escalations", job)[1].splitlines()[1:]
    status = read(site, "status", job)[1]
    assert [str(b["text"]).split(" at ")[0] for b in hook.bodies][:1] == [
        f"dispatch job {job}: escalation foreign:{foreign.id}"
    ]
    if answer == 200:
        assert f"({via})" in row and f"({via})" in status and len(hook.bodies) == 1
        # The command the message names runs as printed (the config from the environment).
        command = str(hook.bodies[0]["text"]).rsplit(": ", 1)[1]
        assert command == f"dispatch escalations {job}"
        shown = site.run(command.split()[1:], env={**ME, "DISPATCH_CONFIG": str(site.config)})
        assert shown.exit_code == 0 and shown.stdout.splitlines()[1] == row
    else:
        said = f"delivery failed ... {via} answered HTTP 503; offered again at each sweep"
        for text in (row, status):
            assert all(part in text for part in said.split(" ... ")), text
        assert len(hook.bodies) == 2


def test_jobs_are_named_by_a_unique_id_prefix_or_by_name(tmp_path: Path) -> None:
    site = Site(tmp_path)
    (job,) = site.submit()
    for ref in (job, job[:5], "finetune"):
        code, out, _ = read(site, "status", ref, "--json")
        assert code == 0 and json.loads(out)["job"] == job
    site.submit()
    code, _, err = read(site, "status", "finetune")
    assert code == 2 and err.startswith("error: dispatch: invalid: job 'finetune' is ambiguous")


def test_reading_a_job_without_a_record_exits_1_naming_it(tmp_path: Path) -> None:
    site = Site(tmp_path)
    site.submit()
    for command in ("status", "escalations", "logs"):
        code, _, err = read(site, command, "nosuchjob")
        assert code == 1
        assert err == (
            "error: dispatch: not found: no job 'nosuchjob': no id starts with it and no job "
            "is named so\n"
        )


def test_read_commands_never_create_a_ledger(tmp_path: Path) -> None:
    (tmp_path / "site").mkdir()
    site = Site(tmp_path / "site")
    missing = tmp_path / "mistyped"
    site.config.write_text(site.config.read_text().replace(str(site.ledger), str(missing)))
    for args in (["list"], ["status", "x"], ["escalations", "x"], ["logs", "x"], ["hold", "x"]):
        code, out, err = read(site, *args)
        assert code == 2 and out == ""
        assert err.startswith(f"error: dispatch: invalid: ledger {missing} ")
        assert "no such folder" in err
        assert not missing.exists()


def test_logs_prints_what_a_submission_wrote(tmp_path: Path) -> None:
    site = Site(tmp_path)
    (job,) = site.submit()
    code, _, err = read(site, "logs", job)
    assert code == 1 and "has no submission yet" in err
    sweeps(site)
    ref = site.cluster.observer.get(job).submissions[0].canonical
    assert ref is not None
    env = site.backend.env()
    env.write(ref, "epoch 1\n")
    env.write(ref, "oops\n", "stderr")
    assert read(site, "logs", job) == (0, "epoch 1\n", "")
    assert read(site, "logs", job, "--stderr")[1] == "oops\n"
    env.write(ref, "epoch 2\n")
    env.complete(ref)
    assert read(site, "logs", job, "--submission", "1", "--follow")[1] == "epoch 1\nepoch 2\n"
    code, _, err = read(site, "logs", job, "--submission", "2")
    assert code == 1 and "no object of job" in err


def test_logs_follow_prints_output_as_it_comes_until_the_execution_ends(tmp_path: Path) -> None:
    site = Site(tmp_path)
    (job,) = site.submit()
    sweeps(site)
    ref = site.cluster.observer.get(job).submissions[0].canonical
    assert ref is not None
    env = site.backend.env()
    env.write(ref, "step 1\n")
    got: list[tuple[int, str, str]] = []
    follower = threading.Thread(target=lambda: got.append(read(site, "logs", job, "-f")))
    follower.start()
    time.sleep(1.5)
    assert follower.is_alive()  # still following: the execution runs
    env.write(ref, "step 2\n")
    env.complete(ref)
    follower.join(30)
    assert got == [(0, "step 1\nstep 2\n", "")]


def test_status_history_lists_every_recovery_with_its_actor(tmp_path: Path) -> None:
    site = Site(tmp_path)
    rule = dispatch.Rule(on=["preempted"], action="resubmit", budget=2)
    spec = site.spec.model_copy(update={"recovery": dispatch.RecoveryPolicy(rules=(rule,))})
    job = site.cluster.operator.submit(spec, ADA, supervised=True).job
    sweeps(site)
    env = site.backend.env()
    for n in (0, 1):
        ref = site.cluster.observer.get(job).submissions[n].canonical
        assert ref is not None
        env.preempt(ref)
        sweeps(site)
    last = site.cluster.observer.get(job).submissions[2].canonical
    assert last is not None
    env.complete(last)
    sweeps(site)
    code, out, err = read(site, "status", job)
    assert code == 0, err
    history = [
        v for k, v in (ln.split(None, 1) for ln in out.splitlines() if ln.strip()) if k == "history"
    ]
    assert len(history) == 3, out
    assert "pending -> recovering (submission 2, preempted" in history[0]
    assert "recovering -> recovering (submission 3, preempted" in history[1]
    assert "recovering -> succeeded (submission 3) by supervisor:" in history[2]
    assert all(" by supervisor:" in h for h in history), history
    data = json.loads(read(site, "status", job, "--json")[1])
    assert [(h["from"], h["to"], h["submission"]) for h in data["history"]] == [
        ("pending", "recovering", 2),
        ("recovering", "recovering", 3),
        ("recovering", "succeeded", 3),
    ]
    assert all(h["by"].startswith("supervisor:") for h in data["history"]), data["history"]


def test_list_names_a_record_it_cannot_open_and_lists_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record that cannot be opened (permission denied) made ``list`` print nothing but one
    error. The refusal is stood in by making the file ledger's read raise ``PermissionError``
    for that job, as opening a file of mode 000 does for a user other than root."""
    from dispatch.records.file import FileRecords

    site = Site(tmp_path)
    good, bad = site.submit(2)
    sweeps(site, 2)
    read_record = FileRecords.read

    def denied(store: FileRecords, job: str) -> object:
        if job == bad:
            raise PermissionError(13, "Permission denied")
        return read_record(store, job)

    monkeypatch.setattr(FileRecords, "read", denied)
    code, out, err = read(site, "list")
    assert code == 1
    assert [row.split()[0] for row in out.splitlines()[1:]] == [good]
    assert err == f"error: unreadable record: {site.ledger}/jobs/{bad}: Permission denied\n"
