"""Charts read at a glance (issue 22, item 2): round ticks in units, bytes in binary units."""

from __future__ import annotations

import weakref

import pytest

from memtop.core import fmt
from memtop.ui.charts import nice_ticks


def test_ticks_are_round_in_their_unit() -> None:
    assert [fmt.count_h(t) for t in nice_ticks(38_000)] == ["0", "10k", "20k", "30k", "40k"]
    assert [fmt.bytes_h(t) for t in nice_ticks(300e6, binary=True)] == ["0B", "100.0M", "200.0M", "300.0M"]
    ticks = nice_ticks(145_445.5)
    assert ticks[0] == 0 and ticks[-1] >= 145_445.5 and all(t == round(t) for t in ticks)
    assert nice_ticks(0) == [0.0, 1.0]  # nothing yet: an axis still


def test_the_top_tick_covers_the_data_with_few_ticks() -> None:
    for hi in (1, 7, 99.9, 1234, 5e6, 3.3e9):
        for binary in (False, True):
            t = nice_ticks(hi, binary=binary)
            assert t[-1] >= hi and 2 <= len(t) <= 7, (hi, binary, t)


class FakePlt:
    def __init__(self) -> None:
        self.calls = 0

    def __getattr__(self, name: str) -> object:
        def record(*_a: object, **_k: object) -> None:
            if name == "clear_figure":
                self.calls += 1

        return record


class FakePlot:
    def __init__(self) -> None:
        self.plt = FakePlt()

    def refresh(self) -> None:
        pass


def test_a_chart_redraws_only_when_its_data_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    from memtop.ui import charts

    shown: list[str] = []
    monkeypatch.setattr("memtop.ui.lines.show_text", lambda _w, t: shown.append(t.plain))
    plot = FakePlot()
    series: list[charts.Series] = [("anon", [0.0, 1.0], [5.0, 6.0])]
    charts.draw(plot, None, "rss", series, str)
    charts.draw(plot, None, "rss", series, str)
    assert plot.plt.calls == 1
    charts.draw(plot, None, "rss", [("anon", [0.0, 1.0], [5.0, 7.0])], str)
    assert plot.plt.calls == 2 and "anon" in shown[-1]


def test_a_steady_line_redraws_every_few_seconds_a_costly_chart_within_its_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 22, item 12: a line only one point longer (a steady process's history) is not a
    change worth a redraw every tick; a chart whose build takes long (a swap storm at 160x45)
    redraws no more often than CHART_CPU_BUDGET allows, and what it missed is drawn then."""
    from memtop.ui import charts

    clock = [100.0]
    monkeypatch.setattr("memtop.ui.charts.time.monotonic", lambda: clock[0])
    monkeypatch.setattr("memtop.ui.lines.show_text", lambda _w, _t: None)
    # charts drawn by earlier tests on the real clock are not on this screen
    monkeypatch.setattr(charts, "_asked", weakref.WeakKeyDictionary())
    plot = FakePlot()

    def flat(n: int) -> list[charts.Series]:
        return [("anon", [float(i) for i in range(n)], [5.0] * n)]

    charts.draw(plot, None, "rss", flat(3), str)
    for n in range(4, 8):  # one point longer a second, same values: not redrawn...
        clock[0] += 1
        charts.draw(plot, None, "rss", flat(n), str)
    assert plot.plt.calls == 1
    clock[0] += 1  # ...until STEADY_REDRAW_S passed
    charts.draw(plot, None, "rss", flat(9), str)
    assert plot.plt.calls == 2
    charts.draw(plot, None, "rss", [("anon", [0.0, 1.0], [5.0, 9.0])], str)  # a change: at once
    assert plot.plt.calls == 3

    clock[0] += charts.SHOWN_S  # the first chart is no longer shown
    costly = FakePlot()
    costly.build_s = 0.012  # type: ignore[attr-defined]
    gap = costly.build_s / charts.CHART_CPU_BUDGET  # type: ignore[attr-defined]
    for i in range(10):
        clock[0] += 1
        charts.draw(costly, None, "rate", [("scan", [0.0, 1.0], [float(i), 1.0])], str)
    assert costly.plt.calls == len([t for t in range(10) if t % int(gap + 1) == 0]) < 10

    # two such charts on screen together (vmscan's) share the budget: each redraws half as often
    clock[0] += charts.SHOWN_S
    pair = [FakePlot(), FakePlot()]
    for p in pair:
        p.build_s = 0.012  # type: ignore[attr-defined]
    for i in range(20):
        clock[0] += 1
        for p in pair:
            charts.draw(p, None, "rate", [("scan", [0.0, 1.0], [float(i), 1.0])], str)
    assert [p.plt.calls for p in pair] == [len([t for t in range(20) if t % int(2 * gap + 1) == 0])] * 2


class SizedPlt(FakePlt):
    def __init__(self) -> None:
        super().__init__()
        self.yticks_seen: list[list[float]] = []

    def yticks(self, ticks: list[float], _labels: list[str]) -> None:
        self.yticks_seen.append(list(ticks))


class SizedPlot:
    def __init__(self) -> None:
        self.plt = SizedPlt()
        self.size = (0, 0)

    def refresh(self) -> None:
        pass


def test_y_ticks_follow_the_charts_height_and_a_resize_redraws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 36, item 7: the cgroup detail chart had two y ticks at any height (and a top far
    above its data). A chart drawn before it was laid out (0x0) draws again when it is."""
    from memtop.ui import charts

    monkeypatch.setattr("memtop.ui.lines.show_text", lambda _w, _t: None)
    assert [charts.y_tick_count(h) for h in (0, 7, 10, 13, 20, 40)] == [1, 1, 2, 3, 4, 4]
    plot = SizedPlot()
    series: list[charts.Series] = [("swap", [0.0, 1.0], [200e6, 231e6])]
    charts.draw(plot, None, "memory", series, fmt.bytes_h, binary=True)
    assert len(plot.plt.yticks_seen[-1]) == 2  # 0x0: the bottom and a round top
    plot.size = (100, 13)
    charts.redraw(plot)  # what the Chart widget does on a resize, whatever the redraw budget
    ticks = plot.plt.yticks_seen[-1]
    assert len(ticks) == 4 and ticks[-1] >= 231e6 and ticks[-1] < 400 * 2**20


def test_series_colours_are_told_apart() -> None:
    """Anon and swap were one crimson: the named ANSI red and magenta in Textual's theme."""
    from memtop.ui.charts import PALETTE

    assert len({rich for _, rich in PALETTE}) == len(PALETTE)
    assert all(isinstance(rgb, tuple) and len(rgb) == 3 for rgb, _ in PALETTE)
