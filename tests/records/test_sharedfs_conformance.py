"""The Records contract (every test of test_store_conformance.py) on shared filesystems, as
two login nodes see them: the store works through one mount of the volume, and everything it
checks afresh is read through the other mount, a second client of the same volume.

Real parts throughout: JuiceFS (metadata in Redis behind a 1 ms round trip) and GlusterFS,
each mounted twice by ``slurm_helpers/sharedfs``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import test_store_conformance as contract
from live_sharedfs import SHARED, bed, shared_folder
from test_store_conformance import Subject

from dispatch.records.contract import Records
from dispatch.records.file import FileRecords

pytestmark = pytest.mark.sharedfs

# Every test of the contract, collected here again with this module's ``subject``.
globals().update({n: f for n, f in vars(contract).items() if n.startswith("test_")})


@pytest.fixture(params=SHARED)
def subject(request: pytest.FixtureRequest) -> Iterator[Subject]:
    with shared_folder(bed(), request.param) as (a, b):
        yield Subject(FileRecords(a / "ledger"), lambda: FileRecords(b / "ledger"))


@pytest.fixture
def store(subject: Subject) -> Records:
    return subject.store
