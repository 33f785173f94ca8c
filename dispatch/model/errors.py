"""The one error tree of dispatch: every error that leaves the library is one of these.

    DispatchError
     ├── NotFoundError          no such job, record or object
     ├── UnsupportedError       the backend cannot do this at all
     ├── InvalidError           the input (or a record) breaks a rule; names the field and value
     ├── RejectedError          well-formed, but refused by policy or by the backend
     │    └── RepeatedError     the record already carries it: nothing recorded
     ├── UnauthorizedError      the actor may not do this
     ├── UnreachableError       the backend or store did not answer
     ├── ReadOnlyError          the cluster was opened read-only
     ├── UnavailableError       the operation needs a part this cluster was opened without
     ├── OutcomeUnknownError    a call may or may not have taken effect
     ├── ConflictError          the record moved on, or another owner holds the job
     └── AlreadyRegisteredError an adapter name is taken

Adapters translate their foreign errors into this tree in one place each, so callers only
ever catch these. ``str(err)`` reads ``dispatch: <kind>: <what was refused and why>``.
"""

from __future__ import annotations


class DispatchError(Exception):
    """Base of every error dispatch raises."""

    kind = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"dispatch: {self.kind}: {self.message}"


def message_of(err: BaseException) -> str:
    """What an error says, without the ``dispatch: <kind>:`` prefix a ``DispatchError`` prints
    with: for a line that already names what failed."""
    return err.message if isinstance(err, DispatchError) else str(err)


class NotFoundError(DispatchError):
    """The job, record or object does not exist."""

    kind = "not found"


class UnsupportedError(DispatchError):
    """The backend offers no way to do this."""

    kind = "unsupported"


class InvalidError(DispatchError, ValueError):
    """Input or a stored record breaks a rule of the contract."""

    kind = "invalid"


class RejectedError(DispatchError):
    """A valid request that policy or the backend refuses."""

    kind = "rejected"


class RepeatedError(RejectedError):
    """A person's request the record already carries (the same answer twice, a cancel already
    committed): nothing is recorded. ``holds`` says whether what was asked for already holds,
    so a script may go on (the CLI exits 0), or conflicts with what is recorded (exit 1)."""

    kind = "already recorded"

    def __init__(self, message: str, *, holds: bool) -> None:
        super().__init__(message)
        self.holds = holds


class UnauthorizedError(DispatchError):
    """The actor is not allowed to do this."""

    kind = "unauthorized"


class UnreachableError(DispatchError):
    """The backend or the store could not be reached."""

    kind = "unreachable"


class ReadOnlyError(DispatchError):
    """A write was asked of a read-only cluster."""

    kind = "read-only"


class UnavailableError(DispatchError):
    """The operation needs a part (a store, a capability) this cluster does not have."""

    kind = "unavailable"


class OutcomeUnknownError(DispatchError):
    """A call whose effect may or may not have happened; never to be read as a failure."""

    kind = "outcome unknown"


class ConflictError(DispatchError):
    """A conditional commit lost: the record moved on, or another owner holds the job."""

    kind = "conflict"


class AlreadyRegisteredError(DispatchError):
    """An adapter is already registered under that name."""

    kind = "already registered"


class LaunchRefusedError(RejectedError):
    """The scheduler refused to create a launch's object.

    ``cause`` is the text of the cause kind (``launch-failed`` or ``no-capacity``), kept as
    text here so that this module imports nothing.
    """

    def __init__(self, message: str, cause: str = "launch-failed") -> None:
        super().__init__(message)
        self.cause = cause
