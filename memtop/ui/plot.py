"""The chart widget: textual-plotext's plot, built only when what it shows changed.

``PlotextPlot.render`` rebuilds the whole plotext canvas (and re-parses its ANSI text) whenever
Textual asks for the widget's content, and Textual asks on every layout pass of the screen, not
only when the chart's data changed: on an idle drill-in that was most of memtop's CPU
(bench/pane_cost.py). ``charts.draw`` bumps ``generation`` when the data changes; the built text
is kept until then or until the size or theme changes. Imported only where a chart is shown
(plotext is slow to import)."""

from __future__ import annotations

import time
from typing import Any

from textual.app import RenderResult
from textual_plotext import PlotextPlot


class Chart(PlotextPlot):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: bumped by charts.draw each time the plotted data changes
        self.generation = 0
        self._built: tuple[tuple[int, int, str, int], RenderResult] | None = None
        #: seconds of CPU the last build took (charts.draw spaces the redraws of costly charts)
        self.build_s = 0.0

    def data_changed(self) -> None:
        """What it plots changed (charts.draw): build the canvas anew on the next render."""
        self.generation += 1
        self.refresh()

    def on_resize(self) -> None:
        from memtop.ui import charts

        charts.redraw(self)  # the y ticks follow the height

    def render(self) -> RenderResult:
        key = (self.size.width, self.size.height, self.app.theme, self.generation)
        if self._built is None or self._built[0] != key:
            t0 = time.thread_time()
            self._built = (key, super().render())
            self.build_s = time.thread_time() - t0
        return self._built[1]
