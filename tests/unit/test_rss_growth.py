"""Flat must look flat, growth must show: a flat daemon with a page of jitter draws a flat
sparkline (not a leaker's slope), and the GROW/s column gives RSS change per second over the
sparkline's window, sortable; on the pressure recording the leaker grows and the idle shell does
not."""

from __future__ import annotations

from pathlib import Path

import pytest

from memtop.core import fmt
from memtop.state.processes import ProcessesState, ProcRow, rss_growth_per_s
from memtop.stream.recfile import Recording
from memtop.ui.panes.processes import SPARK_MIN_SPAN, SPARK_WIDTH
from memtop.views import Options, get_view
from memtop.views import processes as processes_view
from memtop.views.processes import growth_h

PRESSURE = Path(__file__).resolve().parents[1] / "data" / "pressure.jsonl.gz"
MIB = 1 << 20


def test_a_flat_line_with_jitter_draws_flat_and_a_leak_climbs() -> None:
    flat = [12 * MIB + (4096 if i % 2 else 0) for i in range(SPARK_WIDTH)]
    assert set(fmt.sparkline(flat, SPARK_WIDTH, SPARK_MIN_SPAN)) == {"▁"}
    leak = [12 * MIB + i * MIB // 2 for i in range(SPARK_WIDTH)]  # 0.5 MiB/s from 12 MiB
    drawn = fmt.sparkline(leak, SPARK_WIDTH, SPARK_MIN_SPAN)
    assert drawn[0] == "▁" and drawn[-1] == "█" and list(drawn) == sorted(drawn)


def test_growth_is_the_window_s_slope() -> None:
    rec = Recording.load(PRESSURE)
    state = rec.state_at(rec.ts_at(30.0))
    procs = state.get(ProcessesState)
    leaky = next(r for r in procs.rows.values() if r.sample.comm == "leaky")
    expected = (leaky.spark[-1] - leaky.spark[0]) * 1e9 / (leaky.spark_ts[-1] - leaky.spark_ts[0])
    assert expected > 100_000  # it leaks
    assert rss_growth_per_s(leaky) == expected
    doc = get_view("processes").document(state, Options(sort="rss_growth_bytes_per_s"))
    rows = doc["rows"]
    assert rows[0]["comm"] == "leaky" and rows[0]["rss_growth_bytes_per_s"] == round(expected, 1)
    assert next(r for r in rows if r["comm"] == "bash")["rss_growth_bytes_per_s"] == 0
    assert growth_h(expected).startswith("+") and growth_h(-2048.0) == "-2.0K" and growth_h(0.2) == "0"


def test_a_flat_window_is_not_measured_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process whose window holds one value grows at 0.0 without its ring being read (with
    1,000 idle processes the ring reads were half of the Processes document); one whose window
    moved is measured, and every figure is what measuring all of them gives."""
    rec = Recording.load(PRESSURE)
    state = rec.state_at(rec.ts_at(30.0))
    procs = state.get(ProcessesState)
    flat = {pid for pid, r in procs.rows.items() if len(r.spark) and r.spark_same >= len(r.spark)}
    moved = set(procs.rows) - flat
    assert flat and moved  # the recording has both
    measured: list[int] = []

    def counted(row: ProcRow) -> float:
        measured.append(row.sample.pid)
        return rss_growth_per_s(row)

    monkeypatch.setattr(processes_view, "rss_growth_per_s", counted)
    rows = get_view("processes").document(state, Options())["rows"]
    assert set(measured) == moved
    assert {r["pid"]: r["rss_growth_bytes_per_s"] for r in rows} == {
        pid: round(rss_growth_per_s(r), 1) for pid, r in procs.rows.items()
    }
