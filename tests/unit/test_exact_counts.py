"""Cumulative counts read side by side (reclaim episodes seen and received, lost) are shown whole,
so their difference shows; a count not measured is "-"."""

from __future__ import annotations

from pathlib import Path

from memtop.core import fmt
from memtop.state import State
from memtop.stream.replay import Recording
from memtop.views import Options, views

PRESSURE = Path(__file__).resolve().parents[1] / "data" / "pressure.jsonl.gz"


def test_count_is_exact_and_a_dash_when_not_measured() -> None:
    assert fmt.count(36518) == "36518"
    assert fmt.count(0) == "0"
    assert fmt.count(None) == "-"


def test_reclaim_text_gives_received_and_total_whole() -> None:
    state = State(mode="replay")
    for b in Recording.load(PRESSURE).batches():
        state.apply(b)
    view = views()["reclaim"]()
    doc = view.document(state, Options())
    text = view.text(state, Options())
    total = doc["events_total"]["memcg"]
    assert total >= 10_000 and doc["events_received"] != total  # a difference an abbreviation hides
    assert f"memcg reclaim latency ({total} episodes)" in text
    assert f"events received {doc['events_received']}, lost {doc['lost_events']}" in text


def test_unmeasured_reclaim_counts_are_dashes() -> None:
    text = views()["reclaim"]().text(State(mode="procfs"), Options())
    assert "events received -, lost -" in text
    assert "(- episodes)" in text
