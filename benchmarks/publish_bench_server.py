"""The local S3 server the publish benchmarks run against: moto's server in its own process
on 127.0.0.1 (so it does not share the client's interpreter lock), authentication left off:
both sides of every comparison pay the same costs."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3

from publish.credentials import Credentials
from publish.proxy import ProxyRule
from publish.s3_store import S3Location, S3Store, make_client

REGION = "us-east-1"
CREDENTIALS = Credentials("AKIABENCHMARK", "benchmark-secret")
START_POLLS = 300  # of 0.1 s


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def s3_server(bucket: str) -> Iterator[tuple[str, S3Store]]:
    """Start the server, create `bucket`, and yield its URL and a publish store on it."""
    with s3_server_process(bucket) as (url, store, _):
        yield url, store


@contextmanager
def s3_server_process(bucket: str) -> Iterator[tuple[str, S3Store, int]]:
    """As `s3_server`, and the server's process id (to read its CPU time)."""
    port = _free_port()
    moto = Path(sys.executable).parent / "moto_server"
    process = subprocess.Popen(
        [str(moto), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(START_POLLS):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        url = f"http://127.0.0.1:{port}"
        plain_client(url).create_bucket(Bucket=bucket)
        client = make_client(CREDENTIALS, ProxyRule(), url, REGION)
        yield url, S3Store(client, S3Location(bucket, "ckpt/")), process.pid
    finally:
        process.terminate()
        process.wait(timeout=30)


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process `pid` has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def plain_client(url: str) -> Any:
    """A plain boto3 S3 client, default settings, for the baseline."""
    return boto3.client(
        "s3",
        endpoint_url=url,
        region_name=REGION,
        aws_access_key_id=CREDENTIALS.access_key_id,
        aws_secret_access_key=CREDENTIALS.secret_access_key,
    )
