"""An incoming webhook on 127.0.0.1, as a chat (Slack, Mattermost) runs one, for the delivery tests.

Importable from any test folder. ``Hook``: a real HTTP server (the standard library's) in the
test's process that keeps every JSON body posted to it and answers with the status a test sets.
``Peer``: ``webhook_server.py`` as a process of its own, well-behaved or hostile.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class Hook:
    """A local incoming webhook: keeps every JSON body posted; answers ``status``."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, object]] = []
        self.status = 200
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
                length = int(self.headers["Content-Length"])
                hook.bodies.append(json.loads(self.rfile.read(length)))
                self.send_response(hook.status)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/s3cret"

    def __enter__(self) -> Hook:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


class Peer:
    """``webhook_server.py`` as a process of its own, answering as its ``options`` say: the
    address to post to, and the requests it got (``requests()``)."""

    def __init__(self, folder: Path, *options: str) -> None:
        self.log = folder / f"webhook-{uuid.uuid4().hex[:8]}.jsonl"
        self.log.touch()
        script = Path(__file__).with_name("webhook_server.py")
        self.proc = subprocess.Popen(
            [sys.executable, str(script), str(self.log), *options],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}/hooks/s3cret"
        self.via = f"webhook http://127.0.0.1:{self.port}"

    def requests(self) -> list[dict[str, Any]]:
        """Every request the server got so far, in order."""
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def __enter__(self) -> Peer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.kill()
        self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
