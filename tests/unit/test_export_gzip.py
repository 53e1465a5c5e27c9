"""The exporter's gzip: one gzip member (RFC 1952) whose deflate stream is each family's text
compressed on its own, joined, then the scrape's own lines; a family unchanged since the last
build is not compressed again."""

from __future__ import annotations

import asyncio
import re
import zlib
from pathlib import Path

import pytest
from support import FakeSource

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


@pytest.mark.parametrize("accept", ["", OPENMETRICS], ids=["text", "openmetrics"])
def test_gzip_is_one_member_of_the_plain_text_and_kept_families_are_not_compressed_again(
    accept: str,
) -> None:
    batches = list(Recording.load(DATA / "cgroups.jsonl.gz").batches())
    runner = Runner(FakeSource(batches), checkpoints=False)
    ex = Exporter(runner, Options())
    changed = kept = 0
    before: dict[str, tuple[object, bytes | None]] = {}
    for _ in range(len(batches)):
        asyncio.run(runner.tick())
        packed = [ex.exposition(accept, gzip=True)[0] for _ in range(2)]
        plain = ex.exposition(accept)[0]
        for p in packed:  # each scrape of the one build: the same text but for its own lines
            assert SCRAPE_LINES.sub(b"", one_member(p)) == SCRAPE_LINES.sub(b"", plain)
        if accept:
            assert plain.endswith(b"# EOF\n") and one_member(packed[-1]).endswith(b"# EOF\n")
        memo = next(iter(ex._memos.values()))
        for key, fam in memo.families.items():
            assert fam.gz is not None
            last = before.get(key)
            if last is not None and last[0] is fam:  # the same family text as the last build
                assert fam.gz is last[1]
                kept += 1
            elif last is not None:
                changed += 1
        before = {k: (f, f.gz) for k, f in memo.families.items()}
    assert kept and changed
