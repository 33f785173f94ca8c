"""Text handed in from outside (arguments, environment, files) checked before use and shown
safely in messages: no NUL byte reaches a system call, no value floods or splits an error line.
"""

from __future__ import annotations

from publish.errors import InvalidInput

# Long enough for any path or number a user means to type; the rest is elided in messages.
SHOWN_LIMIT = 80


def shown(value: object, limit: int = SHOWN_LIMIT) -> str:
    """`value` quoted for a one-line message: control characters and undecodable bytes
    escaped, and cut to `limit` characters with the full length noted."""
    text = str(value).encode("utf-8", "backslashreplace").decode("utf-8")
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


def shown_number(value: int) -> str:
    """An integer for a message; one too long to print (Python refuses above 4300 digits) is
    described by its size instead."""
    if value.bit_length() <= 256:
        return str(value)
    return f"of {value.bit_length()} bits"


def check_text(field: str, value: str) -> str:
    """Refuse a value that holds a NUL byte (no path or name can); return it unchanged."""
    if "\0" in value:
        raise InvalidInput(f"{field} {shown(value)} holds a NUL byte; give it without one")
    return value
