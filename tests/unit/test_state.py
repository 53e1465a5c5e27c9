"""Pure state structures: what they keep must stay small without changing what they show."""

from __future__ import annotations

import random

from memtop.state.processes import History, HistoryPoint


def _step_value(points: list[HistoryPoint], ts: int) -> tuple[int, ...]:
    """The values a plotted step series shows at ``ts`` (the last point at or before it)."""
    best = None
    for p in points:
        if p.ts_ns <= ts:
            best = p
    assert best is not None
    return (best.anon_bytes, best.file_bytes, best.swap_bytes, round(best.minflt_per_s * 1000))


def test_history_keeps_changes_only_and_shows_the_same_series() -> None:
    rng = random.Random(7)
    full: list[HistoryPoint] = []
    h = History(cap=10_000)
    anon = 1 << 20
    for i in range(2000):
        if rng.random() < 0.05:  # a change now and then, flat in between
            anon += rng.randrange(-4096, 8192)
        p = HistoryPoint(1_000_000_000 * (i + 1), anon, 4096, 0, 0, 0.0 if anon % 3 else 12.5, 0.0)
        full.append(p)
        h.append(p)
    kept = list(h)
    assert len(kept) == len(h)
    assert len(kept) < len(full) // 4, len(kept)  # mostly flat: few points stored
    assert kept[0].ts_ns == full[0].ts_ns and kept[-1].ts_ns == full[-1].ts_ns
    for p in full:
        assert _step_value(kept, p.ts_ns) == _step_value(full, p.ts_ns), p.ts_ns


def test_an_idle_process_adds_nothing_and_a_busy_one_is_capped() -> None:
    idle = History(cap=100)
    for i in range(5000):
        idle.append(HistoryPoint(i + 1, 8192, 4096, 0, 0, 0.0, 0.0))
    assert len(list(idle)) == 2  # the first tick and the newest
    size = idle.nbytes()
    busy = History(cap=100)
    for i in range(5000):
        busy.append(HistoryPoint(i + 1, 8192 + i, 4096, 0, 0, float(i), 0.0))
    pts = list(busy)
    assert len(pts) == 100 and pts[-1].anon_bytes == 8192 + 4999 and pts[0].anon_bytes == 8192 + 4900
    assert busy.nbytes() <= 2 * 100 * History.FIELDS * 8
    assert size <= 4 * History.FIELDS * 8


def test_unchanged_sample_shortcut_keeps_what_the_full_path_would() -> None:
    """The poller hands back the same ProcSample object for a process that did not move; the state
    then takes a shortcut. It must end where the full path (a fresh, equal object) ends."""
    import dataclasses

    from memtop.records import Batch
    from memtop.records.processes import ProcSample
    from memtop.state import State
    from memtop.state.processes import ProcessesState

    rng = random.Random(3)
    fast, full = State(), State()
    s = ProcSample(
        pid=7,
        comm="w",
        user="root",
        uid=0,
        rss_anon_bytes=1 << 20,
        rss_file_bytes=4096,
        rss_shmem_bytes=0,
        swap_bytes=0,
        minor_faults=100,
        major_faults=0,
    )
    for i in range(200):
        if rng.random() < 0.15:  # it runs now and then: a new object with moved counters
            s = dataclasses.replace(
                s,
                rss_anon_bytes=s.rss_anon_bytes + rng.choice((0, 4096)),
                minor_faults=s.minor_faults + rng.randrange(0, 50),
            )
        ts = 1_000_000_000 * (i + 1)
        fast.apply(Batch(ts, (s,)))
        full.apply(Batch(ts, (dataclasses.replace(s),)))
        a, b = fast.get(ProcessesState).rows[7], full.get(ProcessesState).rows[7]
        assert (a.ts_ns, a.minflt_per_s, a.majflt_per_s, list(a.spark), a.spark_same) == (
            b.ts_ns,
            b.minflt_per_s,
            b.majflt_per_s,
            list(b.spark),
            b.spark_same,
        ), i
        assert list(a.history) == list(b.history), i
        window = list(a.spark)[-a.spark_same :]
        assert len(set(window)) == 1  # spark_same newest values are equal
        if a.spark_same < len(a.spark):
            assert a.spark[-a.spark_same - 1] != a.spark[-1]


