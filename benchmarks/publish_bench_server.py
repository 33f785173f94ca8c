"""The local S3 server the publish benchmarks run against: moto's ThreadedMotoServer on
127.0.0.1 (authentication left off: both sides of every comparison pay the same costs)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import boto3
from moto.server import ThreadedMotoServer

from publish.credentials import Credentials
from publish.proxy import ProxyRule
from publish.s3_store import S3Location, S3Store, make_client

REGION = "us-east-1"
CREDENTIALS = Credentials("AKIABENCHMARK", "benchmark-secret")


@contextmanager
def s3_server(bucket: str) -> Iterator[tuple[str, S3Store]]:
    """Start the server, create `bucket`, and yield its URL and a publish store on it."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        url = f"http://{host}:{port}"
        plain_client(url).create_bucket(Bucket=bucket)
        client = make_client(CREDENTIALS, ProxyRule(), url, REGION)
        yield url, S3Store(client, S3Location(bucket, "ckpt/"))
    finally:
        server.stop()


def plain_client(url: str):  # type: ignore[no-untyped-def]
    """A plain boto3 S3 client, default settings, for the baseline."""
    return boto3.client("s3", endpoint_url=url, region_name=REGION,
                        aws_access_key_id=CREDENTIALS.access_key_id,
                        aws_secret_access_key=CREDENTIALS.secret_access_key)
