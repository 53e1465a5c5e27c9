"""What the leaks figures leave out is said in every output (issue 25, item 4): allocations lost to
full maps in the JSON, the text and the folded file; every asked-for pid with its reason."""

from __future__ import annotations

from memtop.records import Batch, Lost, ProbeStatus
from memtop.records.leaks import LeakStack, LeakTarget
from memtop.state import State
from memtop.views import Options
from memtop.views.leaks import LeaksView


def state_with_losses() -> State:
    st = State(mode="bpf")
    st.apply(
        Batch(
            1_000_000_000,
            (
                ProbeStatus("leaks", "attached"),
                LeakTarget(
                    7, "leaker", "tracing", "jemalloc: 28 symbols in libjemalloc.so.2", allocator="jemalloc"
                ),
                LeakTarget(
                    8, "gostuff", "failed", "go: a Go program allocates with runtime.mallocgc", allocator="go"
                ),
                LeakStack(7, 1, ("leak_here+0x1 [leaker]",), 8192, 2, 0, 0),
                Lost("leaks", "allocations (address map full)", 137),
                Lost("leaks", "stacks (no stack id)", 0),
            ),
        )
    )
    return st


def test_losses_and_refusals_in_json_text_and_folded() -> None:
    st, view = state_with_losses(), LeaksView()
    doc = view.document(st, Options())
    assert doc["lost"] == {"allocations (address map full)": 137, "stacks (no stack id)": 0}
    targets = {t["pid"]: t for t in doc["targets"]}
    assert (
        targets[8]["state"] == "failed"
        and targets[8]["allocator"] == "go"
        and "mallocgc" in targets[8]["message"]
    )
    assert targets[7]["allocator"] == "jemalloc"
    text = view.text(st, Options())
    assert "lost: 137 allocations (address map full): not counted" in text
    assert "stacks (no stack id)" not in text  # a zero is no news
    folded = view.export(st, Options(), "folded").splitlines()
    assert folded[0] == "# memtop: 137 allocations (address map full) lost, not counted"
    assert folded[1] == "leaker [pid 7];leak_here+0x1 [leaker] 8192"
