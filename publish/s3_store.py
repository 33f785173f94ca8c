"""A checkpoint root on S3-compatible object storage (boto3).

Large files go up and down as concurrent multipart transfers, several files at a time.
Transient failures (5xx, throttling, timeouts, dropped connections) are retried by botocore's
standard retry mode; what is left after the retries becomes StoreUnavailable. The exclusive
create is a PutObject with `If-None-Match: *`: 412 means the key exists, 409 means a concurrent
conditional write was in flight and the put is tried again.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import boto3
import botocore.exceptions
from boto3.s3.transfer import TransferConfig
from botocore.config import Config as BotoConfig

from publish.credentials import Credentials
from publish.errors import InvalidInput, StoreUnavailable
from publish.proxy import ProxyRule
from publish.savefolder import SaveFile
from publish.store import MissingObject, ProgressCallback, unwritable

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

MIB = 1024 * 1024
# Parts of 16 MiB above 64 MiB keep a 2 GiB shard at 128 parts, well under S3's 10,000 limit.
# A save is uploaded from its open descriptors, which s3transfer reads part by part into
# memory: at most as many parts as are in flight (8 x 16 MiB).
TRANSFER = TransferConfig(
    multipart_threshold=64 * MIB, multipart_chunksize=16 * MIB, max_concurrency=8
)
TRANSFER.max_in_memory_upload_chunks = TRANSFER.max_request_concurrency  # boto3 has no argument
# Small files (and downloads) move this many at once. Large shards go up one at a time, their
# parts 8 at once: 4 shards at once held 4 times the memory in the client and the server and
# made a local server slower (benchmarks/publish_throughput.py), for no more bytes in flight
# than one shard's parts keep going.
FILES_AT_ONCE = 4
CONFLICT_RETRIES = 5


@dataclass(frozen=True)
class S3Location:
    """A bucket and key prefix parsed from `s3://bucket/prefix`."""

    bucket: str
    prefix: str

    @classmethod
    def parse(cls, url: str) -> S3Location:
        """Parse an s3:// URL; the prefix is normalised to end with '/' (or be empty)."""
        parts = urlsplit(url)
        if parts.scheme != "s3" or not parts.netloc:
            raise InvalidInput(f"store {url!r} is not s3://bucket[/prefix]")
        prefix = parts.path.strip("/")
        return cls(parts.netloc, f"{prefix}/" if prefix else "")


def configured_endpoint(env: Mapping[str, str] | None = None) -> str | None:
    """The S3 endpoint named by `AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL`, if any."""
    source = os.environ if env is None else env
    return source.get("AWS_ENDPOINT_URL_S3") or source.get("AWS_ENDPOINT_URL") or None


def make_client(
    credentials: Credentials,
    proxy: ProxyRule,
    endpoint_url: str | None = None,
    region: str = "us-east-1",
    read_timeout: float = 60.0,
    max_attempts: int = 5,
) -> S3Client:
    """An S3 client for these credentials, with the proxy rule and standard retries.

    The proxy rule is applied to the endpoint the client really uses: `endpoint_url`, else
    `AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL` (which boto3 would read itself), else AWS's
    regional endpoint. botocore is told to ignore endpoints configured anywhere else (the
    AWS config file), so no endpoint can bypass the rule.
    """
    endpoint_url = endpoint_url or configured_endpoint()
    target = endpoint_url or f"https://s3.{region}.amazonaws.com"
    config = BotoConfig(  # type: ignore[call-arg]  # the stubs lack botocore 1.31's option
        region_name=region,
        ignore_configured_endpoint_urls=True,
        proxies=proxy.proxies_for(target),
        retries={"mode": "standard", "total_max_attempts": max_attempts},
        connect_timeout=10,
        read_timeout=read_timeout,
        max_pool_connections=FILES_AT_ONCE * TRANSFER.max_request_concurrency + 4,
    )
    session = boto3.session.Session(
        aws_access_key_id=credentials.access_key_id,
        aws_secret_access_key=credentials.secret_access_key,
        aws_session_token=credentials.session_token,
        region_name=region,
    )
    return session.client("s3", endpoint_url=endpoint_url, config=config)


def _status(exc: botocore.exceptions.ClientError) -> int:
    meta: Any = exc.response.get("ResponseMetadata", {})
    return int(meta.get("HTTPStatusCode", 0))


