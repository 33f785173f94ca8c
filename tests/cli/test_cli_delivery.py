"""An escalation reaches a person: offered at each sweep until a channel acknowledged it,
whether or not its job settled, and called delivered only then.

Every channel here is a real peer: ``webhook_server.py`` as a process of its own (answering
well, not at all, with a redirect, byte by byte, or not in HTTP), and delivery commands that
are real programs. Each test drives ``dispatch sweep`` and reads ``dispatch status`` as a
user would, on the memory scheduler.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from cli_setup import Site
from local_webhook import Peer

ME = {"USER": "ada"}


def failed_jobs(site: Site, n: int = 1) -> list[str]:
    """``n`` jobs that ran and failed (exit 3, which no rule covers): each settles holding
    ``failed:non-zero-exit``."""
    jobs = site.submit(n)
    assert site.sweep().exit_code == 0
    for job in jobs:
        [obj] = site.backend.env().objects(job)
        site.backend.env().fail(obj, exit_code=3)
    return jobs


def status(site: Site, job: str) -> str:
    result = site.run(["status", "--config", str(site.config), job], env=ME)
    assert result.exit_code == 0, result.output
    return result.stdout


def escalation(site: Site, job: str, eid: str = "failed:non-zero-exit") -> dict[str, object]:
    result = site.run(["status", "--json", "--config", str(site.config), job], env=ME)
    [found] = [e for e in json.loads(result.stdout)["escalations"] if e["id"] == eid]
    assert isinstance(found, dict)
    return found


def posts(peer: Peer) -> list[dict[str, object]]:
    return [r for r in peer.requests() if r["method"] == "POST"]


def webhook_site(tmp_path: Path, url: str, timeout: str = "10s") -> Site:
    return Site(tmp_path, extra=f'[deliver]\nwebhook = "{url}"\ntimeout = "{timeout}"\n')


def test_a_failed_job_s_escalation_is_offered_at_each_sweep_until_the_webhook_takes_it(
    tmp_path: Path,
) -> None:
    down = tmp_path / "hook-down"
    down.touch()
    with Peer(tmp_path, "--down", str(down)) as peer:
        site = webhook_site(tmp_path, peer.url)
        (job,) = failed_jobs(site)
        assert site.sweep().exit_code == 0
        assert site.cluster.observer.get(job).settled
        marker = site.ledger / "outbox" / job
        assert marker.exists(), "the settled job is in the outbox"
        for n in range(3):
            seen = len(posts(peer))
            assert site.sweep().exit_code == 0
            assert len(posts(peer)) == seen + 1, f"sweep {n}: offered once more, as status says"
            said = status(site, job)
            assert f"{peer.via} answered HTTP 503; offered again at each sweep" in said
            assert escalation(site, job)["delivered"] is None
        down.unlink()
        assert site.sweep().exit_code == 0
        e = escalation(site, job)
        assert e["delivered"] is not None and str(e["delivery"]).endswith(f"({peer.via})")
        assert "delivered " in status(site, job) and not marker.exists()
        taken = len(posts(peer))
        assert site.sweep().exit_code == 0
        assert len(posts(peer)) == taken, "a delivered escalation is never offered again"


def test_what_was_only_logged_reaches_a_channel_configured_after_the_job_settled(
    tmp_path: Path,
) -> None:
    site = Site(tmp_path)
    (job,) = failed_jobs(site)
    for _ in range(2):
        assert site.sweep().exit_code == 0
    assert "logged only (no delivery configured)" in status(site, job)
    got = tmp_path / "paged.jsonl"
    pager = tmp_path / "page"
    pager.write_text(f"#!/bin/sh\ncat >> {got}\necho >> {got}\n")
    pager.chmod(0o700)
    site.config.write_text(
        site.config.read_text() + f'[deliver]\ncommand = ["{pager}"]\ntimeout = "10s"\n'
    )
    assert site.sweep().exit_code == 0
    [paged] = [json.loads(line) for line in got.read_text().splitlines() if line]
    assert paged["job"] == job and paged["id"] == "failed:non-zero-exit"
    assert str(escalation(site, job)["delivery"]).endswith(f"(command {pager})")
    assert site.sweep().exit_code == 0
    assert len(got.read_text().splitlines()) == 1, "delivered once"


def test_a_redirect_is_a_failed_delivery_that_names_where_it_points_without_its_path(
    tmp_path: Path,
) -> None:
    with Peer(tmp_path, "--redirect", "https://hooks.example.org/moved/s3cret-path") as peer:
        site = webhook_site(tmp_path, peer.url)
        (job,) = failed_jobs(site)
        for _ in range(2):
            assert site.sweep().exit_code == 0
        assert [r["method"] for r in peer.requests()] == ["POST", "POST"], "nothing followed it"
    e = escalation(site, job)
    assert e["delivered"] is None
    said = status(site, job)
    assert (
        f"{peer.via} answered HTTP 302, a redirect to https://hooks.example.org, which is not "
        "followed" in said
    ), said
    assert "s3cret-path" not in said


def test_a_webhook_that_drips_its_answer_is_cut_at_the_timeout_and_not_delivered(
    tmp_path: Path,
) -> None:
    with Peer(tmp_path, "--drip", "0.4") as peer:
        site = webhook_site(tmp_path, peer.url, timeout="1s")
        (job,) = failed_jobs(site)
        assert site.sweep().exit_code == 0
        # The server notes the request once the client has let go of it.
        for _ in range(100):
            if posts(peer):
                break
            time.sleep(0.1)
        [post] = posts(peer)
    assert isinstance(post["sent"], int) and isinstance(post["of"], int)
    assert post["sent"] < post["of"], "the client let go before the whole answer came"
    assert escalation(site, job)["delivered"] is None
    assert f"{peer.via} gave no whole answer within 1s; the request was cut" in status(site, job)


def test_an_answer_that_is_not_http_is_not_a_delivery(tmp_path: Path) -> None:
    with Peer(tmp_path, "--garbled") as peer:
        site = webhook_site(tmp_path, peer.url)
        (job,) = failed_jobs(site)
        assert site.sweep().exit_code == 0
        assert len(posts(peer)) == 1
    assert escalation(site, job)["delivered"] is None
    assert f"{peer.via} did not answer in HTTP" in status(site, job)


def test_a_user_and_password_in_the_address_go_as_basic_auth_and_are_never_shown(
    tmp_path: Path,
) -> None:
    with Peer(tmp_path, "--user", "ada:pa55word") as peer:
        url = peer.url.replace("http://", "http://ada:pa55word@")
        site = webhook_site(tmp_path, url)
        (job,) = failed_jobs(site)
        assert site.sweep().exit_code == 0
        [post] = posts(peer)
    assert escalation(site, job)["delivered"] is not None
    assert post["headers"]["Authorization"] == "Basic YWRhOnBhNTV3b3Jk"  # type: ignore[index]
    assert "pa55word" not in status(site, job)
    for folder, _, files in os.walk(site.ledger):
        for name in files:
            assert b"pa55word" not in (Path(folder) / name).read_bytes(), name


def test_a_channel_that_keeps_failing_rests_until_the_next_sweep(tmp_path: Path) -> None:
    down = tmp_path / "hook-down"
    down.touch()
    with Peer(tmp_path, "--down", str(down)) as peer:
        site = webhook_site(tmp_path, peer.url)
        jobs = failed_jobs(site, 4)
        assert site.sweep().exit_code == 0  # the sweep that settles all four
        assert len(posts(peer)) == 2, "two failures in a row, then the channel rests"
        assert site.sweep().exit_code == 0
        assert len(posts(peer)) == 4
        down.unlink()
        assert site.sweep().exit_code == 0
        assert len(posts(peer)) == 8, "each of the four, once, in the first sweep it is up"
    assert all(escalation(site, job)["delivered"] is not None for job in jobs)


def test_a_sweep_s_time_limit_cuts_a_slow_delivery_command_and_its_children(
    tmp_path: Path,
) -> None:
    pids = tmp_path / "pids"
    slow = tmp_path / "slow-pager"
    # A pager whose child outlives it unless its whole group is stopped.
    slow.write_text(f"#!/bin/sh\nsleep 300 &\necho $! >> {pids}\nsleep 300\n")
    slow.chmod(0o700)
    site = Site(tmp_path, extra=f'[deliver]\ncommand = ["{slow}"]\ntimeout = "30s"\n')
    (job,) = failed_jobs(site)
    assert site.sweep("--time-limit", "3s").exit_code == 0
    said = str(escalation(site, job)["delivery"])
    seconds = float(said.split("still ran after ")[1].split("s;")[0])
    assert 0 < seconds <= 3, said
    for pid in pids.read_text().split():
        with pytest.raises(ProcessLookupError):
            for _ in range(50):  # reaped by init at once, or a moment later
                os.kill(int(pid), 0)
                time.sleep(0.1)