def test_a_counter_beyond_int64_is_kept_at_the_top_not_a_crash() -> None:
    """A recording may hold any uint64 (the decoder accepts the kernel's range); the history's
    int64 store keeps such a value at its top instead of raising (found by the recording fuzz)."""
    from memtop.records import Batch
    from memtop.records.processes import ProcSample
    from memtop.state import State
    from memtop.state.processes import I64_MAX, ProcessesState

    state = State()
    for ts in (10**9, 2 * 10**9):
        state.apply(Batch(ts, (ProcSample(7, "big", "u", 0, 4096, 0, 0, 1 << 63, 0, 0),)))
    row = state.get(ProcessesState).rows[7]
    assert row.sample.swap_bytes == 1 << 63
    assert row.ts_ns == 2 * 10**9 and len(row.history) >= 1  # both samples applied
    assert I64_MAX in row.history._data  # stored at the top of its range


def test_recently_exited_follow_the_filter_and_know_an_old_process_lifetime() -> None:
    """Issue 22, item 7: the list ignored `/`, and a process started before memtop (its start
    never seen by the exit probe) showed LIFETIME 0ns: its /proc start time tells."""
    from memtop.records import Batch
    from memtop.records.processes import ProcEvent, ProcSample
    from memtop.state import State
    from memtop.views import Options, get_view

    state = State()
    old = ProcSample(7, "olddaemon", "root", 0, 4096, 0, 0, 0, 10, 0, start_time_ns=10**9)
    state.apply(Batch(5 * 10**9, (old,)))
    state.apply(Batch(6 * 10**9, (ProcEvent(6 * 10**9, "exit", 7, "olddaemon", 0),)))
    state.apply(Batch(6 * 10**9 + 1, (ProcEvent(6 * 10**9, "exit", 8, "unseen", 0),)))
    view = get_view("processes")
    exited = {e["pid"]: e for e in view.document(state, Options(extra={"exited": "all"}))["exited"]}
    assert exited[7]["lifetime_ns"] == 5 * 10**9
    assert exited[8]["lifetime_ns"] is None  # not measured: not 0
    assert [e["pid"] for e in view.document(state, Options(filter="olddae"))["exited"]] == [7]
    assert view.document(state, Options(filter="nothing-like-it"))["exited"] == []


def test_swapin_rows_with_something_to_show_and_exited_marked() -> None:
    """Issue 22, item 7: the Swap-in pane listed hundreds of dead sub-second processes with no
    swap-in at all; rows now have something to show, and a gone process is marked."""
    from memtop.records import Batch
    from memtop.records.processes import ProcSample
    from memtop.records.swapin import SwapinProc
    from memtop.state import State
    from memtop.views import Options, get_view

    state = State()
    alive = ProcSample(7, "hog", "root", 0, 4096, 0, 0, 0, 10, 5)
    procs = (SwapinProc(7, "hog", 50, 10**6, 10**5, 0), SwapinProc(8, "gone", 9, 10**6, 10**5, 0))
    state.apply(Batch(10**9, (alive, *procs, SwapinProc(9, "shell", 0, 0, 0, 0))))
    rows = {r["pid"]: r for r in get_view("swapin").document(state, Options())["rows"]}
    assert set(rows) == {7, 8}  # the shell had nothing to show
    assert rows[7]["command"] == "hog" and not rows[7]["exited"]
    assert rows[8]["command"] == "gone †" and rows[8]["exited"]
    one = get_view("swapin").document(state, Options(pid=9))["rows"]
    assert [r["pid"] for r in one] == [9]  # asked for by pid: shown whatever it holds


