"""Upload and download throughput of a sharded checkpoint: `publish` against plain boto3.

    .venv/bin/python benchmarks/publish_throughput.py [--size 2GiB] [--shards 16]

Both sides move the same files to the same local moto S3 server in the same run. `publish`
numbers include what publishing costs on top of the bytes (sha256 of every file, the manifest,
the fenced commit; on download, the sha256 check); plain boto3 is `upload_file` /
`download_file` of each shard in turn with its default transfer settings.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from publish_bench_server import plain_client, s3_server  # noqa: E402

from publish.epoch import Epoch  # noqa: E402
from publish.resolve import resolve  # noqa: E402
from publish.save import save  # noqa: E402

UNITS = {"KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
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


def timed(action: object) -> float:
    """Seconds `action()` took."""
    start = time.perf_counter()
    action()  # type: ignore[operator]
    return time.perf_counter() - start


def main() -> None:
    """Run the comparison and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", default="2GiB", help="total checkpoint size (default 2GiB)")
    parser.add_argument("--shards", type=int, default=16)
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

            def plain_upload() -> None:
                for path in files:
                    client.upload_file(str(path), BUCKET, f"plain/{path.name}")

            def plain_download() -> None:
                (work / "plain").mkdir()
                for path in files:
                    client.download_file(BUCKET, f"plain/{path.name}",
                                         str(work / "plain" / path.name))

            base_up = timed(plain_upload)
            base_down = timed(plain_download)
            for path in files:
                client.delete_object(Bucket=BUCKET, Key=f"plain/{path.name}")
            with open(os.devnull, "w") as quiet:
                ours_up = timed(lambda: save(store, shards, 1, Epoch.of(1, 0), stream=quiet))
                ours_down = timed(lambda: resolve(store, Epoch.of(1, 0), into=work / "resume",
                                                  stream=quiet))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    mb = size / 1e6
    print(f"checkpoint: {size / 1024**3:.2f} GiB in {args.shards} shards, "
          f"local moto S3 server (own process), {os.cpu_count()} CPUs")
    print(f"{'operation':<10} {'publish MB/s':>13} {'boto3 MB/s':>11} {'ratio':>6}")
    for name, ours, base in (("upload", ours_up, base_up), ("download", ours_down, base_down)):
        print(f"{name:<10} {mb / ours:>13.1f} {mb / base:>11.1f} {base / ours:>6.2f}")


if __name__ == "__main__":
    main()
