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


def _fake_probe(monkeypatch: pytest.MonkeyPatch, maps: _Maps, arrays: dict[str, list[int]]) -> Any:
    """A VmscanProbe on faked maps: ``arrays`` its per-CPU arrays of counters (each read
    counted in ``probe.reads_of``), the origins zero, the lost count ``arrays["vmscan_lost"]``."""
    from collections import Counter as Tally

    from memtop.probes.vmscan import VmscanProbe
    from memtop.records import Lost

    probe = VmscanProbe()
    probe.bpf = maps
    reads: Tally[str] = Tally()

    def slots(table: str, n: int) -> list[int]:
        reads[table] += 1
        return list(arrays[table][:n])

    def rows(table: str, n: int, fields: tuple[str, ...]) -> list[tuple[int, ...]]:
        reads[table] += 1
        return [(0,) * len(fields)] * n

    def lost(table: str = "lost", what: str = "events") -> Lost:
        reads[table] += 1
        return Lost(probe.name, what, arrays[table][0])

    monkeypatch.setattr(probe, "array_slots", slots)
    monkeypatch.setattr(probe, "array_rows", rows)
    monkeypatch.setattr(probe, "lost_record", lost)
    probe.reads_of = reads  # type: ignore[attr-defined]
    return probe


def _arrays() -> dict[str, list[int]]:
    from memtop.probes.vmscan import HIST_SLOTS, Counter

    return {
        "vmscan_counters": [0] * len(Counter),
        "compact_hist": [0] * HIST_SLOTS,
        "reclaim_hist": [0] * (2 * HIST_SLOTS),
        "vmscan_lost": [0],
    }


def test_per_process_and_cgroup_maps_are_walked_only_when_an_episode_may_have_changed_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reclaim end's program, the only one that changes the per-process and per-cgroup maps,
    bumps the reclaim histogram, updates them, then the programs' generation: while the
    generation holds nothing but the counters is read (an empty hash map costs the kernel a
    walk of every bucket), but every map once in MAPS_BACKSTOP polls; an episode has them walked
    at the poll that sees its generation, its process's totals in the record; and totals that
    did not move are the same record again."""
    from types import SimpleNamespace

    from memtop.probes.base import MAPS_BACKSTOP
    from memtop.probes.vmscan import HIST_SLOTS, Counter

    maps = _Maps()
    arrays = _arrays()
    probe = _fake_probe(monkeypatch, maps, arrays)
    walked: list[int] = []
    records: list[Any] = []
    for poll in range(1, 25):
        if poll == 20:  # an episode ends: its histogram slot, its process's totals, the generation
            arrays["reclaim_hist"][HIST_SLOTS + 10] += 1
            key = SimpleNamespace(pid=4242, kind=1)
            stat = SimpleNamespace(
                cgroup_id=7, comm=b"leaker", events=1, total_ns=1500, max_ns=1500, reclaimed=32
            )
            maps.entries["pid_stats"].append((key, stat))
            arrays["vmscan_counters"][Counter.GENERATION] += 1
        before = maps.walks["pid_stats"]
        _vm, rc, _lost = probe.totals()
        if maps.walks["pid_stats"] > before:
            walked.append(poll)
            assert maps.walks["cg_stats"] == maps.walks["reclaim_pid_hist"] == maps.walks["pid_stats"]
        records.append(rc)
    assert walked == [1, MAPS_BACKSTOP, 20]
    assert probe.map_reads == len(walked)
    assert maps.walks["slab_stats"] == 3  # with the other maps: a shrinker's run bumps the generation
    # the generation, the one read of an idle poll (then the counters, at the three reads)
    assert probe.reads_of["vmscan_counters"] == 24 + 3
    assert probe.reads_of["reclaim_hist"] == probe.reads_of["vmscan_lost"] == 3
    assert probe.generation.skipped == 24 - 3
    assert records[18].pids == () and records[19].pids == ((4242, "leaker", "memcg", 1, 1500, 1500, 32),)
    assert records[19].pid_cgroups == ((4242, 7),)
    assert records[2] is records[1] and records[20] is records[19]  # unchanged: the same record


def test_the_compaction_histogram_is_read_only_when_a_compaction_may_have_changed_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The compaction end's program bumps the compaction count, then the histogram, then the
    generation: a poll between the count and the generation hands back the last read (the
    count is not sent ahead of its histogram), and the poll that sees the generation reads the
    histogram and sends both; the histogram is read otherwise only at the first poll and once
    in MAPS_BACKSTOP polls."""
    from memtop.probes.base import MAPS_BACKSTOP
    from memtop.probes.vmscan import Counter

    arrays = _arrays()
    probe = _fake_probe(monkeypatch, _Maps(), arrays)
    reads: list[int] = []
    seen = []
    for poll in range(1, 25):
        if poll == 20:  # a compaction ends: its count, then (after this poll's read) the rest
            arrays["vmscan_counters"][Counter.COMPACT_COUNT] += 1
        before = probe.reads_of["compact_hist"]
        vm, _rc, _lost = probe.totals()
        if probe.reads_of["compact_hist"] > before:
            reads.append(poll)
        if poll == 20:
            arrays["compact_hist"][12] += 1
            arrays["vmscan_counters"][Counter.GENERATION] += 1
        seen.append((vm.compaction_count, vm.compaction_hist))
    assert reads == [1, MAPS_BACKSTOP, 21]
    assert seen[18] == seen[19] == (0, ())
    assert seen[20] == seen[23] == (1, ((12, 1),))


def test_an_idle_poll_hands_back_the_last_read_until_the_generation_moves_or_a_poll_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The generation gates every read but the counters': the records handed back on a quiet
    poll are the last complete read's (cumulative: the state's rates are 0 for them, as for the
    same figures read again); a kswapd wake-up (a counter and the generation) is read at the
    poll that sees it, the lost count with it; a poll that failed has the next one read every
    map, as does a front end that starts using the shrinkers."""
    from memtop.probes.vmscan import Counter

    maps = _Maps()
    arrays = _arrays()
    probe = _fake_probe(monkeypatch, maps, arrays)
    probe.used_parts = frozenset()  # the exporter: no shrinkers
    first = probe.totals()
    assert maps.walks["slab_stats"] == 0 and probe.reads_of["reclaim_hist"] == 1
    assert probe.totals() == first and all(a is b for a, b in zip(probe.totals(), first, strict=True))
    assert probe.reads_of["reclaim_hist"] == 1 and probe.reads_of["vmscan_lost"] == 1

    arrays["vmscan_counters"][Counter.KSWAPD_WAKE] += 1
    arrays["vmscan_lost"][0] += 3  # a ring that overflowed: counted, then the generation
    arrays["vmscan_counters"][Counter.GENERATION] += 2
    vm, _rc, lost = probe.totals()
    assert vm.kswapd_wakes == 1 and lost.count == 3
    assert probe.reads_of["reclaim_hist"] == 2 and probe.reads_of["vmscan_lost"] == 2

    probe.poll_failed()
    again = probe.totals()
    assert probe.reads_of["reclaim_hist"] == 3 and again[0].kswapd_wakes == 1
    probe.totals()
    assert probe.reads_of["reclaim_hist"] == 3

    probe.used_parts = None  # the TUI: the shrinkers read at once
    probe.totals()
    assert maps.walks["slab_stats"] == 1 and probe.reads_of["reclaim_hist"] == 4
