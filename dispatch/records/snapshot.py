"""The snapshot of a job's record: a cache of the View up to some revision.

Its content is the View's JSON joined from the revision files' own bytes, so a reader checks
it byte for byte against every revision file it stands for and uses it only when it is exactly
them: one parse of the snapshot then replaces one parse per revision. A snapshot that is not
exactly its files is never used (``docs/ledger.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from dispatch.model.errors import InvalidError
from dispatch.model.record import Header, View


def join(header: bytes, commits: Sequence[bytes]) -> bytes:
    """A snapshot's content: the View's JSON, from the bytes of revision 1 and the commits."""
    return b'{"header":' + header + b',"commits":[' + b",".join(commits) + b"]}"


def dump(header: bytes, view: View, raw: Mapping[int, bytes]) -> bytes:
    """The snapshot of ``view``: ``header``, the bytes of revision 1, and each commit's bytes
    from ``raw`` where known (dumping a long View whole costs more than the commit that makes a
    snapshot due)."""
    return join(header, [raw.get(c.revision) or c.model_dump_json().encode() for c in view.commits])


def check(
    data: bytes, header: Header, last: int, raw_of: Callable[[int], bytes]
) -> tuple[View, dict[int, bytes]]:
    """The View a snapshot holds and the revision bytes it was checked against.

    ``raw_of(r)`` gives the bytes of revision file ``r``; ``InvalidError`` says why the
    snapshot is not exactly the revision files up to its own revision (at most ``last``).
    """
    view: View = View.load(data)
    if view.revision > last:
        raise InvalidError(f"it is at revision {view.revision}, past the last file")
    if any(c.revision != r for r, c in enumerate(view.commits, start=2)):
        raise InvalidError("its revisions are not numbered 2, 3, ... in order")
    raw = {r: raw_of(r) for r in range(1, view.revision + 1)}
    if data != join(raw[1], [raw[r] for r in range(2, view.revision + 1)]):
        raise InvalidError("it differs from the revision files it stands for")
    if view.header != header:
        raise InvalidError("its header differs from revision 1")
    return view, raw
