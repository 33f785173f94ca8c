"""User-controlled text made safe to show: every control character written as an escape.

Job names, reasons, details, actor ids and notes are anyone's text. A terminal acts on C0 and
C1 controls (ESC starts its sequences), bidirectional marks reorder what a person reads, and
XML forbids most C0 controls outright (an SVG holding one is not well-formed). So whatever is
shown to a person, on a terminal or in a picture, passes through ``printable``.
"""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls, and the bidirectional marks, embeddings and isolates.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match[str]) -> str:
    code = ord(m[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``, ``\\u202e``)."""
    return CONTROL.sub(_escape, text)
