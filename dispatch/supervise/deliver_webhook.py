"""Delivering escalations to a chat: an HTTP POST of ``{"text": ...}`` to an incoming webhook.

That body is what Slack's and Mattermost's incoming webhooks take (and many others). Only a
2xx answer to the POST itself means delivered. A redirect is not followed (a client that
follows one re-sends a 302's POST as a bodiless GET, whose 200 would say nothing of the
message): it is a failed delivery that names where it points. So is any other status, a
refused connection, an answer that is not HTTP, and no whole answer by the timeout, which
bounds the request as a whole (connect, send, read), however slowly the server drips bytes.

A webhook's address is its secret, so only its scheme and host are ever shown or recorded.
A user name and password in the address (``https://user:secret@host/hook``) are sent as HTTP
Basic authentication and never shown.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import socket
import ssl
import threading
from datetime import timedelta
from urllib.parse import unquote, urlsplit

from dispatch.channel_names import webhook_name
from dispatch.model.errors import UnavailableError
from dispatch.model.status import Escalation
from dispatch.model.values import JobID
from dispatch.supervise.delivery import Timed, message

# The most of an answer's body read: a chat answers "ok"; a server that sends more is not
# waited for.
BODY_READ = 4096


class WebhookDeliver(Timed):
    """A ``Deliver`` that posts each escalation as ``{"text": ...}`` to ``url``."""

    def __init__(self, url: str, timeout: timedelta) -> None:
        self.via = webhook_name(url)
        parts = urlsplit(url)
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.url, self.timeout = url, timeout
        self.https, self.host = parts.scheme == "https", parts.hostname or ""
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.netloc = parts.netloc.rpartition("@")[2]
        self.auth = ""
        if "@" in parts.netloc:
            pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
            self.auth = "Basic " + base64.b64encode(pair.encode()).decode()

    def __call__(self, job: JobID, escalation: Escalation) -> None:
        """Post the escalation; ``UnavailableError`` unless the POST is answered 2xx in time."""
        body = json.dumps({"text": message(job, escalation)}).encode()
        status, location = self._post(body)
        if 200 <= status < 300:
            return
        if 300 <= status < 400:
            raise UnavailableError(
                f"{self.via} answered HTTP {status}, a redirect to {_shown(location)}, which is "
                "not followed: set deliver.webhook to the address the hook lives at"
            )
        raise UnavailableError(f"{self.via} answered HTTP {status}")

    def _post(self, body: bytes) -> tuple[int, str]:
        """The status and ``Location`` of the answer to one POST of ``body``, all of it within
        ``timeout``: a timer cuts the connection when the time is up."""
        seconds = max(self.timeout.total_seconds(), 0.001)
        conn: http.client.HTTPConnection
        if self.https:
            context = ssl.create_default_context()
            conn = http.client.HTTPSConnection(
                self.host, self.port, timeout=seconds, context=context
            )
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=seconds)
        headers = {"Content-Type": "application/json", "Host": self.netloc}
        if self.auth:
            headers["Authorization"] = self.auth
        late = threading.Event()
        timer = threading.Timer(seconds, _cut, (conn, late))
        timer.daemon = True
        timer.start()
        try:
            conn.request("POST", self.target, body=body, headers=headers)
            answer = conn.getresponse()
            answer.read(BODY_READ)
            return answer.status, answer.getheader("Location") or ""
        except (OSError, http.client.HTTPException) as err:
            if late.is_set() or isinstance(err, TimeoutError):
                raise UnavailableError(
                    f"{self.via} gave no whole answer within {seconds:g}s; the request was cut"
                ) from None
            if isinstance(err, http.client.HTTPException):
                raise UnavailableError(
                    f"{self.via} did not answer in HTTP: {type(err).__name__}"
                ) from None
            reason = getattr(err, "reason", None) or err.strerror or type(err).__name__
            raise UnavailableError(f"{self.via} could not be reached: {reason}") from None
        finally:
            timer.cancel()
            conn.close()


def _cut(conn: http.client.HTTPConnection, late: threading.Event) -> None:
    """The deadline came: shut the connection's socket, which ends any read or write on it."""
    late.set()
    sock = conn.sock
    if sock is None:
        return
    # The plain socket's call: an SSL socket's own shutdown would tear down its TLS state
    # under the thread still reading it.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _shown(location: str) -> str:
    """Where a redirect points, without its path: a hook's path is often its secret."""
    if not location:
        return "no address (no Location header)"
    parts = urlsplit(location)
    if not parts.scheme or not parts.netloc:
        return "a path on the same host"
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
