"""The pagecacheinfo probe makes no record of a file whose record would be the one it sent: told
from what the record is made of. Beside a probe that makes and compares every record, poll for
poll, on the files of a tree while they grow, shrink and leave the page cache, it sends the
same records (a test that fails when the skip hides a change)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memtop.probes.pagecache import PagecacheinfoProbe
from memtop.records import Record


def probe(tmp_path: Path) -> PagecacheinfoProbe:
    # the walk every tick: every file measured and offered at each poll; the tree's files only
    # (the machine's processes come and go between two probes' scans)
    p = PagecacheinfoProbe(scan_every=1, walk_every=1, resend_every=1000)
    p.configure((str(tmp_path),), procs=False)
    return p


def written(path: Path, data: bytes, mode: str = "wb") -> None:
    """Write and sync: no page is left dirty for the kernel's flusher to start writing back between
    the two probes' polls (writeback_bytes read differently by two polls a moment apart: the test
    failed ~2 runs in 5 beside a disk-heavy job)."""
    with open(path, mode) as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def test_records_made_only_when_they_would_differ_are_the_same_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    written(a, os.urandom(64 << 10))
    written(b, os.urandom(16 << 10))
    lean, full = probe(tmp_path), probe(tmp_path)
    monkeypatch.setattr(full, "_as_sent", lambda _f: False)
    made: list[int] = []
    record = lean._record  # noqa: SLF001

    def counted(f: object) -> object:
        made.append(1)
        return record(f)  # type: ignore[arg-type]

    monkeypatch.setattr(lean, "_record", counted)

    def both() -> list[Record]:
        got, want = lean.poll(), full.poll()
        assert got == want
        return got

    with open(a, "rb") as reader:
        reader.read()
        both()
        made.clear()
        both()
        assert made == [], "nothing changed: no record made"
        written(a, os.urandom(32 << 10), "ab")
        changed = both()
        assert made, "a file grew: its record made"
        assert any(getattr(r, "path", "") == str(a) for r in changed)
        fd = os.open(b, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # b's pages dropped
        finally:
            os.close(fd)
        both()
        written(b, b"x")  # shrunk
        both()
        for _ in range(3):
            both()
