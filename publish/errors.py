"""The errors `publish` raises, each carrying the exit code the CLI turns it into.

    PublishError                 exit 1  anything not listed below
    ├── InvalidInput             exit 5  a save, step, epoch or manifest path that is refused
    ├── NothingToResume          exit 3  no complete publication at or below the caller's epoch
    ├── Fenced                   exit 4  a newer epoch has already published: the caller is a zombie
    ├── CommitConflict           exit 7  the same (epoch, step) was committed with other content
    ├── CorruptPublication       exit 1  a manifest or data object does not match what was committed
    ├── DestinationUnwritable    exit 1  a download cannot be written locally (a full disk, say)
    ├── CredentialsUnavailable   exit 6  no credential source yielded credentials
    └── StoreUnavailable         exit 6  the store could not be reached or refused the request

The CLI prints the message on one line; a message never contains a secret.
"""

from __future__ import annotations


class PublishError(Exception):
    """Base of every error `publish` raises on purpose."""

    exit_code = 1


class InvalidInput(PublishError):
    """A save folder, step, epoch or manifest that `publish` refuses to use."""

    exit_code = 5


class NothingToResume(PublishError):
    """No complete publication exists at or below the caller's epoch."""

    exit_code = 3


class Fenced(PublishError):
    """A newer epoch has already published, so this execution must not publish."""

    exit_code = 4


class CommitConflict(PublishError):
    """The log entry for this (epoch, step) already exists with different content."""

    exit_code = 7


class CorruptPublication(PublishError):
    """A committed publication whose manifest or data does not verify."""

    exit_code = 1


class DestinationUnwritable(PublishError):
    """A downloaded file cannot be written where it was asked to go (a full local disk, say)."""

    exit_code = 1


class CredentialsUnavailable(PublishError):
    """Every configured credential source failed; the message names each and why."""

    exit_code = 6


class StoreUnavailable(PublishError):
    """The store could not be reached, or refused a request for a reason other than a conflict."""

    exit_code = 6
