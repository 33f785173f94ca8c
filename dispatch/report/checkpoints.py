"""Which checkpoint store a job names, and its publications, read from publish's log.

The edge of the report: this module does the I/O. dispatch reads publish's log through the
``publish`` library (``publish`` never imports ``dispatch``). A job names its store the way its
executions find it: ``PUBLISH_STORE`` (and ``PUBLISH_ENDPOINT_URL``) in the job's environment,
which for a ``dispatch sbatch`` job is the submitter's environment kept with the job. A relative
folder store is relative to the job's folder. ``dispatch report --store`` overrides it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from dispatch.model.record import Header
from dispatch.report.figures import Publication


@dataclass(frozen=True)
class StoreName:
    """A checkpoint store: its URL and the S3 endpoint, if any."""

    url: str
    endpoint_url: str | None = None


def named_store(header: Header) -> StoreName | None:
    """The store the job's own environment names, or None."""
    spec = header.spec
    env = dict(spec.script.environment) if spec.script is not None else {}
    env.update(spec.env)
    url = env.get("PUBLISH_STORE", "").strip()
    if not url:
        return None
    folder = spec.script.directory if spec.script is not None else spec.working_directory
    if not url.startswith("s3://") and folder:
        url = os.path.join(folder, url)
    return StoreName(url, env.get("PUBLISH_ENDPOINT_URL") or None)


def publications(name: StoreName) -> list[Publication]:
    """Every complete publication in the store's log, oldest first; a damaged one is skipped.

    Credentials and proxy come from publish's own sources for the person reporting
    (``PUBLISH_CONFIG``, else the environment). Raises ``publish.PublishError`` when the store
    cannot be read.
    """
    import publish
    from publish.connect import check_bucket
    from publish.errors import CorruptPublication
    from publish.log import entries, read_committed

    given = os.environ.get("PUBLISH_CONFIG")
    config = publish.load_config(Path(given) if given else None)
    endpoint = name.endpoint_url or os.environ.get("PUBLISH_ENDPOINT_URL") or None
    store = publish.open_store(name.url, config, endpoint_url=endpoint)
    check_bucket(store)  # a missing root folder or bucket is unreadable, not an empty log
    found = []
    for pid in entries(store):
        try:
            manifest = read_committed(store, pid).manifest
            at = datetime.fromisoformat(manifest.time)
        except (CorruptPublication, ValueError):
            continue
        if at.tzinfo is None:
            continue  # publish writes times with their zone; one without is not its manifest
        found.append(Publication(at=at, epoch=pid.epoch.value, step=pid.step))
    return sorted(found)
