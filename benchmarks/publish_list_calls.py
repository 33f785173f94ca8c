"""List requests per `publish resolve` against the length of the publication log.

    .venv/bin/python benchmarks/publish_list_calls.py [--counts 1,10,100,1000]

For each count the log holds that many publications of one epoch (the newest a real one, the
older ones log entries only, which is all listing sees), and one resolve runs with a counter
on the S3 client's ListObjectsV2 calls. The target is 1 at every size.
"""

from __future__ import annotations

import argparse
import logging
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from publish_bench_server import s3_server  # noqa: E402

from publish.epoch import Epoch  # noqa: E402
from publish.layout import PublicationId  # noqa: E402
from publish.resolve import resolve  # noqa: E402
from publish.s3_store import S3Location, S3Store  # noqa: E402
from publish.save import save  # noqa: E402

EPOCH = Epoch.of(1, 0)


def count_lists(count: int, url: str, base: S3Store, folder: Path) -> tuple[int, int]:
    """(list calls, other requests) of one resolve over a log of `count` publications."""
    store = S3Store(base.client, S3Location(base.location.bucket, f"log-{count}/"))
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(
            pool.map(
                lambda step: store.put_bytes(PublicationId(EPOCH, step).log_key, b"{}"),
                range(count - 1),
            )
        )
    save(store, folder, count, EPOCH)
    calls: dict[str, int] = {"list": 0, "other": 0}

    def tally(model: Any, **_: Any) -> None:
        calls["list" if model.name == "ListObjectsV2" else "other"] += 1

    store.client.meta.events.register("before-call.s3", tally)
    try:
        found = resolve(store, EPOCH)
    finally:
        store.client.meta.events.unregister("before-call.s3", tally)
    assert found.manifest.publication.step == count
    return calls["list"], calls["other"]


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--counts", default="1,10,100,1000")
    args = parser.parse_args()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    with TemporaryDirectory() as tmp, s3_server("lists") as (url, store):
        folder = Path(tmp) / "save"
        folder.mkdir()
        (folder / "model.bin").write_bytes(b"weights")
        print(f"{'publications':>12} {'list calls':>10} {'other calls':>11}")
        for count in (int(c) for c in args.counts.split(",")):
            lists, other = count_lists(count, url, store, folder)
            print(f"{count:>12} {lists:>10} {other:>11}")


if __name__ == "__main__":
    main()
