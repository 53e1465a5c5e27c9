"""vmscan and reclaim records, state and views without a kernel, on two synthetic ticks."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from support import vmscan_batches

from memtop.records import from_json, to_json
from memtop.state import State
from memtop.state.reclaim import ReclaimState
from memtop.views import Options, get_view


def origin_rows(doc: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    return {r["origin"]: r for r in doc["rows"]}


def test_records_round_trip_json() -> None:
    for batch in vmscan_batches():
        for rec in batch.records:
            text = json.dumps(to_json(rec))
            # the fixture's comm holds a raw ESC (as no probe would emit): the decoder makes it
            # printable, "\x1b" in four characters; everything else comes back as it was
            printable = json.loads(text.replace("\\u001b", "\\\\x1b"))
            assert to_json(from_json(json.loads(text))) == printable


def test_state_and_views_from_records() -> None:
    state = State(mode="replay")
    for b in vmscan_batches():
        state.apply(b)
    vm = get_view("vmscan").document(state, Options())
    rows = origin_rows(vm)
    assert rows["kswapd"]["pages_scanned"] == 1000 and rows["kswapd"]["scanned_per_s"] == 1000.0
    assert rows["memcg"]["efficiency_pct"] == round(100 * 800 / 1800, 1)
    assert vm["kswapd_wakes"] == 3
    assert vm["slab_shrink"][0]["shrinker"] == "deferred_split_scan"  # by time spent
    assert vm["compaction"] == {
        "count": 2,
        "total_ns": 3_000_000,
        "histogram": [{"le_ns": 2**21 - 1, "count": 2}],
        "kcompactd_wakes": 1,
    }
    # sar -B %vmeff: pgsteal / (pgscank + pgscand)
    assert vm["kernel"]["vmeff_pct"] == round(100 * 700 / 1200, 1)
    assert vm["kernel"]["rates"]["workingset_refault_anon_per_s"] == 40.0
    rc = get_view("reclaim").document(state, Options(sort="total_ns"))
    assert [r["pid"] for r in rc["rows"]] == [77, 4242]
    assert rc["histogram"] == [
        {"kind": "direct", "le_ns": 2**21 - 1, "count": 1},
        {"kind": "memcg", "le_ns": 2**15 - 1, "count": 3},
    ]
    assert rc["events"][0]["pid"] == 77  # newest first
    assert rc["events_received"] == 4 and rc["events_total"] == {"direct": 1, "memcg": 3}
    only = get_view("reclaim").document(state, Options(section="memcg"))
    assert {e["kind"] for e in only["events"]} == {"memcg"} and {b["kind"] for b in only["histogram"]} == {
        "memcg"
    }
    text = get_view("reclaim").text(state, Options()) + get_view("vmscan").text(state, Options())
    assert "memcg reclaim latency" in text and "super_cache_scan" in text and "%vmeff" in text


def test_episodes_the_log_left_out_are_not_listed_not_lost() -> None:
    from memtop.records import Batch
    from memtop.records.reclaim import ReclaimTotals

    state = State(mode="replay")
    for b in vmscan_batches():
        state.apply(b)
    last = state.get(ReclaimState).totals
    assert last is not None
    state.apply(Batch(10**12, (ReclaimTotals(last.histogram, last.pids, unlisted=1234),)))
    rc = get_view("reclaim").document(state, Options())
    assert rc["unlisted_events"] == 1234 and rc["lost_events"] == 0
    assert "1234 episodes not listed" in get_view("reclaim").text(state, Options())


def test_shrinker_names_from_kallsyms(tmp_path: Path) -> None:
    """Text symbols only (t, T, w, W; data and zeroed addresses left out), in address order
    whatever the file's (modules come after the kernel, at lower or higher addresses), an address
    inside a function as name+offset, one below every symbol as hex, names cleaned."""
    from memtop.probes.vmscan import KernelSymbols

    kallsyms = tmp_path / "kallsyms"
    kallsyms.write_bytes(
        b"ffffffff81200000 T super_cache_scan\n"
        b"ffffffff81100000 t deferred_split_scan\n"
        b"ffffffff81150000 d some_data\n"
        b"0000000000000000 T hidden\n"
        b"ffffffffc0001000 t zs_shrinker_scan\t[zsmalloc]\n"
        b"ffffffffa0000000 W evil_\x1b]0;owned\x07\n"
    )
    syms = KernelSymbols(kallsyms)
    assert syms.name(0xFFFFFFFF81200000) == "super_cache_scan"
    assert syms.name(0xFFFFFFFF81200010) == "super_cache_scan+0x10"
    assert syms.name(0xFFFFFFFF81150000) == "deferred_split_scan+0x50000"  # data is not text
    assert syms.name(0xFFFFFFFFC0001004) == "zs_shrinker_scan+0x4"
    assert syms.name(0xFFFFFFFF81000000) == "0xffffffff81000000"
    assert syms.name(0xFFFFFFFFA0000000) == "evil_\\x1b]0;owned\\x07"
    assert len(syms) == 4
    assert KernelSymbols(tmp_path / "missing").name(0x10) == "0x10"


class _Maps:
    """A probe's compiled maps, faked: each hash map's entries (counted as they are walked), the
    origins' per-CPU values."""

    def __init__(self) -> None:
        self.entries: dict[str, list[tuple[Any, Any]]] = {
            "slab_stats": [],
            "pid_stats": [],
            "cg_stats": [],
            "reclaim_pid_hist": [],
        }
        self.walks: dict[str, int] = dict.fromkeys(self.entries, 0)

    def __getitem__(self, name: str) -> Any:
        from types import SimpleNamespace

        if name == "origins":
            zero = SimpleNamespace(scanned=0, reclaimed=0, events=0)
            return SimpleNamespace(Key=int, getvalue=lambda _k: [zero, zero])

        def items() -> list[tuple[Any, Any]]:
            self.walks[name] += 1
            return list(self.entries[name])

        return SimpleNamespace(items=items)


