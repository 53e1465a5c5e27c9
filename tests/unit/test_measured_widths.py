"""The widths a table's name columns are measured at (memtop/views/layout.py): with the widths
of the last call, a row object seen before is not formatted again (a tick that changed nothing
costs almost nothing), and the result is what measuring every row gives."""

from __future__ import annotations

from typing import Any

from memtop.views import Column
from memtop.views.layout import RowWidths, measured_widths


def test_rows_seen_before_are_not_formatted_again_and_the_widths_are_exact() -> None:
    formatted: list[Any] = []

    def name(v: Any) -> str:
        formatted.append(v)
        return str(v)

    columns: tuple[Column[str], ...] = (
        Column("comm", "COMMAND", name, numeric=False),
        Column("rss", "RSS", numeric=True, width=6),  # of known width: never measured
    )
    rows = [{"comm": "bash", "rss": 1}, {"comm": "python3", "rss": 2}]
    known: RowWidths = {}
    assert measured_widths(columns, rows, known) == {"comm": 7} == measured_widths(columns, rows)
    formatted.clear()
    assert measured_widths(columns, rows, known) == {"comm": 7}
    assert formatted == []  # the same row objects: nothing formatted
    rows = [rows[0], {"comm": "a-much-longer-name", "rss": 2}]  # one row changed
    assert measured_widths(columns, rows, known) == {"comm": 18}
    assert formatted == ["a-much-longer-name"]
    rows = rows[:1]  # the widest row gone: the column narrows again
    assert measured_widths(columns, rows, known) == {"comm": 4} == measured_widths(columns, rows)
    assert measured_widths(columns, [], known) == {"comm": 0}
