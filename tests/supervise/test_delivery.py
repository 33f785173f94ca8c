"""Delivery says what happened: through which channel, failed and why, or logged only.

Each channel runs against a real peer on this host: the mail system behind ``sendmail`` (Debian's
exim4, delivering to the ``mail`` user's local mailbox) and an HTTP server on 127.0.0.1 that
answers as a chat's incoming webhook does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from local_webhook import Hook
from sweep_world import World, counter_rand

import dispatch
from dispatch.model.record import LOGGED_ONLY
from dispatch.supervise import Supervisor
from dispatch.supervise.deliver_mail import MailDeliver
from dispatch.supervise.deliver_webhook import WebhookDeliver
from dispatch.supervise.delivery import Deliver

TIMEOUT = timedelta(seconds=10)
MAILBOX = Path("/var/mail/mail")  # Debian's local mailbox of the user ``mail`` (base-passwd)


@pytest.fixture
def hook() -> Iterator[Hook]:
    with Hook() as h:
        yield h


def escalated(world: World, deliver: Deliver | None) -> tuple[str, str]:
    """A job with a foreign object in its name, swept three times: (job, escalation id)."""
    (job,) = world.submit(1)
    sup = Supervisor(
        world.backend, world.store, clock=world.clock, deliver=deliver, rand=counter_rand(9)
    )
    world.sweep_until_idle(sup)
    foreign = world.backend.env().inject_foreign(job)
    for _ in range(3):
        sup.sweep()
    return job, f"foreign:{foreign.id}"


def test_without_a_channel_an_escalation_is_logged_once_and_recorded_as_logged_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    world = World("file", tmp_path)
    job, eid = escalated(world, None)
    e = world.job(job).escalations[eid]
    assert e.delivered is None and e.logged is not None
    assert [getattr(x, "via", None) for x in world.entries(job, "delivered")] == [LOGGED_ONLY]
    assert sum(eid in r.getMessage() for r in caplog.records) == 1
    # A channel configured later still delivers it.
    world.sweep_until_idle(world.supervisor())
    assert world.delivered == [(job, eid)] and world.job(job).escalations[eid].delivered


def test_a_webhook_gets_slack_and_mattermost_shaped_json(tmp_path: Path, hook: Hook) -> None:
    world = World("file", tmp_path)
    job, eid = escalated(world, WebhookDeliver(hook.url, TIMEOUT))
    [body] = hook.bodies
    assert list(body) == ["text"]
    text = str(body["text"])
    assert text.startswith(f"dispatch job {job}: escalation {eid} at ")
    assert text.endswith(f"To see it and how to answer it: dispatch escalations {job}")
    e = world.job(job).escalations[eid]
    assert e.delivered is not None
    # The address is the webhook's secret: only its scheme and host are recorded.
    assert e.via == f"webhook http://127.0.0.1:{hook.server.server_address[1]}"
    assert "s3cret" not in json.dumps(
        [x.model_dump(mode="json") for x in world.entries(job, "delivered")]
    )


def test_a_failing_webhook_is_retried_each_pass_shown_failed_once_then_delivered(
    tmp_path: Path, hook: Hook
) -> None:
    world = World("file", tmp_path)
    hook.status = 500
    deliver = WebhookDeliver(hook.url, TIMEOUT)
    job, eid = escalated(world, deliver)
    assert len(hook.bodies) == 3, "offered again after every pass"
    e = world.job(job).escalations[eid]
    assert e.delivered is None and e.failed is not None
    assert e.failed.error == f"{deliver.via} answered HTTP 500"
    assert len(world.entries(job, "delivery-failed")) == 1, "the same failure is recorded once"
    hook.status = 204
    Supervisor(world.backend, world.store, clock=world.clock, deliver=deliver).sweep()
    e = world.job(job).escalations[eid]
    assert e.delivered is not None and e.via == deliver.via


def test_a_webhook_nobody_listens_on_is_a_failed_delivery(tmp_path: Path) -> None:
    with Hook() as gone:
        url = gone.url
    world = World("file", tmp_path)
    job, eid = escalated(world, WebhookDeliver(url, TIMEOUT))
    failed = world.job(job).escalations[eid].failed
    assert failed is not None and "could not be reached" in failed.error


@pytest.mark.parametrize("url", ["ftp://host/x", "file:///etc/passwd", "http://"])
def test_a_webhook_is_an_http_address(url: str) -> None:
    with pytest.raises(ValueError, match="http:// or https://"):
        WebhookDeliver(url, TIMEOUT)


def _mailed(marker: str, wait: float = 20) -> str:
    """The message in the local mailbox whose subject holds ``marker`` (waits for exim)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if MAILBOX.exists():
            for message in MAILBOX.read_text(errors="replace").split("\nFrom "):
                if marker in message:
                    return message
        time.sleep(0.2)
    raise AssertionError(f"no message about {marker} in {MAILBOX}")


def test_an_escalation_is_mailed_through_the_local_sendmail(tmp_path: Path) -> None:
    world = World("file", tmp_path)
    deliver = MailDeliver(["mail"], TIMEOUT)
    job, eid = escalated(world, deliver)
    got = _mailed(f"Subject: dispatch job {job}: escalation {eid}")
    assert f"dispatch job {job}: escalation {eid} at " in got
    assert f"dispatch escalations {job}" in got
    e = world.job(job).escalations[eid]
    assert e.delivered is not None and e.via == "mail to mail"


def test_a_sendmail_that_cannot_start_is_a_failed_delivery(tmp_path: Path) -> None:
    world = World("file", tmp_path)
    missing = str(tmp_path / "no-sendmail")
    job, eid = escalated(world, MailDeliver(["ops@example.org"], TIMEOUT, [missing]))
    failed = world.job(job).escalations[eid].failed
    assert failed is not None and failed.error.startswith(f"sendmail ({missing}) could not start")
    assert failed.via == "mail to ops@example.org"


def test_a_mail_subject_stays_one_line_whatever_the_escalation_id() -> None:
    at = World().clock.now()
    text = MailDeliver(["ops"], TIMEOUT).render("j1", dispatch.Escalation(id="a\nBcc: x", at=at))
    headers = text.split(b"\n\n")[0].decode()
    assert "Bcc" not in [h.split(":")[0] for h in headers.splitlines()]
