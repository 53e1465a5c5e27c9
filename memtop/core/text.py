"""Untrusted text from the traced system (comm, cmdline, paths, symbols) made safe to show.

Such text is never markup: widgets get ``rich.text.Text`` objects or plain strings with markup
off. Here we only make it printable, once, at the record boundary (``memtop.records.Record``
cleans every string field it is built with): what could steer a terminal, break a line, reorder
what is shown or be refused by an encoder becomes a visible escape. That is C0 and C1 controls,
DEL (ANSI escapes lose their ESC), the Unicode bidi controls and line/paragraph separators
(``\\u202e``), and bytes that are not UTF-8: read as bytes or surrogate-escaped (as ``os``
gives a name it cannot decode), each such byte is shown as ``\\xff``, which is also how the
kernel's own log escapes it, so a cgroup named with ``\\xff`` has one name in every source.
A lone surrogate that stands for no byte (from a recording's ``\\ud800``) becomes U+FFFD.
"""

from __future__ import annotations

import re

#: the longest text a record field holds; longer is cut and ends in "…"
LIMIT = 4096

# C0, DEL and C1; ALM (U+061C); LRM and RLM; line and paragraph separators, the bidi embeddings
# and overrides (U+202A..U+202E); the bidi isolates (U+2066..U+2069); every surrogate (only a
# decoder's surrogateescape or a JSON escape makes one: neither a terminal nor a file takes it)
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(m: re.Match[str]) -> str:
    o = ord(m.group())
    if o < 0x100:
        return f"\\x{o:02x}"
    if 0xDC80 <= o <= 0xDCFF:  # surrogateescape's stand-in for the byte o - 0xDC00
        return f"\\x{o - 0xDC00:02x}"
    if 0xD800 <= o <= 0xDFFF:
        return "\ufffd"
    return f"\\u{o:04x}"


def clean(value: str | bytes, limit: int = LIMIT) -> str:
    """``value`` (bytes: as UTF-8, each other byte escaped) with every unsafe character a visible
    escape, cut to ``limit`` characters and "…" when longer. Printable ASCII comes back as it is;
    cleaning what ``clean`` gave changes nothing."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "surrogateescape")
    if len(value) > limit:
        value = value[:limit] + "…"  # before escaping: a huge value costs no more than a long one
    elif value.isascii() and value.isprintable():
        return value  # the common case: nothing to escape, no regex run
    value = _UNSAFE.sub(_escape, value)
    if len(value) > limit:
        value = value[:limit] + "…"  # escapes made it longer: still bounded
    return value


def is_clean(value: str, limit: int = LIMIT) -> bool:
    """Whether ``clean`` would give ``value`` back unchanged (the record boundary's test)."""
    n = len(value)
    if n > limit and not (n == limit + 1 and value[-1] == "…"):
        return False
    return (value.isascii() and value.isprintable()) or _UNSAFE.search(value) is None
