"""Shared types of the publish test fixtures (kept out of conftest so tests can import them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import boto3

from publish.credentials import Credentials

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

REGION = "us-east-1"


@dataclass(frozen=True)
class S3Server:
    """A running moto server and the only key pair it accepts."""

    url: str
    credentials: Credentials


@dataclass(frozen=True)
class Bucket:
    """A fresh bucket on the moto server."""

    server: S3Server
    name: str

    @property
    def store_url(self) -> str:
        """The `--store` URL of the bucket's 'ckpt' prefix."""
        return f"s3://{self.name}/ckpt"

    def client(self) -> S3Client:
        """A plain boto3 client with the good key."""
        creds = self.server.credentials
        return boto3.client(
            "s3",
            endpoint_url=self.server.url,
            region_name=REGION,
            aws_access_key_id=creds.access_key_id,
            aws_secret_access_key=creds.secret_access_key,
        )
