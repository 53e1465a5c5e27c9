"""The widths a table's name columns are measured at (memtop/views/layout.py): with the widths
of the last call, a row object seen before is not formatted again (a tick that changed nothing
costs almost nothing), and the result is what measuring every row gives."""

from __future__ import annotations

import operator
import random
from typing import Any

from memtop.views import Column
from memtop.views.layout import RowWidths, Widest, measured_widths, remeasured, widest_of


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


def test_rows_replaced_in_place_are_the_only_ones_measured_and_the_widths_stay_exact() -> None:
    """A fill where a few rows were replaced in place (a process whose figures moved among
    1,000 idle ones) measures those rows only, and gives what measuring every row gives: also
    when a replaced row was one of the widest (another as wide is kept), and it says it cannot
    tell when the only widest row went (then every row is measured)."""
    measured: list[str] = []

    def name(v: Any) -> str:
        measured.append(str(v))
        return str(v)

    columns: tuple[Column[str], ...] = (Column("comm", "COMMAND", name, numeric=False),)
    given = [{"comm": c} for c in ("bash", "sshd", "python3", "python3", "sh")]
    known: RowWidths = {}
    widest = widest_of(columns, given, known)
    assert widest == Widest({"comm": 7}, [2])
    measured.clear()
    rows = [*given[:2], {"comm": "perl"}, *given[3:]]  # one of the two widest replaced
    got = remeasured(columns, rows, given, [2], known, widest)
    assert measured == ["perl"]
    assert got == Widest({"comm": 7}, [1]) and got.widths == measured_widths(columns, rows)
    rows2 = [*rows[:3], {"comm": "sh"}, *rows[4:]]  # the only widest left replaced
    assert remeasured(columns, rows2, rows, [3], known, got) is None
    assert widest_of(columns, rows2, known).widths == {"comm": 4} == measured_widths(columns, rows2)


def test_rows_replaced_at_random_give_the_widths_of_every_row_measured() -> None:
    rng = random.Random(41)
    columns: tuple[Column[str], ...] = (
        Column("comm", "COMMAND", str, numeric=False),
        Column("user", "USER", str, numeric=False),
        Column("rss", "RSS", numeric=True, width=6),
    )

    def row() -> dict[str, Any]:
        return {"comm": "x" * rng.randint(1, 12), "user": "u" * rng.randint(1, 6), "rss": 1}

    given = [row() for _ in range(40)]
    known: RowWidths = {}
    widest = widest_of(columns, given, known)
    for _ in range(300):
        rows = list(given)
        moved = sorted(rng.sample(range(len(rows)), rng.randint(0, 4)))
        for i in moved:
            rows[i] = row() if rng.random() < 0.8 else given[rng.randrange(len(given))]
        got = remeasured(columns, rows, given, moved, known, widest)
        if got is None:
            got = widest_of(columns, rows, known)
        fresh = widest_of(columns, rows, {})
        # the counts may fall short where a row object is listed twice (never in a view's rows):
        # then it measures every row sooner than it had to, never a wrong width
        assert got.widths == fresh.widths and all(map(operator.le, got.count, fresh.count))
        given, widest = rows, got
