"""The pagecacheinfo probe's scan of held files meets the /proc files processes hold open (memtop
holds two or three a process it watches, to pread them each tick): it counts them among the
files it knows, as it did when it kept a _File of each, but keeps none (a /proc file has no page
cache and is never listed)."""

from __future__ import annotations

import os

from memtop.probes.pagecache import PagecacheinfoProbe
from memtop.records.pagecache import CachedFile, CachedFiles


def test_held_proc_files_are_counted_among_files_known_not_kept() -> None:
    me = os.getpid()
    names = ("stat", "status", "schedstat")
    fds = [os.open(f"/proc/{me}/{n}", os.O_RDONLY) for n in names]
    try:
        held = {os.fstat(fd).st_ino for fd in fds}
        dev = os.fstat(fds[0]).st_dev
        probe = PagecacheinfoProbe()
        recs = probe.poll()
    finally:
        for fd in fds:
            os.close(fd)
    assert not [k for k in probe._all if k[0] == dev]
    assert held <= set(probe._proc_inodes)
    (summary,) = [r for r in recs if isinstance(r, CachedFiles)]
    assert summary.files_known == len(probe._all) + len(probe._proc_inodes)
    # by device: a process in another mount namespace may hold a real file it sees as /proc/...
    # (a CI test's fixture tree: /proc/meminfo on the disk)
    assert not [r for r in recs if isinstance(r, CachedFile) and r.dev == dev]
