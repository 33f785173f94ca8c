"""Upload and download throughput of a sharded checkpoint: `publish` against plain boto3.

    .venv/bin/python benchmarks/publish_throughput.py [--size 2GiB] [--shards 16] [--repeat 1]

Both sides move the same files to the same local moto S3 server in the same run. `publish`
numbers include what publishing costs on top of the bytes (sha256 of every file, the manifest,
the fenced commit; on download, the sha256 check); plain boto3 is `upload_file` /
`download_file` of each shard in turn with its default transfer settings. With `--repeat N`
the two sides alternate N times; the best time of each is shown, and the median of the
pair-by-pair ratios against issue 17's goal for upload (publish at least 1.5x boto3).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from publish_bench_server import plain_client, s3_server  # noqa: E402

from publish.epoch import Epoch  # noqa: E402
from publish.resolve import resolve  # noqa: E402
from publish.save import save  # noqa: E402

UNITS = {"KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
GOAL_UPLOAD_RATIO = 1.5
BUCKET = "bench"


def parse_size(text: str) -> int:
    """'2GiB', '256MiB' or a byte count."""
    for unit, factor in UNITS.items():
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * factor)
    return int(text)


def write_shards(folder: Path, total: int, shards: int) -> None:
    """Shards of random bytes (incompressible), written in 8 MiB blocks."""
    folder.mkdir(parents=True)
    each = total // shards
    block = os.urandom(8 * 1024 * 1024)
    for index in range(shards):
        with (folder / f"shard-{index:03d}.bin").open("wb") as handle:
            left = each
            while left:
                handle.write(block[: min(left, len(block))])
                left -= min(left, len(block))


def timed(action: Callable[..., object], *args: object) -> float:
    """Seconds `action(*args)` took."""
    start = time.perf_counter()
    action(*args)
    return time.perf_counter() - start


def plain_upload(client: Any, files: list[Path]) -> None:
    """The baseline upload: boto3 `upload_file` of each shard in turn."""
    for path in files:
        client.upload_file(str(path), BUCKET, f"plain/{path.name}")


def plain_download(client: Any, files: list[Path], into: Path) -> None:
    """The baseline download: boto3 `download_file` of each shard in turn."""
    into.mkdir()
    for path in files:
        client.download_file(BUCKET, f"plain/{path.name}", str(into / path.name))


def main() -> None:
    """Run the comparison and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", default="2GiB", help="total checkpoint size (default 2GiB)")
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=1, help="runs per side; best is shown")
    args = parser.parse_args()
    total = parse_size(args.size)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)

    work = Path(tempfile.mkdtemp(prefix="publish-bench-"))
    try:
        shards = work / "save"
        write_shards(shards, total, args.shards)
        size = sum(p.stat().st_size for p in shards.iterdir())
        files = sorted(shards.iterdir())
        with s3_server(BUCKET) as (url, store):
            client = plain_client(url)
            best = {"base_up": float("inf"), "base_down": float("inf"),
                    "ours_up": float("inf"), "ours_down": float("inf")}
            pairs: dict[str, list[float]] = {"upload": [], "download": []}
            for run in range(args.repeat):
                plain_dir = work / f"plain-{run}"
                last_base_up = timed(plain_upload, client, files)
                last_base_down = timed(plain_download, client, files, plain_dir)
                best["base_up"] = min(best["base_up"], last_base_up)
                best["base_down"] = min(best["base_down"], last_base_down)
                shutil.rmtree(plain_dir)
                for path in files:
                    client.delete_object(Bucket=BUCKET, Key=f"plain/{path.name}")
                resume = work / f"resume-{run}"
                with open(os.devnull, "w") as quiet:
                    up = timed(save, store, shards, run + 1, Epoch.of(1, 0), None, quiet)
                    down = timed(resolve, store, Epoch.of(1, 0), resume, quiet)
                best["ours_up"] = min(best["ours_up"], up)
                best["ours_down"] = min(best["ours_down"], down)
                pairs["upload"].append(last_base_up / up)
                pairs["download"].append(last_base_down / down)
                shutil.rmtree(resume)
            base_up, base_down = best["base_up"], best["base_down"]
            ours_up, ours_down = best["ours_up"], best["ours_down"]
    finally:
        shutil.rmtree(work, ignore_errors=True)

    mb = size / 1e6
    print(f"checkpoint: {size / 1024**3:.2f} GiB in {args.shards} shards, best of "
          f"{args.repeat}, local moto S3 server (own process), {os.cpu_count()} CPUs")
    print(f"{'operation':<10} {'publish MB/s':>13} {'boto3 MB/s':>11} {'ratio':>6} "
          f"{'median pair ratio':>18} {'goal':>5}")
    for name, ours, base in (("upload", ours_up, base_up), ("download", ours_down, base_down)):
        median = statistics.median(pairs[name])
        goal = f"{GOAL_UPLOAD_RATIO:>5.1f}" if name == "upload" else f"{'':>5}"
        verdict = ""
        if name == "upload":
            verdict = "  met" if median >= GOAL_UPLOAD_RATIO else "  not met"
        print(f"{name:<10} {mb / ours:>13.1f} {mb / base:>11.1f} {base / ours:>6.2f} "
              f"{median:>18.2f} {goal}{verdict}")


if __name__ == "__main__":
    main()
