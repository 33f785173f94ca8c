"""A recording, fault-injecting HTTP forward proxy for tests (plain http:// targets only).

It forwards each request to the host named in its absolute URL, records (method, URL) so a
test can prove which requests went through it, and can be told to answer a matching request
itself with an error status, or to forward it and then hold the reply back (a reply lost to a
timeout after the store already acted).
"""

from __future__ import annotations

import http.client
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

_HOP_BY_HOP = {
    "connection",
    "proxy-connection",
    "keep-alive",
    "transfer-encoding",
    "expect",
    "te",
    "trailer",
    "upgrade",
    "proxy-authorization",
}


@dataclass
class Fault:
    """Answer `status` instead of forwarding, or forward and then wait `delay` seconds.

    Applies to requests whose method matches and whose URL contains `url_contains`
    (and, if `query_contains` is set, whose URL also contains it), `times` times, after
    letting the first `skip` matching requests through untouched.
    """

    method: str
    url_contains: str
    status: int | None = None
    delay: float = 0.0
    times: int = 1
    query_contains: str | None = None
    skip: int = 0
    hits: int = 0
    skipped: int = 0

    def matches(self, method: str, url: str) -> bool:
        """Whether this fault applies to the request and has uses left."""
        if self.hits >= self.times or method != self.method or self.url_contains not in url:
            return False
        return self.query_contains is None or self.query_contains in url


@dataclass
class RecordingProxy:
    """The proxy's state: what went through it and which faults to inject."""

    requests: list[tuple[str, str]] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    def take_fault(self, method: str, url: str) -> Fault | None:
        """The first matching fault, counted as used."""
        with self.lock:
            self.requests.append((method, url))
            for fault in self.faults:
                if fault.matches(method, url):
                    if fault.skipped < fault.skip:
                        fault.skipped += 1
                        continue
                    fault.hits += 1
                    return fault
        return None

    def seen(self, method: str, url_contains: str) -> int:
        """How many recorded requests match."""
        with self.lock:
            return sum(1 for m, u in self.requests if m == method and url_contains in u)


def _handler(state: RecordingProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: the record is kept in `state.requests`."""

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                chunks: list[bytes] = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0], 16)
                    if size == 0:
                        self.rfile.readline()
                        return b"".join(chunks)
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("Content-Length", "0")))

        def _reply(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
            self.send_response(status)
            # A HEAD reply has no body but must keep the length of the body a GET would have.
            keep_length = self.command == "HEAD"
            for name, value in headers:
                if name.lower() in _HOP_BY_HOP:
                    continue
                if name.lower() != "content-length" or keep_length:
                    self.send_header(name, value)
            if not keep_length:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _forward(self) -> None:
            body = self._body()
            fault = state.take_fault(self.command, self.path)
            if fault is not None and fault.status is not None:
                error = (
                    f"<Error><Code>Injected{fault.status}</Code>"
                    f"<Message>injected by the test proxy</Message></Error>"
                ).encode()
                if fault.status < 300:
                    error = b""  # a success that never reached the store
                self._reply(fault.status, [("Content-Type", "application/xml")], error)
                return
            target = urlsplit(self.path)
            upstream = http.client.HTTPConnection(target.hostname or "", target.port, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            path = target.path + (f"?{target.query}" if target.query else "")
            try:
                upstream.request(self.command, path, body=body, headers=headers)
                reply = upstream.getresponse()
                data = reply.read()
            finally:
                upstream.close()
            if fault is not None and fault.delay:
                time.sleep(fault.delay)
            try:
                self._reply(reply.status, reply.getheaders(), data)
            except OSError:
                self.close_connection = True  # the client gave up waiting, as intended

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    return Handler


class ProxyServer:
    """Runs a RecordingProxy on 127.0.0.1 in a background thread."""

    def __init__(self) -> None:
        self.state = RecordingProxy()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.state))
        self.server.daemon_threads = True
        host, port = self.server.server_address[:2]
        self.state.url = f"http://{host!s}:{port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> RecordingProxy:
        self.thread.start()
        return self.state

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