def _code(exc: botocore.exceptions.ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


class S3Store:
    """A store under one bucket and prefix."""

    def __init__(
        self, client: S3Client, location: S3Location, transfer: TransferConfig = TRANSFER
    ) -> None:
        self.client = client
        self.location = location
        self.transfer = transfer

    @property
    def description(self) -> str:
        """The s3:// URL."""
        return f"s3://{self.location.bucket}/{self.location.prefix}"

    def _key(self, key: str) -> str:
        return self.location.prefix + key

    def _fail(self, action: str, key: str, exc: Exception) -> StoreUnavailable:
        if isinstance(exc, botocore.exceptions.ClientError):
            detail = f"{_code(exc)} (HTTP {_status(exc)})"
        else:
            detail = type(exc).__name__
        return StoreUnavailable(f"{action} {self.description}{key} failed: {detail}")

    def _missing(self, exc: botocore.exceptions.ClientError) -> bool:
        return _status(exc) == 404 or _code(exc) in ("NoSuchKey", "404")

    def put_files(self, pairs: Sequence[tuple[str, SaveFile]], progress: ProgressCallback) -> None:
        """Upload open files: large ones in turn, each as a concurrent multipart transfer, and
        small ones several at once beside them.

        Each is read through its descriptor, never reopened by path.
        """

        def one(pair: tuple[str, SaveFile]) -> None:
            key, source = pair
            try:
                with source.reader() as reader:
                    self.client.upload_fileobj(
                        reader,
                        self.location.bucket,
                        self._key(key),
                        Callback=progress,
                        Config=self.transfer,
                    )
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
                raise self._fail("upload to", key, exc) from exc
            except boto3.exceptions.S3UploadFailedError as exc:
                raise StoreUnavailable(f"upload to {self.description}{key} failed") from exc

        large = [pair for pair in pairs if pair[1].size >= self.transfer.multipart_threshold]
        small = [pair for pair in pairs if pair[1].size < self.transfer.multipart_threshold]
        with ThreadPoolExecutor(max_workers=FILES_AT_ONCE) as pool:
            moving = pool.map(one, small)
            for pair in large:
                one(pair)
            for _ in moving:
                pass

    def get_files(self, pairs: Sequence[tuple[str, Path]], progress: ProgressCallback) -> None:
        """Download files, several at once, each as a concurrent ranged transfer if large."""

        def one(pair: tuple[str, Path]) -> None:
            key, path = pair
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                self.client.download_file(
                    self.location.bucket,
                    self._key(key),
                    str(path),
                    Callback=progress,
                    Config=self.transfer,
                )
            except botocore.exceptions.ClientError as exc:
                if self._missing(exc):
                    raise MissingObject(f"{key} is missing from {self.description}") from exc
                raise self._fail("download of", key, exc) from exc
            except botocore.exceptions.BotoCoreError as exc:
                raise self._fail("download of", key, exc) from exc
            except OSError as exc:  # the local side: a full disk, say
                raise unwritable(path, exc) from None

        with ThreadPoolExecutor(max_workers=FILES_AT_ONCE) as pool:
            for _ in pool.map(one, pairs):
                pass

    def put_bytes(self, key: str, data: bytes) -> None:
        """PutObject, overwriting."""
        try:
            self.client.put_object(Bucket=self.location.bucket, Key=self._key(key), Body=data)
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
            raise self._fail("put of", key, exc) from exc

    def create_exclusive(self, key: str, data: bytes) -> bool:
        """PutObject with If-None-Match: *; False on 412, retried on 409."""
        for _ in range(CONFLICT_RETRIES):
            try:
                self.client.put_object(
                    Bucket=self.location.bucket, Key=self._key(key), Body=data, IfNoneMatch="*"
                )
                return True
            except botocore.exceptions.ClientError as exc:
                if _status(exc) == 412:
                    return False
                if _status(exc) != 409:
                    raise self._fail("conditional put of", key, exc) from exc
                last: Exception = exc
            except botocore.exceptions.BotoCoreError as exc:
                raise self._fail("conditional put of", key, exc) from exc
        raise self._fail("conditional put of", key, last)

    def get_bytes(self, key: str) -> bytes:
        """GetObject."""
        try:
            reply = self.client.get_object(Bucket=self.location.bucket, Key=self._key(key))
            return reply["Body"].read()
        except botocore.exceptions.ClientError as exc:
            if self._missing(exc):
                raise MissingObject(f"{key} is missing from {self.description}") from exc
            raise self._fail("get of", key, exc) from exc
        except botocore.exceptions.BotoCoreError as exc:
            raise self._fail("get of", key, exc) from exc

    def list_keys(self, prefix: str, start_after: str | None = None) -> Iterator[str]:
        """ListObjectsV2, one request per page of up to 1,000 keys, fetched as iterated."""
        request: dict[str, Any] = {"Bucket": self.location.bucket, "Prefix": self._key(prefix)}
        if start_after is not None:
            request["StartAfter"] = self._key(start_after)
        cut = len(self.location.prefix)
        while True:
            try:
                reply = self.client.list_objects_v2(**request)
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
                raise self._fail("listing of", prefix, exc) from exc
            for item in reply.get("Contents", []):
                yield item["Key"][cut:]
            token = reply.get("NextContinuationToken")
            if not reply.get("IsTruncated") or not token:
                return
            request["ContinuationToken"] = token
            request.pop("StartAfter", None)

    def sizes(self, keys: Sequence[str]) -> dict[str, int]:
        """HeadObject of each key, several at once: its ContentLength, or nothing on 404."""

        def one(key: str) -> tuple[str, int | None]:
            try:
                reply = self.client.head_object(Bucket=self.location.bucket, Key=self._key(key))
            except botocore.exceptions.ClientError as exc:
                if self._missing(exc):
                    return key, None
                raise self._fail("head of", key, exc) from exc
            except botocore.exceptions.BotoCoreError as exc:
                raise self._fail("head of", key, exc) from exc
            return key, int(reply["ContentLength"])

        with ThreadPoolExecutor(max_workers=FILES_AT_ONCE) as pool:
            return {key: size for key, size in pool.map(one, keys) if size is not None}

    def delete(self, key: str) -> None:
        """DeleteObject (absent keys succeed, as S3 does)."""
        try:
            self.client.delete_object(Bucket=self.location.bucket, Key=self._key(key))
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
            raise self._fail("delete of", key, exc) from exc

    def local_path(self, key: str) -> Path | None:
        """S3 keys have no local path."""
        return None
