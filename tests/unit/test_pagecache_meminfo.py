"""The Page cache pane sets its list beside meminfo's `Cached`, not beside Cached + SReclaimable
(free's buff/cache, which the header shows)."""

from __future__ import annotations

from pathlib import Path

from fakeproc import make_fake_proc

from memtop.probes.procfs import ProcfsProbe
from memtop.records import Batch, ProbeStatus
from memtop.records.host import MemInfo
from memtop.state import State
from memtop.views import Options, get_view


def test_the_listed_share_is_of_meminfos_cached(tmp_path: Path) -> None:
    root = make_fake_proc(tmp_path / "proc")
    meminfo = {
        ln.split(":")[0]: int(ln.split()[1]) * 1024 for ln in (root / "meminfo").read_text().splitlines()
    }
    records = ProcfsProbe(root).poll()
    (m,) = [r for r in records if isinstance(r, MemInfo)]
    assert m.page_cache_bytes == meminfo["Cached"]
    assert m.cached_bytes == meminfo["Cached"] + meminfo["SReclaimable"]  # the header's, unchanged
    state = State("bpf")
    state.apply(Batch(1, (ProbeStatus("procfs", "attached"), *records)))
    doc = get_view("pagecache").document(state, Options())
    assert doc["totals"]["meminfo_cached_bytes"] == meminfo["Cached"]
