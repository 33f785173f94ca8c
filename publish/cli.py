"""The `publish` command line: resolve, save, watch, prune and probe a checkpoint store.

Every verb names its store with `--store` (or `PUBLISH_STORE`) and, for S3-compatible stores,
`--endpoint-url` (or `PUBLISH_ENDPOINT_URL`). Errors print one line and exit with the code of
their kind (see `publish.errors` and docs/publish.md).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import click

from publish.config import Config, load_config
from publish.connect import check_bucket, open_store
from publish.epoch import Epoch
from publish.errors import InvalidInput, PublishError
from publish.inputs import check_text
from publish.layout import parse_step
from publish.probe import probe as run_probe
from publish.prune import prune as run_prune
from publish.resolve import resolve as run_resolve
from publish.save import save as run_save
from publish.store import Store
from publish.watch import Watcher

EXIT_PROBE_FAILED = 8
# A day between scans is already far longer than any save takes to write.
MAX_INTERVAL = 86400.0

F = TypeVar("F", bound=Callable[..., Any])


class _PathType(click.ParamType[Path]):
    """A path taken as given: unlike click.Path it makes no system call (a path holding a NUL
    byte must reach `_handled`'s check, not crash os.stat)."""

    name = "path"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        return value if isinstance(value, Path) else Path(value)


PATH = _PathType()

# The option (or argument) each command parameter comes from, for messages.
_FIELDS = {
    "store_url": "--store",
    "endpoint_url": "--endpoint-url",
    "config_path": "--config",
    "epoch_text": "--epoch",
    "step_text": "--step",
    "folder": "FOLDER",
    "into": "--into",
}


def _one_line(message: str) -> str:
    """The message as one printable line: line breaks and undecodable bytes escaped."""
    text = message.encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _handled(command: F) -> F:
    """Check the arguments for NUL bytes; turn a PublishError into one line and its exit code."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            for name, value in kwargs.items():
                if isinstance(value, str | Path):
                    check_text(_FIELDS.get(name, name), str(value))
            return command(*args, **kwargs)
        except PublishError as exc:
            click.echo(f"publish: {_one_line(str(exc))}", err=True)
            sys.exit(exc.exit_code)

    return wrapper  # type: ignore[return-value]


def _store_options(command: F) -> F:
    """The options every verb shares to name its store."""
    options = [
        click.option(
            "--store",
            "store_url",
            envvar="PUBLISH_STORE",
            required=True,
            help="s3://bucket/prefix or a checkpoint root folder [PUBLISH_STORE]",
        ),
        click.option(
            "--endpoint-url",
            envvar="PUBLISH_ENDPOINT_URL",
            default=None,
            help="endpoint of an S3-compatible store [PUBLISH_ENDPOINT_URL]",
        ),
        click.option(
            "--config",
            "config_path",
            envvar="PUBLISH_CONFIG",
            default=None,
            type=PATH,
            help="TOML file: credential sources, proxy, region [PUBLISH_CONFIG]",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _epoch_option(command: F) -> F:
    return click.option(
        "--epoch",
        "epoch_text",
        default=None,
        help="this execution's epoch N*1000000+R [DISPATCH_EPOCH]",
    )(command)


def _epoch(text: str | None) -> Epoch:
    return Epoch.parse(text) if text is not None else Epoch.from_env()


def _open(store_url: str, endpoint_url: str | None, config_path: Path | None) -> Store:
    config: Config = load_config(config_path)
    return open_store(store_url, config, endpoint_url)


@click.group()
@click.option("-v", "--verbose", count=True, help="more log lines (repeat for debug)")
def main(verbose: int) -> None:
    """Publish and resolve fenced training checkpoints."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="publish: %(message)s", stream=sys.stderr)
    # botocore's debug lines carry request headers; keep them out even at -vv.
    logging.getLogger("botocore").setLevel(logging.WARNING)
    logging.getLogger("urllib3").setLevel(logging.WARNING)


@main.command()
@_store_options
@_epoch_option
@click.option(
    "--into",
    type=PATH,
    default=None,
    help="download the publication into this (empty or new) folder",
)
@click.option("--json", "as_json", is_flag=True, help="print epoch, step, files as JSON")
@_handled
def resolve(
    store_url: str,
    endpoint_url: str | None,
    config_path: Path | None,
    epoch_text: str | None,
    into: Path | None,
    as_json: bool,
) -> None:
    """Print the newest complete publication not above this epoch (exit 3 if none)."""
    ceiling = _epoch(epoch_text)
    store = _open(store_url, endpoint_url, config_path)
    found = run_resolve(store, ceiling, into)
    if not as_json:
        click.echo(found.location)
        return
    manifest = found.manifest
    click.echo(
        json.dumps(
            {
                "path": found.location,
                "epoch": manifest.publication.epoch.value,
                "step": manifest.publication.step,
                "files": [
                    {"path": f.path, "size": f.size, "sha256": f.sha256} for f in manifest.files
                ],
            },
            indent=1,
        )
    )


@main.command()
@_store_options
@_epoch_option
@click.argument("folder", type=PATH)
@click.option("--step", "step_text", required=True, help="the training step of this save")
@_handled
def save(
    store_url: str,
    endpoint_url: str | None,
    config_path: Path | None,
    epoch_text: str | None,
    folder: Path,
    step_text: str,
) -> None:
    """Publish the finished save in FOLDER as this epoch's STEP (exit 4 if fenced)."""
    epoch = _epoch(epoch_text)
    step = parse_step(step_text)
    store = _open(store_url, endpoint_url, config_path)
    manifest = run_save(store, folder, step, epoch, os.environ.get("SLURM_JOB_ID"))
    click.echo(f"published {manifest.publication.name} ({len(manifest.files)} files)")


@main.command()
@_store_options
@_epoch_option
@click.argument("folder", type=PATH)
@click.option("--interval", default=5.0, show_default=True, help="seconds between scans")
@click.option("--once", is_flag=True, help="publish what is complete now, then exit")
@_handled
def watch(
    store_url: str,
    endpoint_url: str | None,
    config_path: Path | None,
    epoch_text: str | None,
    folder: Path,
    interval: float,
    once: bool,
) -> None:
    """Publish each completed save that appears in FOLDER until SIGTERM."""
    if not 0 < interval <= MAX_INTERVAL:  # also refuses NaN, which no wait can honour
        raise InvalidInput(
            f"--interval {interval} must be a number of seconds above 0 and at most "
            f"{MAX_INTERVAL:.0f}"
        )
    # Handle TERM before anything slow (a Vault login, say), so a stop is never lost.
    stopping = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    epoch = _epoch(epoch_text)
    store = _open(store_url, endpoint_url, config_path)
    watcher = Watcher(
        store, folder, epoch, os.environ.get("SLURM_JOB_ID"), interval=interval, stop=stopping
    )
    watcher.run(once=once)
    click.echo(f"published steps: {' '.join(map(str, watcher.published)) or 'none'}")


@main.command()
@_store_options
@_epoch_option
@click.option("--keep", required=True, type=int, help="how many newest publications to keep")
@_handled
def prune(
    store_url: str,
    endpoint_url: str | None,
    config_path: Path | None,
    epoch_text: str | None,
    keep: int,
) -> None:
    """Delete older publications; never the newest complete one, never a newer epoch's."""
    ceiling = _epoch(epoch_text)
    store = _open(store_url, endpoint_url, config_path)
    for publication in run_prune(store, ceiling, keep):
        click.echo(f"pruned {publication.name}")


@main.command()
@_store_options
@_handled
def probe(store_url: str, endpoint_url: str | None, config_path: Path | None) -> None:
    """Check the store can hold fenced publications; one line per check (exit 8 on failure)."""
    config = load_config(config_path)
    results = run_probe(lambda: open_store(store_url, config, endpoint_url), check_bucket)
    for result in results:
        click.echo(result.line())
    if not all(result.ok for result in results):
        sys.exit(EXIT_PROBE_FAILED)
