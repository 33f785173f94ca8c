"""An incoming webhook as a process of its own on 127.0.0.1, well-behaved or not.

Run as ``python webhook_server.py LOG [--answer ...]``; it prints its port on its first line,
then serves until killed. Every request it gets is appended to LOG as one JSON line (method,
path, headers, body, and for a drip how many bytes of the answer went out before the client
let go). How it answers:

* ``--status N`` (200): that status to every POST;
* ``--down FILE``: 503 while FILE exists (a chat that is down for a while);
* ``--redirect URL``: ``302`` with ``Location: URL`` to a POST, 200 to anything else (a GET
  the redirect was followed with is logged, as a client that follows it would make);
* ``--drip SECONDS``: a well-formed 200 answer, one byte every SECONDS;
* ``--garbled``: bytes that are not HTTP, then the connection closed;
* ``--user NAME:PASSWORD``: 401 unless the request carries that HTTP Basic authorization.

``Hook`` (``local_webhook.py``) is the in-process one the lighter tests use.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("log", type=Path)
    parser.add_argument("--status", type=int, default=200)
    parser.add_argument("--down", type=Path)
    parser.add_argument("--redirect", default="")
    parser.add_argument("--drip", type=float, default=0.0)
    parser.add_argument("--garbled", action="store_true")
    parser.add_argument("--user", default="")
    args = parser.parse_args()

    def note(handler: BaseHTTPRequestHandler, body: bytes, **more: object) -> None:
        line = {
            "method": handler.command,
            "path": handler.path,
            "headers": dict(handler.headers.items()),
            "body": body.decode(errors="replace"),
            **more,
        }
        with args.log.open("a") as log:
            log.write(json.dumps(line) + "\n")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _plain(self, status: int, extra: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
            note(self, b"")
            self._plain(200)

        def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
            body = self._body()
            if args.drip:
                sent = 0
                try:
                    for i in range(len(ANSWER)):
                        self.wfile.write(ANSWER[i : i + 1])
                        self.wfile.flush()
                        sent += 1
                        time.sleep(args.drip)
                except OSError:
                    pass
                note(self, body, sent=sent, of=len(ANSWER))
                self.close_connection = True
                return
            note(self, body)
            if args.garbled:
                self.wfile.write(b"\x00\x17garbage, not an answer\r\n\r\n")
                self.close_connection = True
                return
            if args.user:
                want = "Basic " + base64.b64encode(args.user.encode()).decode()
                if self.headers.get("Authorization") != want:
                    self._plain(401)
                    return
            if args.redirect:
                self._plain(302, {"Location": args.redirect})
                return
            if args.down is not None and args.down.exists():
                self._plain(503)
                return
            self._plain(args.status)

        def log_message(self, format: str, *a: object) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    sys.stdout.write(f"{server.server_address[1]}\n")
    sys.stdout.flush()
    os.set_blocking(sys.stdout.fileno(), True)
    server.serve_forever()


if __name__ == "__main__":
    main()
