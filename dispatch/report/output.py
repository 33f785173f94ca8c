"""Writing a file the user names (``--metrics``, ``--svg``), safely in a folder others share.

The text goes to a temporary name in the same folder (created exclusively, so never through a
link someone planted), is flushed, given an explicit mode, and renamed over the target: a
symbolic link at the target is replaced, never followed, and no reader sees half a file. A
target that belongs to another user is refused rather than replaced or written into.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from dispatch.model.errors import RejectedError

# Readable by all, as node_exporter's textfile collector and a browser need.
MODE = 0o644


def write_file(path: Path, text: str, what: str) -> None:
    """Write ``text`` to ``path`` (``what`` names the file in a refusal)."""
    _check_target(path, what)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fchmod(out.fileno(), MODE)
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _check_target(path: Path, what: str) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if st.st_uid != os.geteuid():
        raise RejectedError(
            f"{what} {path} belongs to another user (uid {st.st_uid}); not replacing it: "
            "write to a file of your own"
        )
    if stat.S_ISDIR(st.st_mode):
        raise RejectedError(f"{what} {path} is a folder; name a file")
