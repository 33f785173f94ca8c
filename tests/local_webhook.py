"""An incoming webhook on 127.0.0.1, as a chat (Slack, Mattermost) runs one, for the delivery tests.

Importable from any test folder. A real HTTP server (the standard library's) that keeps every
JSON body posted to it and answers with the status a test sets.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


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
