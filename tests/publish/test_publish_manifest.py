"""Rules of the manifest: what a save may contain and what a stored manifest may claim."""

from __future__ import annotations

import pytest

from publish.epoch import Epoch
from publish.errors import CorruptPublication, InvalidInput
from publish.layout import PublicationId
from publish.manifest import FileEntry, Manifest, check_relative_path

ID = PublicationId(Epoch.of(1, 0), 3)


@pytest.mark.parametrize("path", ["../x", "a/../../x", "/abs", "", "a//b", "./a", "a\\b"])
def test_manifest_path_that_is_absolute_or_climbs_out_is_refused(path: str) -> None:
    with pytest.raises(InvalidInput):
        check_relative_path(path)


def test_stored_manifest_with_a_dotdot_path_is_corrupt() -> None:
    manifest = Manifest(ID, (FileEntry("../evil", 1, "0" * 64),), "t", "h", None)
    with pytest.raises(CorruptPublication, match="must not contain"):
        Manifest.from_json(manifest.to_json(), ID)


def test_stored_manifest_of_another_publication_is_corrupt() -> None:
    manifest = Manifest(ID, (FileEntry("a", 1, "0" * 64),), "t", "h", None)
    with pytest.raises(CorruptPublication, match="names"):
        Manifest.from_json(manifest.to_json(), PublicationId(Epoch.of(1, 0), 4))


def test_manifest_round_trips_through_json() -> None:
    manifest = Manifest(
        ID, (FileEntry("a/b", 5, "f" * 64),), "2026-01-01T00:00:00+00:00", "node1", "77"
    )
    assert Manifest.from_json(manifest.to_json(), ID) == manifest
