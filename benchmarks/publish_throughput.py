"""Upload throughput of a checkpoint: `publish save` against plain boto3 `upload_file`.

    .venv/bin/python benchmarks/publish_throughput.py [--shards 4] [--shard-size 256MiB]
        [--pairs 5] [--no-bound]

The checkpoint has the shape of a real one: a few large shards (random bytes, so nothing
compresses) and eight small metadata files (configs, tokenizer, RNG states: 1 KiB to 2 MiB).
Every side uploads the same files to the same local S3 server (moto_server, its own process,
authentication off), one after the other, in an order that rotates from pair to pair so that
drift on a shared machine falls on each side alike:

* boto3: what a user writes, `upload_file` of each file in turn, default `TransferConfig`;
* publish: `publish.save`, which also hashes every file (sha256, one read pass with the
  upload), writes the manifest and makes the fenced commit;
* bound: the lightest client there is, one unsigned PUT per file (4 at once) straight from
  the file with `http.client`: no hash, no checksum, no signature, and the request shape this
  server handles most cheaply (moto joins multipart parts in memory). What it reaches over
  boto3 is about what this server lets any client reach.

For each side it prints the median time and throughput, the median of the pair-by-pair ratios
to boto3 next to issue 17's goal (publish at least 1.5x boto3), and where the CPU went: the
server's and the client's CPU seconds per GiB and how busy the machine's cores were.
"""

from __future__ import annotations

import argparse
import http.client
import logging
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from publish_bench_server import cpu_seconds, plain_client, s3_server_process  # noqa: E402

from publish.epoch import Epoch  # noqa: E402
from publish.s3_store import S3Store  # noqa: E402
from publish.save import save  # noqa: E402

UNITS = {"KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
GOAL_UPLOAD_RATIO = 1.5  # issue 17
BUCKET = "bench"
# Metadata files saved beside the shards by common trainers (Hugging Face's Trainer, say).
METADATA = {
    "config.json": 2 * 1024,
    "generation_config.json": 1024,
    "trainer_state.json": 8 * 1024,
    "scheduler.pt": 1024,
    "tokenizer.json": 2 * 1024**2,
    "rng_state_0.pth": 16 * 1024,
    "rng_state_1.pth": 16 * 1024,
    "optimizer_meta.json": 4 * 1024,
}
BOUND_CONNECTIONS = 4
SEND_BLOCK = 1024 * 1024


def parse_size(text: str) -> int:
    """'2GiB', '256MiB' or a byte count."""
    for unit, factor in UNITS.items():
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * factor)
    return int(text)


def write_checkpoint(folder: Path, shards: int, shard_size: int) -> list[Path]:
    """The shards (random bytes written in 8 MiB blocks) and the metadata files."""
    folder.mkdir(parents=True)
    block = os.urandom(8 * 1024 * 1024)
    for index in range(shards):
        with (folder / f"model-{index + 1:05d}-of-{shards:05d}.safetensors").open("wb") as out:
            left = shard_size
            while left:
                out.write(block[: min(left, len(block))])
                left -= min(left, len(block))
    for name, size in METADATA.items():
        (folder / name).write_bytes(os.urandom(size))
    return sorted(folder.iterdir())


def busy_jiffies() -> tuple[int, int]:
    """(busy, total) clock ticks of all cores since boot, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle and iowait
    return sum(values) - idle, sum(values)


@dataclass
class Run:
    """One side's upload: wall seconds and where the CPU went meanwhile."""

    seconds: float
    server_cpu: float
    client_cpu: float
    machine_busy: float  # share of all cores' time spent busy


def measured(action: Callable[[], object], server_pid: int) -> Run:
    """Run `action` and measure it."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    server = cpu_seconds(server_pid)
    busy, total = busy_jiffies()
    start = time.perf_counter()
    action()
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    busy_after, total_after = busy_jiffies()
    return Run(
        seconds,
        cpu_seconds(server_pid) - server,
        after.ru_utime + after.ru_stime - own.ru_utime - own.ru_stime,
        (busy_after - busy) / max(total_after - total, 1),
    )


def plain_upload(client: Any, files: list[Path]) -> None:
    """The baseline: boto3 `upload_file` of each file in turn, default settings."""
    for path in files:
        client.upload_file(str(path), BUCKET, f"plain/{path.name}")


def bound_upload(url: str, files: list[Path]) -> None:
    """One unsigned PUT per file, straight from the file, a few connections at once."""
    parts = urlsplit(url)

    def put(path: Path) -> None:
        connection = http.client.HTTPConnection(
            parts.hostname or "", parts.port, blocksize=SEND_BLOCK
        )
        try:
            with path.open("rb") as body:
                connection.request(
                    "PUT",
                    f"/{BUCKET}/bound/{path.name}",
                    body=body,
                    headers={"Content-Length": str(path.stat().st_size)},
                )
                reply = connection.getresponse()
                reply.read()
                if reply.status != 200:
                    raise RuntimeError(f"PUT {path.name}: HTTP {reply.status}")
        finally:
            connection.close()

    with ThreadPoolExecutor(BOUND_CONNECTIONS) as pool:
        list(pool.map(put, files))


def empty_bucket(client: Any) -> None:
    """Delete every object, so the server holds one checkpoint's worth at most."""
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        for item in page.get("Contents", []):
            client.delete_object(Bucket=BUCKET, Key=item["Key"])


