"""Rules of resolving what to resume from."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from publish.epoch import Epoch
from publish.errors import InvalidInput, NothingToResume
from publish.layout import PublicationId
from publish.log import LogEntry
from publish.resolve import resolve
from publish.save import save
from publish.store import Store

SaveMaker = Callable[..., Path]


def _entry(store: Store, epoch: Epoch, step: int) -> LogEntry:
    publication = PublicationId(epoch, step)
    return LogEntry.from_json(store.get_bytes(publication.log_key), publication)


def test_resolve_picks_the_newest_publication_not_above_the_callers_epoch(
    store: Store, make_save: SaveMaker
) -> None:
    save(store, make_save(), 5, Epoch.of(1, 0))
    save(store, make_save(), 9, Epoch.of(1, 0))
    save(store, make_save(), 2, Epoch.of(1, 1))
    save(store, make_save(), 50, Epoch.of(2, 0))
    assert resolve(store, Epoch.of(1, 1)).manifest.publication == PublicationId(Epoch.of(1, 1), 2)
    assert resolve(store, Epoch.of(1, 0)).manifest.publication.step == 9
    assert resolve(store, Epoch.of(7, 0)).manifest.publication.step == 50


def test_a_newer_epoch_outranks_a_higher_step_of_an_older_one(
    store: Store, make_save: SaveMaker
) -> None:
    save(store, make_save(), 1000, Epoch.of(1, 0))
    save(store, make_save(), 10, Epoch.of(1, 1))
    assert resolve(store, Epoch.of(1, 1)).manifest.publication.step == 10


def test_nothing_to_resume_from_when_only_newer_epochs_published(
    store: Store, make_save: SaveMaker
) -> None:
    save(store, make_save(), 1, Epoch.of(2, 0))
    with pytest.raises(NothingToResume):
        resolve(store, Epoch.of(1, 5))


@pytest.mark.parametrize("damage", ["corrupt", "truncated", "missing"])
def test_damaged_manifest_falls_back_to_the_previous_complete_publication(
    store: Store, make_save: SaveMaker, damage: str
) -> None:
    save(store, make_save({"m": b"old"}), 1, Epoch.of(1, 0))
    save(store, make_save({"m": b"new"}), 2, Epoch.of(1, 0))
    key = _entry(store, Epoch.of(1, 0), 2).manifest_key
    raw = store.get_bytes(key)
    if damage == "corrupt":
        store.put_bytes(key, raw.replace(b'"step": 2', b'"step": 3'))
    elif damage == "truncated":
        store.put_bytes(key, raw[: len(raw) // 2])
    else:
        store.delete(key)
    assert resolve(store, Epoch.of(1, 0)).manifest.publication.step == 1


def test_corrupt_log_entry_falls_back_to_the_previous_publication(
    store: Store, make_save: SaveMaker
) -> None:
    save(store, make_save(), 1, Epoch.of(1, 0))
    save(store, make_save(), 2, Epoch.of(1, 0))
    store.put_bytes(PublicationId(Epoch.of(1, 0), 2).log_key, b"{not json")
    assert resolve(store, Epoch.of(1, 0)).manifest.publication.step == 1


def test_manifest_claiming_a_path_outside_the_publication_is_not_resumed_from(
    store: Store, make_save: SaveMaker, tmp_path: Path
) -> None:
    """A manifest rewritten to hold '..' or an absolute path is refused even with a valid hash."""
    import hashlib

    save(store, make_save(), 1, Epoch.of(1, 0))
    save(store, make_save(), 2, Epoch.of(1, 0))
    for bad in ("../../escape", "/etc/passwd"):
        entry = _entry(store, Epoch.of(1, 0), 2)
        body = json.loads(store.get_bytes(entry.manifest_key))
        body["files"][0]["path"] = bad
        raw = json.dumps(body).encode()
        store.put_bytes(entry.manifest_key, raw)
        forged = LogEntry(entry.publication, entry.upload, hashlib.sha256(raw).hexdigest())
        store.put_bytes(entry.publication.log_key, forged.to_json())
        found = resolve(store, Epoch.of(1, 0), into=tmp_path / f"out{len(bad)}")
        assert found.manifest.publication.step == 1
    assert not (tmp_path / "escape").exists()


def test_damaged_data_file_falls_back_when_downloading(
    store: Store, make_save: SaveMaker, tmp_path: Path
) -> None:
    save(store, make_save({"m": b"old"}), 1, Epoch.of(1, 0))
    save(store, make_save({"m": b"new"}), 2, Epoch.of(1, 0))
    entry = _entry(store, Epoch.of(1, 0), 2)
    store.put_bytes(entry.data_prefix + "m", b"bit rot")
    found = resolve(store, Epoch.of(1, 0), into=tmp_path / "resume")
    assert found.manifest.publication.step == 1
    assert (tmp_path / "resume" / "m").read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".resume")) == []


def test_resolve_into_a_folder_that_holds_files_is_refused(
    store: Store, make_save: SaveMaker, tmp_path: Path
) -> None:
    save(store, make_save(), 1, Epoch.of(1, 0))
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("keep me")
    with pytest.raises(InvalidInput, match="empty"):
        resolve(store, Epoch.of(1, 0), into=tmp_path / "busy")
    assert (tmp_path / "busy" / "x").read_text() == "keep me"


def test_posix_resolve_without_into_names_the_committed_folder(
    tmp_path: Path, make_save: SaveMaker
) -> None:
    from publish.posix_store import PosixStore

    posix = PosixStore(tmp_path / "root")
    save(posix, make_save({"m": b"x"}), 1, Epoch.of(1, 0))
    found = resolve(posix, Epoch.of(1, 0))
    assert (Path(found.location) / "m").read_bytes() == b"x"


def test_resolving_again_into_a_folder_holding_that_publication_uses_it(
    store: Store, make_save: SaveMaker, tmp_path: Path
) -> None:
    save(store, make_save({"model.bin": b"w" * 1000}), 3, Epoch.of(1, 0))
    into = tmp_path / "resume"
    first = resolve(store, Epoch.of(1, 0), into=into)
    again = resolve(store, Epoch.of(1, 0), into=into)
    assert first == again
    assert (into / "model.bin").read_bytes() == b"w" * 1000
    assert (into / ".publication").read_text() == f"{first.manifest.publication.name}\n"


def test_a_folder_holding_another_publication_is_refused_and_kept(
    store: Store, make_save: SaveMaker, tmp_path: Path
) -> None:
    save(store, make_save(), 3, Epoch.of(1, 0))
    into = tmp_path / "resume"
    resolve(store, Epoch.of(1, 0), into=into)
    save(store, make_save(), 4, Epoch.of(1, 0))
    with pytest.raises(InvalidInput, match="holds another publication"):
        resolve(store, Epoch.of(1, 0), into=into)
    assert (into / "model.bin").read_bytes() == b"weights"


def test_resolvers_sharing_one_folder_all_succeed_and_leave_no_staging(
    tmp_path: Path, make_save: SaveMaker
) -> None:
    """Real processes, as the nodes of one job run `publish resolve --into` on a shared disk."""
    import subprocess
    import sys

    from publish.posix_store import PosixStore

    root = tmp_path / "root"
    save(PosixStore(root), make_save({f"shard-{i}": bytes(200_000) for i in range(8)}), 7,
         Epoch.of(1, 0))  # fmt: skip
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PUBLISH_STORE": str(root),
           "DISPATCH_EPOCH": "1000000", "HOME": str(tmp_path)}  # fmt: skip
    for round_ in range(5):
        into = tmp_path / f"node-shared-{round_}" / "resume"
        runs = [
            subprocess.Popen(["publish", "resolve", "--json", "--into", str(into)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(4)
        ]  # fmt: skip
        done = [(p.wait(60), *p.communicate()) for p in runs]
        assert [code for code, _, _ in done] == [0, 0, 0, 0], [err for _, _, err in done]
        assert all(json.loads(out)["step"] == 7 for _, out, _ in done)
        assert sorted(p.name for p in into.parent.iterdir()) == ["resume"]
        assert len(list(into.iterdir())) == 9


# Issue 12, finding 7: resolve without --into checks that the data it names is there.


@pytest.mark.parametrize("damage", ["missing", "wrong size"])
def test_resolve_without_into_refuses_a_publication_whose_data_is_missing(
    store: Store, make_save: SaveMaker, damage: str
) -> None:
    save(store, make_save({"m": b"old"}), 1, Epoch.of(1, 0))
    save(store, make_save({"m": b"new", "n": b"x"}), 2, Epoch.of(1, 0))
    entry = _entry(store, Epoch.of(1, 0), 2)
    if damage == "missing":
        store.delete(entry.data_prefix + "n")
    else:
        store.put_bytes(entry.data_prefix + "n", b"longer")
    found = resolve(store, Epoch.of(1, 0))
    assert found.manifest.publication.step == 1
    assert found.location.rstrip("/").endswith(_entry(store, Epoch.of(1, 0), 1).data_prefix[:-1])


def test_a_symlink_planted_in_a_folder_store_is_never_followed(
    tmp_path: Path, make_save: SaveMaker
) -> None:
    from publish.posix_store import PosixStore

    posix = PosixStore(tmp_path / "root")
    save(posix, make_save({"m": b"old"}), 1, Epoch.of(1, 0))
    save(posix, make_save({"m": b"new"}), 2, Epoch.of(1, 0))
    planted = tmp_path / "root" / _entry(posix, Epoch.of(1, 0), 2).data_prefix / "m"
    (tmp_path / "secret").write_bytes(b"SEC")  # the size the manifest expects
    planted.unlink()
    planted.symlink_to(tmp_path / "secret")
    assert resolve(posix, Epoch.of(1, 0)).manifest.publication.step == 1
    found = resolve(posix, Epoch.of(1, 0), into=tmp_path / "resume")
    assert found.manifest.publication.step == 1
    assert (tmp_path / "resume" / "m").read_bytes() == b"old"


@pytest.mark.parametrize("into", [False, True], ids=["in-place", "into"])
def test_a_manifest_path_holding_a_nul_byte_is_skipped_not_a_crash(
    store: Store, make_save: SaveMaker, tmp_path: Path, into: bool
) -> None:
    """A manifest rewritten (with a matching hash) to name ``m\\0x`` crashed ``resolve`` with
    ``ValueError: embedded null byte``; that publication is skipped, as any damaged one is."""
    import hashlib

    save(store, make_save(), 1, Epoch.of(1, 0))
    save(store, make_save(), 2, Epoch.of(1, 0))
    entry = _entry(store, Epoch.of(1, 0), 2)
    body = json.loads(store.get_bytes(entry.manifest_key))
    body["files"][0]["path"] = "m\0x"
    raw = json.dumps(body).encode()
    store.put_bytes(entry.manifest_key, raw)
    forged = LogEntry(entry.publication, entry.upload, hashlib.sha256(raw).hexdigest())
    store.put_bytes(entry.publication.log_key, forged.to_json())
    found = resolve(store, Epoch.of(1, 0), into=tmp_path / "out" if into else None)
    assert found.manifest.publication.step == 1
