"""The Reclaim pane asks the view for the episodes it lists (``extra["events_limit"]``): the first
N of the same list, the same dicts as the whole document's (a snapshot has all of them)."""

from __future__ import annotations

from memtop.records import Batch, ProbeStatus
from memtop.records.host import HostFacts
from memtop.records.reclaim import ReclaimEvent
from memtop.state import State
from memtop.views import Options, get_view


def test_events_limit_is_the_head_of_the_whole_list() -> None:
    state = State(mode="bpf")
    events = tuple(
        ReclaimEvent(
            1_000_000_000 + i * 1000, 100 + i % 7, 100 + i % 7, "hog", ("direct", "memcg")[i % 2], i, 1
        )
        for i in range(900)
    )
    facts = HostFacts(kernel_release="6.18", hostname="vm", wall_minus_monotonic_ns=1_700_000_000_000_000_000)
    state.apply(Batch(2_000_000_000, (ProbeStatus("vmscan", "attached"), facts, *events)))
    view = get_view("reclaim")
    for section in ("", "memcg"):
        whole = view.document(state, Options(section=section))["events"]
        head = view.document(state, Options(section=section, extra={"events_limit": 200}))["events"]
        assert len(whole) == (900 if not section else 450)
        assert head == whole[:200]
        assert head[0]["ts_ns"] == events[-1].ts_ns  # newest first
        assert head[0]["wall_ns"] == events[-1].ts_ns + facts.wall_minus_monotonic_ns
        assert all(e["kind"] == "memcg" for e in head) or not section