def main() -> None:
    """Run the pairs and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--shard-size", default="256MiB")
    parser.add_argument("--pairs", type=int, default=5, help="rounds of every side")
    parser.add_argument("--no-bound", action="store_true", help="skip the lightest client")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    work = Path(tempfile.mkdtemp(prefix="publish-bench-"))
    sides = ["boto3", "publish"] + ([] if args.no_bound else ["bound"])
    runs: dict[str, list[Run]] = {side: [] for side in sides}
    try:
        folder = work / "save"
        files = write_checkpoint(folder, args.shards, parse_size(args.shard_size))
        size = sum(p.stat().st_size for p in files)
        with s3_server_process(BUCKET) as (url, store, pid):
            client = plain_client(url)
            actions: dict[str, Callable[[int], object]] = {
                "boto3": lambda _: plain_upload(client, files),
                "publish": lambda step: _save(store, folder, step),
                "bound": lambda _: bound_upload(url, files),
            }
            for round_ in range(args.pairs):
                shift = round_ % len(sides)
                for side in sides[shift:] + sides[:shift]:
                    runs[side].append(measured(partial(actions[side], round_ + 1), pid))
                    empty_bucket(client)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(runs, size, args)


def _save(store: S3Store, folder: Path, step: int) -> None:
    with open(os.devnull, "w") as quiet:
        save(store, folder, step, Epoch.of(1, 0), None, quiet)


def report(runs: dict[str, list[Run]], size: int, args: argparse.Namespace) -> None:
    """The summary: medians, pair ratios to boto3, the goal, and where the CPU went."""
    gib = size / 1024**3
    print(
        f"checkpoint: {gib:.2f} GiB = {args.shards} shards of {args.shard_size} + "
        f"{len(METADATA)} metadata files; {args.pairs} rounds, side order rotating; "
        f"moto_server (own process) on 127.0.0.1; {os.cpu_count()} CPUs"
    )
    print(
        f"{'side':<8} {'median s':>9} {'MB/s':>7} {'x boto3 (median of pairs)':>26} "
        f"{'server CPU s/GiB':>17} {'client CPU s/GiB':>17} {'cores busy':>11}"
    )
    base = runs["boto3"]
    for side, side_runs in runs.items():
        ratio = statistics.median(
            b.seconds / r.seconds for b, r in zip(base, side_runs, strict=True)
        )
        seconds = statistics.median(r.seconds for r in side_runs)
        print(
            f"{side:<8} {seconds:>9.2f} {size / 1e6 / seconds:>7.1f} {ratio:>26.2f} "
            f"{statistics.median(r.server_cpu for r in side_runs) / gib:>17.2f} "
            f"{statistics.median(r.client_cpu for r in side_runs) / gib:>17.2f} "
            f"{statistics.median(r.machine_busy for r in side_runs):>10.0%}"
        )
    pairs = [b.seconds / r.seconds for b, r in zip(base, runs["publish"], strict=True)]
    verdict = "met" if statistics.median(pairs) >= GOAL_UPLOAD_RATIO else "not met"
    print(
        f"goal: publish upload >= {GOAL_UPLOAD_RATIO:.1f}x boto3 upload_file (median of pairs); "
        f"figure: {statistics.median(pairs):.2f}x; {verdict}"
    )
    print("publish / boto3 per pair: " + " ".join(f"{p:.2f}" for p in pairs))
    if "bound" in runs:
        bound = statistics.median(
            b.seconds / r.seconds for b, r in zip(base, runs["bound"], strict=True)
        )
        print(
            f"bound: the lightest client (no hash, checksum or signature) reaches {bound:.2f}x "
            f"boto3 on this server, against the goal's {GOAL_UPLOAD_RATIO:.1f}x"
        )


if __name__ == "__main__":
    main()
