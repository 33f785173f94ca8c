"""Reading a file a person names (a config, a script): never hanging on it, never unbounded.

A FIFO or a device opened the ordinary way blocks until someone writes to it, or never ends
(``/dev/zero``): the file is opened without blocking, refused unless it is a regular file, and
refused when larger than the limit its caller gives, each in one line naming the path.
"""

from __future__ import annotations

import os
import stat

from dispatch.model.errors import InvalidError


def read_regular(
    path: str | os.PathLike[str], what: str, limit: int
) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file at ``path`` (``what`` names it in a refusal) and its
    status; ``InvalidError`` for anything else or anything over ``limit`` bytes. OSError
    (no such file, permission denied) is the caller's to word."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise InvalidError(f"{what} {os.fspath(path)} is a folder; give a file")
        if not stat.S_ISREG(st.st_mode):
            raise InvalidError(f"{what} {os.fspath(path)} is not a regular file; give a file")
        if st.st_size > limit:
            raise InvalidError(
                f"{what} {os.fspath(path)} is {st.st_size} bytes, more than the {limit} allowed"
            )
        chunks = []
        size = 0
        while chunk := os.read(fd, 1 << 20):
            size += len(chunk)
            if size > limit:  # grew while being read
                raise InvalidError(f"{what} {os.fspath(path)} is more than the {limit} allowed")
            chunks.append(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)
