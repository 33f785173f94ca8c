#!/usr/bin/env python3
"""A TCP proxy that delays every byte by half a round trip each way: the network between the
login nodes and the shared filesystem's metadata server, on a kernel without ``netem``.

    delay_proxy.py --listen 127.0.0.1:PORT --to HOST:PORT --rtt-ms 1.0

Each connection gets two pumps (client to server, server to client). A pump's reader stamps
each chunk it receives with the time it may leave (now + rtt/2) and queues it; its writer
sends the chunks in order, each no sooner than its stamp. So a request and its answer take
one round trip more than without the proxy, whatever their size, and pipelined requests are
delayed without being serialised behind each other's delays. Threads and ``time.sleep``
rather than an event loop: epoll's timeout has millisecond resolution, too coarse for 0.5 ms.

Python 3 standard library only; SIGTERM stops it.
"""

from __future__ import annotations

import argparse
import collections
import signal
import socket
import sys
import threading
import time

CHUNK = 65536


class Pump:
    """One direction of one connection: read, stamp, queue; then send each chunk on time."""

    def __init__(self, src: socket.socket, dst: socket.socket, delay: float) -> None:
        self.src, self.dst, self.delay = src, dst, delay
        self.queue: collections.deque[tuple[float, bytes]] = collections.deque()
        self.ready = threading.Condition()

    def start(self) -> None:
        threading.Thread(target=self.read, daemon=True).start()
        threading.Thread(target=self.write, daemon=True).start()

    def read(self) -> None:
        while True:
            try:
                data = self.src.recv(CHUNK)
            except OSError:
                data = b""
            with self.ready:
                self.queue.append((time.monotonic() + self.delay, data))
                self.ready.notify()
            if not data:
                return

    def write(self) -> None:
        while True:
            with self.ready:
                while not self.queue:
                    self.ready.wait()
                due, data = self.queue.popleft()
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            if not data:  # the sender closed: pass the end on, then stop
                shut(self.dst, socket.SHUT_WR)
                shut(self.src, socket.SHUT_RD)
                return
            try:
                self.dst.sendall(data)
            except OSError:
                shut(self.src, socket.SHUT_RDWR)
                shut(self.dst, socket.SHUT_RDWR)
                return


def shut(sock: socket.socket, how: int) -> None:
    try:
        sock.shutdown(how)
    except OSError:
        pass


def serve(listen: tuple[str, int], upstream: tuple[str, int], delay: float) -> None:
    server = socket.create_server(listen, backlog=256, reuse_port=False)
    while True:
        client, _ = server.accept()
        try:
            remote = socket.create_connection(upstream, timeout=10)
        except OSError as err:
            print(f"delay_proxy: cannot reach {upstream[0]}:{upstream[1]}: {err}", flush=True)
            client.close()
            continue
        remote.settimeout(None)
        for sock in (client, remote):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        Pump(client, remote, delay).start()
        Pump(remote, client, delay).start()


def address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", required=True, type=address)
    parser.add_argument("--to", required=True, type=address)
    parser.add_argument("--rtt-ms", type=float, default=1.0)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    serve(args.listen, args.to, args.rtt_ms / 2000.0)


if __name__ == "__main__":
    main()