def test_processes_born_and_gone_between_polls_are_counted_not_listed() -> None:
    """Issue 22, item 7: a shell's millisecond children filled "Recently exited" and pushed out the
    processes that mattered. Those never read from /proc are counted and listed only on request;
    a process a poll saw gone before its exit event is listed once, with the event's lifetime."""
    from memtop.records import Batch
    from memtop.records.processes import ProcEvent, ProcSample
    from memtop.state import State
    from memtop.views import Options, get_view

    state = State()
    hog = ProcSample(7, "hog", "root", 0, 4096, 0, 0, 0, 10, 0)
    late = ProcSample(9, "late", "root", 0, 4096, 0, 0, 0, 10, 0)
    state.apply(Batch(10**9, (hog, late)))
    state.apply(Batch(2 * 10**9, (ProcEvent(2 * 10**9, "exit", 7, "hog", 3 * 10**9),)))
    for i in range(300):  # 300 shells of 2 ms each
        state.apply(Batch(2 * 10**9 + i + 1, (ProcEvent(2 * 10**9 + i, "exit", 1000 + i, "sh", 2 * 10**6),)))
    state.apply(Batch(3 * 10**9, ()))  # the poll: 7 and 9 gone
    state.apply(Batch(3 * 10**9 + 1, (ProcEvent(3 * 10**9, "exit", 9, "late", 4 * 10**9),)))
    view = get_view("processes")
    doc = view.document(state, Options())
    assert [e["pid"] for e in doc["exited"]] == [9, 7]
    assert doc["exited"][0]["lifetime_ns"] == 4 * 10**9  # the late event's lifetime, one row
    assert doc["exited_between"] == 300 and not doc["exited_between_shown"]
    assert "300 born and gone between polls" in view.text_extra(doc)
    every = view.document(state, Options(extra={"exited": "all"}))
    assert len(every["exited"]) == 202  # 200 kept of the shells, newest first, and the two
    assert every["exited"][0]["pid"] == 9 and every["exited"][1]["comm"] == "sh"


def test_gone_rows_are_bounded_under_churn() -> None:
    """Process churn (a build, a shell loop): a new process every poll for far longer than
    MAX_GONE polls within the grace keeps at most MAX_GONE gone rows, and always the one a
    drill-in looks at (an exporter left running once grew with the churn's rate)."""
    from memtop.records import Batch
    from memtop.records.process import Focus
    from memtop.records.processes import ProcSample
    from memtop.state import State
    from memtop.state.processes import MAX_GONE, ProcessesState

    state = State()
    state.apply(Batch(10**9, (Focus(100),)))
    ts = 2 * 10**9
    n = MAX_GONE * 3
    for pid in range(100, 100 + n):  # each lives one poll (1 ms apart: all within the grace)
        state.apply(Batch(ts, (ProcSample(pid, f"cc{pid}", "u", 0, 4096, 0, 0, 0, 1, 0),)))
        ts += 10**6
    state.apply(Batch(ts, (ProcSample(1, "init", "u", 0, 4096, 0, 0, 0, 1, 0),)))
    procs = state.get(ProcessesState)
    assert len(procs.gone) == MAX_GONE
    assert 100 in procs.gone  # in focus: kept
    assert 100 + n - 1 in procs.gone and 101 not in procs.gone  # the newest kept, the oldest not
    # a gone row keeps what a drill-in shows (sample, history), not what only the table drew
    assert all(not r.spark and not r.spark_ts and r.history for r in procs.gone.values())


def test_a_sparkline_window_keeps_only_what_the_pane_shows_in_a_fixed_ring() -> None:
    """A process's RSS window (the sparkline and GROW/s) holds the last SPARK_LEN values and
    their times, oldest first, in a ring that does not grow with the ticks; a checkpoint (a
    pickle, memtop/stream/replay.py) gives it back as it was."""
    import pickle

    from memtop.records import Batch
    from memtop.records.processes import ProcSample
    from memtop.state import State
    from memtop.state.processes import I64_MAX, SPARK_LEN, ProcessesState

    state = State()
    n = SPARK_LEN * 5 + 7
    for i in range(n):
        ts = (i + 1) * 10**9
        state.apply(Batch(ts, (ProcSample(7, "grow", "u", 0, 4096 * (i + 1), 0, 0, 0, 0, 0),)))
    row = state.get(ProcessesState).rows[7]
    assert list(row.spark) == [4096 * (i + 1) for i in range(n - SPARK_LEN, n)]
    assert list(row.spark_ts) == [(i + 1) * 10**9 for i in range(n - SPARK_LEN, n)]
    assert (row.spark[0], row.spark[-1], len(row.spark)) == (4096 * (n - SPARK_LEN + 1), 4096 * n, SPARK_LEN)
    assert row.spark._data.buffer_info()[1] == SPARK_LEN  # the ring itself, nothing older
    back = pickle.loads(pickle.dumps(row.spark, protocol=pickle.HIGHEST_PROTOCOL))
    assert list(back) == list(row.spark)
    row.spark.append(1 << 64)  # a recording's uint64: kept at the top, not a crash
    assert row.spark[-1] == I64_MAX and len(row.spark) == SPARK_LEN
