"""memtop.core.text.clean on generated text (hypothesis): whatever it is given, str or bytes, what comes
out is safe to show (no control, bidi control, separator or surrogate), bounded, and clean again
unchanged; bytes that are not UTF-8 show as the kernel's log shows them."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from memtop.core.text import LIMIT, clean, is_clean

UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
#: text with what an attacker reaches for mixed in
hostile = st.text(
    alphabet=st.one_of(
        st.characters(codec=None),  # every code point, surrogates included
        st.sampled_from(["\x1b", "\x07", "\x9b", "\x00", "\u202e", "\u2066", "\u2028", "[", "]", "…"]),
    ),
    max_size=64,
)


def check(out: str, limit: int) -> None:
    assert UNSAFE.search(out) is None, out
    assert len(out) <= limit + 1
    assert clean(out, limit) == out
    assert is_clean(out, limit)
    out.encode("utf-8")  # strict: a terminal or a file takes it


@settings(max_examples=400, deadline=None)
@given(hostile, st.sampled_from([8, 64, LIMIT]))
def test_any_text_comes_out_safe_bounded_and_stable(text: str, limit: int) -> None:
    check(clean(text, limit), limit)
    assert is_clean(text, limit) == (clean(text, limit) == text)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=64))
def test_any_bytes_come_out_safe_and_as_the_kernel_escapes_them(raw: bytes) -> None:
    out = clean(raw)
    check(out, LIMIT)
    if raw.isascii():
        # as /dev/kmsg prints it (but a backslash, which memtop leaves as it is)
        assert out == "".join(chr(c) if 32 <= c < 127 else f"\\x{c:02x}" for c in raw)
    # each byte that is not part of valid UTF-8 is shown as \xNN
    for ch in raw.decode("utf-8", "surrogateescape"):
        if 0xDC80 <= ord(ch) <= 0xDCFF:
            assert f"\\x{ord(ch) - 0xDC00:02x}" in out


def test_examples() -> None:
    assert clean("plain ascii") == "plain ascii"
    assert clean("\x1b]0;pwned\x07") == "\\x1b]0;pwned\\x07"
    assert clean(b"x\xff\xfe") == "x\\xff\\xfe"
    assert clean("x\udcff") == "x\\xff"  # as os names a directory it could not decode
    assert clean("\ud800") == "\ufffd"  # a surrogate that stands for no byte
    assert clean("a\u202eb\u2066c") == "a\\u202eb\\u2066c"
    assert clean("é€ [b]x[/]") == "é€ [b]x[/]"  # printable text, markup included, is kept
    assert clean("x" * 10, 4) == "xxxx…"
    assert clean("\x1b" * 10, 8) == "\\x1b\\x1b…"


#: rows as the records' tuple fields hold them: text at some places, ints and None elsewhere
rows = st.lists(
    st.tuples(hostile, st.integers(0, 9), st.one_of(hostile, st.none()), hostile, st.integers(0, 9)),
    max_size=6,
)


@given(rows, st.booleans())
@settings(max_examples=300, deadline=None)
def test_fast_row_fixers_clean_as_the_general_ones(
    raw: list[tuple[str, int, str | None, str, int]], short: bool
) -> None:
    """The record boundary's one-loop fixers of ``tuple[str, ...]`` and of tuples of rows with
    plain strings (VmStat's pairs) give what the general fixers give, and the very tuple when
    nothing in it needed cleaning."""
    from memtop.records import _fix_fixed, _fix_items, _fix_rows, _fix_str, _fix_strs

    pairs = tuple((r[0], r[1]) for r in raw)
    wide = tuple(r[:1] if short and i == 0 else (r[0], r[1], r[3], r[4]) for i, r in enumerate(raw))
    strs = tuple(r[0] for r in raw)
    cases = [
        (
            _fix_rows((0,), _fix_items(_fix_fixed(((0, _fix_str),)))),
            _fix_items(_fix_fixed(((0, _fix_str),))),
            pairs,
        ),
        (
            _fix_rows((0, 2), _fix_items(_fix_fixed(((0, _fix_str), (2, _fix_str))))),
            _fix_items(_fix_fixed(((0, _fix_str), (2, _fix_str)))),
            wide,
        ),
        (_fix_strs, _fix_items(_fix_str), strs),
    ]
    for fast, general, value in cases:
        want = general(value)
        got = fast(value)
        assert got == want
        if want is value:
            assert got is value


#: mostly clean names (as /proc/vmstat's and memory.stat's are), some hostile, some too long
names = st.one_of(
    st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=12),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0xA0), max_size=4),
    hostile,
    st.just("n" * (LIMIT + 1)),
)
#: rows that are not (str, int) pairs: short, a list, a str, another type where the text is
odd_rows = st.one_of(
    st.tuples(names, st.integers()),
    st.tuples(names),
    st.just(()),
    st.lists(st.one_of(names, st.integers()), max_size=3),
    names,
    st.tuples(st.one_of(st.integers(), st.none(), st.binary(max_size=3)), st.integers()),
    st.dictionaries(st.integers(0, 2), names, max_size=2),
)


@given(st.lists(odd_rows, max_size=8))
@settings(max_examples=500, deadline=None)
def test_the_row_fixer_vouches_only_for_what_the_general_one_leaves(raw: list[object]) -> None:
    """The rows' fixer's passes in C (every name joined, tested at once) return the very tuple
    only where the general fixer does, whatever the rows are, and give what it gives."""
    from memtop.records import _fix_fixed, _fix_items, _fix_rows, _fix_str

    general = _fix_items(_fix_fixed(((0, _fix_str),)))
    fast = _fix_rows((0,), general)
    value = tuple(raw)
    want = general(value)
    got = fast(value)
    assert got == want
    assert (got is value) == (want is value)