def test_per_process_and_cgroup_maps_are_walked_only_when_an_episode_may_have_changed_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reclaim end's program, the only one that changes the per-process and per-cgroup maps,
    bumps the reclaim histogram first: while its total holds at two polls in a row the maps are
    as last read and are not walked (an empty one costs the kernel a walk of every bucket), but
    once in MAPS_BACKSTOP polls; an episode has them walked at that poll and the next, its
    process's totals in the record; and totals that did not move are the same record again."""
    from types import SimpleNamespace

    from memtop.probes.base import MAPS_BACKSTOP
    from memtop.probes.vmscan import HIST_SLOTS, Counter, VmscanProbe

    probe = VmscanProbe()
    maps = _Maps()
    probe.bpf = maps
    arrays = {
        "vmscan_counters": [0] * len(Counter),
        "compact_hist": [0] * HIST_SLOTS,
        "reclaim_hist": [0] * (2 * HIST_SLOTS),
    }
    monkeypatch.setattr(probe, "array_slots", lambda table, n: list(arrays[table][:n]))
    monkeypatch.setattr(probe, "array_rows", lambda table, n, fields: [(0,) * len(fields)] * n)
    walked: list[int] = []
    records: list[Any] = []
    for poll in range(1, 25):
        if poll == 20:  # an episode ends: its histogram slot first, then its process's totals
            arrays["reclaim_hist"][HIST_SLOTS + 10] += 1
            key = SimpleNamespace(pid=4242, kind=1)
            stat = SimpleNamespace(
                cgroup_id=7, comm=b"leaker", events=1, total_ns=1500, max_ns=1500, reclaimed=32
            )
            maps.entries["pid_stats"].append((key, stat))
        before = maps.walks["pid_stats"]
        _vm, rc = probe.totals()
        if maps.walks["pid_stats"] > before:
            walked.append(poll)
            assert maps.walks["cg_stats"] == maps.walks["reclaim_pid_hist"] == maps.walks["pid_stats"]
        records.append(rc)
    assert walked == [1, 2, MAPS_BACKSTOP, 20, 21]
    assert probe.map_reads == len(walked)
    assert maps.walks["slab_stats"] == 24  # no counter says a shrinker ran: read every poll
    assert records[18].pids == () and records[19].pids == ((4242, "leaker", "memcg", 1, 1500, 1500, 32),)
    assert records[19].pid_cgroups == ((4242, 7),)
    assert records[2] is records[1] and records[20] is records[19]  # unchanged: the same record


def test_the_compaction_histogram_is_read_only_when_a_compaction_may_have_changed_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The compaction end's program bumps the compaction count, then the histogram: while the
    count holds at two polls in a row the histogram is as last read and is not read again, but
    once in MAPS_BACKSTOP polls; a compaction has it read at that poll and the next (its bump
    may come after the count's), and the record has it."""
    from memtop.probes.base import MAPS_BACKSTOP
    from memtop.probes.vmscan import HIST_SLOTS, Counter, VmscanProbe

    probe = VmscanProbe()
    probe.bpf = _Maps()
    arrays = {
        "vmscan_counters": [0] * len(Counter),
        "compact_hist": [0] * HIST_SLOTS,
        "reclaim_hist": [0] * (2 * HIST_SLOTS),
    }
    reads: list[int] = []
    poll = 0

    def slots(table: str, n: int) -> list[int]:
        if table == "compact_hist":
            reads.append(poll)
        return list(arrays[table][:n])

    monkeypatch.setattr(probe, "array_slots", slots)
    monkeypatch.setattr(probe, "array_rows", lambda table, n, fields: [(0,) * len(fields)] * n)
    seen = []
    for poll in range(1, 25):
        if poll == 20:  # a compaction ends: its count first, its histogram slot after this read
            arrays["vmscan_counters"][Counter.COMPACT_COUNT] += 1
        vm, _rc = probe.totals()
        if poll == 20:
            arrays["compact_hist"][12] += 1
        seen.append(vm.compaction_hist)
    assert reads == [1, 2, MAPS_BACKSTOP + 1, 20, 21]
    assert seen[18] == () and seen[19] == () and seen[20] == ((12, 1),) and seen[23] == ((12, 1),)
