"""Opening the store a `--store` URL names: an s3:// URL or a filesystem path."""

from __future__ import annotations

from pathlib import Path

from publish.config import Config
from publish.credentials import resolve_credentials
from publish.errors import StoreUnavailable
from publish.posix_store import PosixStore
from publish.store import Store

# boto3 is imported by the S3 branches only: on a POSIX root it would be most of the
# command's start-up time (a job's `publish resolve` runs on every start).


def is_s3(url: str) -> bool:
    """Whether the store URL names S3."""
    return url.startswith("s3://")


def open_store(url: str, config: Config, endpoint_url: str | None = None) -> Store:
    """The store at `url`; S3 credentials come from the configured sources, in order."""
    if not is_s3(url):
        return PosixStore(Path(url))
    from publish.s3_store import S3Location, S3Store, make_client

    location = S3Location.parse(url)
    credentials = resolve_credentials(config.sources)
    client = make_client(credentials, config.proxy, endpoint_url, config.region)
    return S3Store(client, location)


def check_bucket(store: Store) -> None:
    """Raise StoreUnavailable unless the store's bucket (S3) or root folder (POSIX) exists."""
    if isinstance(store, PosixStore):
        if not store.root.is_dir():
            raise StoreUnavailable(f"checkpoint root {store.root} is not a folder")
        return
    import botocore.exceptions

    from publish.s3_store import S3Store

    if isinstance(store, S3Store):
        try:
            store.client.head_bucket(Bucket=store.location.bucket)
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
            raise StoreUnavailable(
                f"bucket {store.location.bucket} is not reachable: {exc}"
            ) from exc
