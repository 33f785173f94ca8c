"""publish: fenced checkpoint publication for training jobs on compute nodes.

The library face of the `publish` command: open a store, then save, resolve or prune.
"""

from publish.config import Config, load_config
from publish.connect import open_store
from publish.epoch import Epoch
from publish.errors import (
    CommitConflict,
    CorruptPublication,
    CredentialsUnavailable,
    DestinationUnwritable,
    Fenced,
    InvalidInput,
    NothingToResume,
    PublishError,
    StoreUnavailable,
)
from publish.prune import prune
from publish.resolve import Resolved, resolve
from publish.save import save

__all__ = [
    "CommitConflict",
    "Config",
    "CorruptPublication",
    "CredentialsUnavailable",
    "DestinationUnwritable",
    "Epoch",
    "Fenced",
    "InvalidInput",
    "NothingToResume",
    "PublishError",
    "Resolved",
    "StoreUnavailable",
    "load_config",
    "open_store",
    "prune",
    "resolve",
    "save",
]
