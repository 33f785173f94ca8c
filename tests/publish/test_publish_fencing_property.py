"""The fencing rules as a property: any sequence of saves by executions of different epochs,
checked against a model after every step (on a checkpoint root, so each example is quick).

Model: a save by epoch e is refused (Fenced) when any committed publication has a higher
epoch; a save of an already committed (epoch, step) with other files is a CommitConflict;
otherwise it commits. Resolve at ceiling c returns the greatest committed (epoch, step) with
epoch <= c, or NothingToResume.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from publish.epoch import Epoch
from publish.errors import CommitConflict, Fenced, NothingToResume
from publish.posix_store import PosixStore
from publish.resolve import resolve
from publish.save import save

EPOCHS = [Epoch.of(n, r) for n in (1, 2, 3) for r in (0, 1, 2)]
saves = st.lists(
    st.tuples(st.sampled_from(EPOCHS), st.integers(min_value=0, max_value=4)),
    min_size=1,
    max_size=12,
)


@settings(max_examples=40, deadline=None)
@given(saves)
def test_no_sequence_of_saves_lets_an_older_epoch_outrank_a_newer_one(
    operations: list[tuple[Epoch, int]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = PosixStore(Path(tmp) / "root")
        committed: set[tuple[Epoch, int]] = set()
        for index, (epoch, step) in enumerate(operations):
            folder = Path(tmp) / f"save-{index}"
            folder.mkdir()
            (folder / "m").write_text(str(index))  # every save holds different files
            newest_epoch = max((e for e, _ in committed), default=None)
            if newest_epoch is not None and newest_epoch > epoch:
                with pytest.raises(Fenced):
                    save(store, folder, step, epoch)
            elif (epoch, step) in committed:
                with pytest.raises(CommitConflict):
                    save(store, folder, step, epoch)
            else:
                save(store, folder, step, epoch)
                committed.add((epoch, step))
            for ceiling in EPOCHS:
                expected = max(((e, s) for e, s in committed if e <= ceiling), default=None)
                if expected is None:
                    with pytest.raises(NothingToResume):
                        resolve(store, ceiling)
                else:
                    got = resolve(store, ceiling).manifest.publication
                    assert (got.epoch, got.step) == expected
