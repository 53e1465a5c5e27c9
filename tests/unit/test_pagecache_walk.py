"""The pagecacheinfo probe's walk of a --cache-path tree beside its scan of held files: a file
only the walk found is opened by its path (it carries no other way), and a file both held and
walked keeps one walk way however many walks are merged (each merge appended it again before)."""

from __future__ import annotations

import os
from pathlib import Path

from memtop.probes.pagecache import PagecacheinfoProbe
from memtop.records.pagecache import CachedFile


def test_walked_and_held_files_keep_one_way_each_across_walks(tmp_path: Path) -> None:
    held, walked = tmp_path / "held.bin", tmp_path / "walked.bin"
    held.write_bytes(os.urandom(16 << 10))
    walked.write_bytes(os.urandom(16 << 10))
    # the scan once (tick 1), the walk every tick: every poll merges the walk into the scan's files
    probe = PagecacheinfoProbe(paths=(str(tmp_path),), scan_every=1000, walk_every=1)
    with open(held, "rb") as f:
        f.read()
        recs = [r for _ in range(4) for r in probe.poll()]
        me = os.getpid()
        st_h, st_w = os.stat(held), os.stat(walked)
        h = probe._all[(st_h.st_dev, st_h.st_ino)]
        w = probe._all[(st_w.st_dev, st_w.st_ino)]
        # the held file: its /proc/PID/fd link(s), then the walk's path once
        assert [way for way in h.ways() if not way[1]] == [(str(held), False)]
        assert any(magic and link.startswith(f"/proc/{me}/fd/") for link, magic in h.ways())
        assert w.opens == () and w.ways() == ((str(walked), False),)
        # both measured through those ways, the held one named with its holder
        assert probe._measure(h) and probe._measure(w)
        mine = {r.path: r for r in recs if isinstance(r, CachedFile)}
        assert mine[str(held)].under_path and me in dict(mine[str(held)].holders)
        assert mine[str(walked)].under_path and mine[str(walked)].holders == ()
