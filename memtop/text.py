"""Untrusted text from the traced system (comm, cmdline, paths, symbols) made safe to show.

Such text is never markup: widgets get ``rich.text.Text`` objects or plain strings with markup
off. Here we only make it printable: control characters (C0, C1, DEL, ANSI escapes) become
visible escapes, invalid UTF-8 becomes U+FFFD.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def clean(value: str | bytes, limit: int = 4096) -> str:
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    if len(value) > limit:
        value = value[:limit] + "…"
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", value)
