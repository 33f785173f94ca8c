"""The version of the decisions: what ``fold`` and ``next_steps`` decide, as one number.

A sweep's memo (``dispatch/supervise/memo.py``) remembers passes that were a lone ``Wait``, and
trusts them while the record and what find shows stay the same. That holds across releases
only while the decisions stay the same: an entry records what the core decided, not why. So
the memo is keyed on ``VERSION``, not on the core's source: a release that changes no decision
(a comment, a faster fold, a new module) keeps every entry, and no upgrade makes the next tick
read every record.

``tests/core/test_table_version.py`` keeps this number honest: it decides every case of a
corpus of records, finds and times that the simulator met (``tests/core/decision_corpus``),
and fails when a decision differs from the one recorded under ``VERSION``. Bump ``VERSION``
with any change that changes a decision, and record the corpus again (the test says how).

``WAITS_KEPT_SINCE`` is the oldest version whose waits this one keeps: every lone ``Wait`` that
offered nothing under such a version is a lone ``Wait`` offering nothing here too, until a wake
no sooner. A memo made under such a version is trusted as it is, and its entries lapse at their
own times, one to two hours apart by job; a memo of any other version is not trusted at all
(the table may now act where it waited). The same test checks the claim on the corpus,
against the decisions recorded under each kept version. Set it to ``VERSION`` when a change
makes a pass act, or wake sooner, where it waited.
"""

VERSION = 5
WAITS_KEPT_SINCE = 1


def keeps_waits_of(version: int) -> bool:
    """Whether a lone ``Wait`` decided under ``version`` is one under this version too."""
    return WAITS_KEPT_SINCE <= version <= VERSION
