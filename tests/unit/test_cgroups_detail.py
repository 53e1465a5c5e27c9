"""The box under the Cgroups table says what a figure is where the kernel counts it otherwise: on
cgroup v1 the root's usage is the machine's page cache and anon pages (mm/memcontrol-v1.c
mem_cgroup_usage()), while every other memcg's counter also charges kernel memory, so a child can
show more than the root (seen here: / 3.0G, /process_api 3.2G)."""

from __future__ import annotations

from pathlib import Path

from memtop.state import State
from memtop.stream.recfile import Recording
from memtop.views import get_view
from memtop.views.cgroups import row_detail
from memtop.views.segments import plain

CGROUPS = Path(__file__).resolve().parents[1] / "data" / "cgroups.jsonl.gz"


def test_the_v1_roots_usage_says_what_it_counts() -> None:
    rec = Recording.load(CGROUPS)
    state = rec.state_at(rec.ts_at(rec.duration_s))
    assert isinstance(state, State)
    view = get_view("cgroups")
    rows = {r["path"]: r for r in view.document(state, view.default_options())["rows"]}
    root = rows["/"]
    assert root["version"] == 1, "recorded on this machine's hybrid layout: v1 memory controller"
    assert "the v1 root's: page cache and anon only" in plain(row_detail(root))
    child = next(r for p, r in rows.items() if p != "/" and r["version"] == 1)
    assert "v1 root" not in plain(row_detail(child))
