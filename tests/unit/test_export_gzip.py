"""The exporter's gzip: one gzip member (RFC 1952) whose deflate stream is the families' text
compressed in pieces, joined, then the scrape's own lines; a piece whose families are unchanged
since the last build is not compressed again."""

from __future__ import annotations

import asyncio
import re
import zlib
from pathlib import Path

import pytest
from support import FakeSource

from memtop.export import server
from memtop.export.metrics import Options
from memtop.export.server import Exporter
from memtop.stream.recfile import Recording
from memtop.stream.runner import Runner

DATA = Path(__file__).resolve().parents[1] / "data"
OPENMETRICS = "application/openmetrics-text; version=1.0.0"
#: the lines that differ from one scrape to the next of the same build
SCRAPE_LINES = re.compile(rb"^memtop_exporter_(scrapes_total|exposition_age_seconds) .*$", re.M)


def one_member(packed: bytes) -> bytes:
    """What a strict reader of one gzip member gets: the whole body consumed, its CRC-32 and
    length checked (zlib raises on a mismatch), nothing after it."""
    d = zlib.decompressobj(31)
    text = d.decompress(packed) + d.flush()
    assert d.eof and not d.unused_data
    return text


@pytest.mark.parametrize("piece_bytes", [1, server.PIECE_BYTES], ids=["a family a piece", "default"])
@pytest.mark.parametrize("accept", ["", OPENMETRICS], ids=["text", "openmetrics"])
def test_gzip_is_one_member_of_the_plain_text_and_kept_pieces_are_not_compressed_again(
    accept: str, piece_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every scrape (two of each build) decodes as one member to the plain text; a piece of
    the families of one of the last build's pieces is that piece (in pieces of one family each,
    some families are unchanged from tick to tick); the bytes are within a tenth of the text
    compressed whole."""
    monkeypatch.setattr(server, "PIECE_BYTES", piece_bytes)
    batches = list(Recording.load(DATA / "cgroups.jsonl.gz").batches())
    runner = Runner(FakeSource(batches), checkpoints=False)
    ex = Exporter(runner, Options())
    changed = kept = 0
    before: dict[tuple[int, ...], tuple[tuple[object, ...], bytes]] = {}
    for _ in range(len(batches)):
        asyncio.run(runner.tick())
        packed = [ex.exposition(accept, gzip=True)[0] for _ in range(2)]
        plain = ex.exposition(accept)[0]
        for p in packed:  # each scrape of the one build: the same text but for its own lines
            assert SCRAPE_LINES.sub(b"", one_member(p)) == SCRAPE_LINES.sub(b"", plain)
        if accept:
            assert plain.endswith(b"# EOF\n") and one_member(packed[-1]).endswith(b"# EOF\n")
        comp = zlib.compressobj(server.GZIP_LEVEL, zlib.DEFLATED, 31)
        whole = comp.compress(plain) + comp.flush()
        if piece_bytes > 1:
            assert len(packed[0]) <= 1.1 * len(whole)
        memo = next(iter(ex._memos.values()))
        assert memo.pieces
        for key, (fams, gz) in memo.pieces.items():
            last = before.get(key)
            if last is not None and all(a is b for a, b in zip(last[0], fams, strict=True)):
                assert gz is last[1]  # the same families as the last build's piece: not again
                kept += 1
            else:
                changed += 1
        before = dict(memo.pieces)
    assert changed
    assert kept or piece_bytes > 1
