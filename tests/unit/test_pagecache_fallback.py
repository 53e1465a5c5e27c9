"""A kernel without cachestat(2) (before 6.5: ENOSYS) cannot be made here, so its answer is
faked: the pagecacheinfo probe falls back to mincore, says so (its note, scope.method, the
pane's line), and measures the cached bytes only, never zeros for what it cannot see."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from memtop.probes import pagecache
from memtop.probes.pagecache import PagecacheinfoProbe
from memtop.records import Batch, ProbeStatus
from memtop.records.pagecache import CachedFile
from memtop.state import State
from memtop.views import Options
from memtop.views.pagecache import PagecacheView, summary_segments
from memtop.views.segments import plain


def no_cachestat(fd: int) -> tuple[int, int, int, int, int]:
    raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))


def test_enosys_falls_back_to_mincore_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "data.bin"
    p.write_bytes(os.urandom(64 << 10))
    with open(p, "rb") as f:
        f.read()  # cached (tmp_path may be tmpfs: its pages are in the cache all the same)
    monkeypatch.setattr(pagecache, "cachestat", no_cachestat)
    probe = PagecacheinfoProbe(paths=(str(tmp_path),), scan_every=1000)
    recs = probe.poll()
    assert probe.method == "mincore" and "mincore" in probe.note()
    mine = next(r for r in recs if isinstance(r, CachedFile) and r.path == str(p))
    assert mine.method == "mincore" and mine.cached_bytes == 64 << 10
    assert mine.dirty_bytes is None and mine.recently_evicted_bytes is None
    state = State(mode="bpf")
    state.apply(Batch(1, (ProbeStatus("pagecacheinfo", "attached"), *recs)))
    doc = PagecacheView().document(state, Options())
    assert doc["scope"]["method"] == "mincore"
    row = next(r for r in doc["rows"] if r["path"] == str(p))
    assert row["dirty_bytes"] is None and row["evicted_bytes"] is None
    assert "no cachestat(2)" in plain(summary_segments(doc))
