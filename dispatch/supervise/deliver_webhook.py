"""Delivering escalations to a chat: an HTTP POST of ``{"text": ...}`` to an incoming webhook.

That body is what Slack's and Mattermost's incoming webhooks take (and many others). Any 2xx
answer means delivered; another status, a refused connection or no answer by the timeout
means not delivered, and the supervisor offers the escalation again after the next pass.
A webhook's address is its secret, so only its scheme and host are ever shown or recorded.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from datetime import timedelta
from urllib.parse import urlsplit

from dispatch.model.errors import UnavailableError
from dispatch.model.status import Escalation
from dispatch.model.values import JobID
from dispatch.supervise.delivery import message


class WebhookDeliver:
    """A ``Deliver`` that posts each escalation as ``{"text": ...}`` to ``url``."""

    def __init__(self, url: str, timeout: timedelta) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"a webhook is an http:// or https:// address, not {parts.scheme}:")
        self.url, self.timeout = url, timeout
        self.via = f"webhook {parts.scheme}://{parts.netloc.rpartition('@')[2]}"

    def __call__(self, job: JobID, escalation: Escalation) -> None:
        """Post the escalation; ``UnavailableError`` unless the answer is 2xx."""
        body = json.dumps({"text": message(job, escalation)}).encode()
        request = urllib.request.Request(
            self.url, data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout.total_seconds()) as answer:
                status = answer.status
        except urllib.error.HTTPError as err:
            raise UnavailableError(f"{self.via} answered HTTP {err.code}") from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise UnavailableError(f"{self.via} could not be reached: {reason}") from None
        if not 200 <= status < 300:
            raise UnavailableError(f"{self.via} answered HTTP {status}")
