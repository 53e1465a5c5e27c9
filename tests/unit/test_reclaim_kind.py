"""The Reclaim pane's kind (K, `--section`) picks what the process table counts, as it picks the
histogram: a process that stalled in both kinds shows only the chosen kind's stalls."""

from __future__ import annotations

from support import vmscan_batches

from memtop.records import Batch
from memtop.records.reclaim import ReclaimTotals
from memtop.state import State
from memtop.views import Options, get_view


def state_with_both_kinds() -> State:
    batches = vmscan_batches()
    both = ReclaimTotals(
        histogram=(("memcg", 14, 3), ("direct", 20, 2)),
        pids=(
            (4242, "hog", "memcg", 3, 90_000, 40_000, 96),
            (4242, "hog", "direct", 1, 2_000_000, 2_000_000, 10),
            (77, "x", "direct", 1, 1_500_000, 1_500_000, 32),
        ),
    )
    state = State(mode="bpf")
    state.apply(batches[0])
    state.apply(Batch(batches[1].ts_ns, (*batches[1].records, both)))
    return state


def test_all_kinds_sum_each_process() -> None:
    rows = {r["pid"]: r for r in get_view("reclaim").document(state_with_both_kinds(), Options())["rows"]}
    assert rows[4242]["events"] == 4 and rows[4242]["total_ns"] == 2_090_000
    assert rows[4242]["max_ns"] == 2_000_000 and rows[4242]["pages_reclaimed"] == 106
    assert rows[4242]["direct_events"] == 1 and rows[4242]["memcg_events"] == 3
    assert set(rows) == {4242, 77}


def test_one_kind_counts_only_its_stalls() -> None:
    view = get_view("reclaim")
    memcg = view.document(state_with_both_kinds(), Options(section="memcg"))
    assert [r["pid"] for r in memcg["rows"]] == [4242]  # 77 never stalled in memcg reclaim
    row = memcg["rows"][0]
    assert (row["events"], row["total_ns"], row["max_ns"], row["avg_ns"]) == (3, 90_000, 40_000, 30_000)
    assert (row["pages_reclaimed"], row["memcg_events"], row["direct_events"]) == (96, 3, 0)
    direct = view.document(state_with_both_kinds(), Options(section="direct"))
    rows = {r["pid"]: r for r in direct["rows"]}
    assert set(rows) == {4242, 77}
    assert (rows[4242]["events"], rows[4242]["total_ns"], rows[4242]["memcg_events"]) == (1, 2_000_000, 0)
    assert {b["kind"] for b in direct["histogram"]} == {"direct"}
