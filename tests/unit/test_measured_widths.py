"""The widths a table's name columns are measured at (memtop/views/layout.py): with the widths
of the last call, a row object seen before is not formatted again (a tick that changed nothing
costs almost nothing), and the result is what measuring every row gives."""

from __future__ import annotations

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


def test_rows_that_came_are_the_only_ones_measured_and_the_widths_stay_exact() -> None:
    """A fill where a few rows came and went (a process whose figures moved among 1,000 idle
    ones, a process started, one gone) measures the rows that came only, and gives what
    measuring every row gives: also when a row that went was one of the widest (another as
    wide is kept); it says it cannot tell when the only widest row went (then every row is
    measured)."""
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
    perl = {"comm": "perl"}
    rows = [*given[:2], perl, *given[3:]]  # one of the two widest replaced
    got = remeasured(columns, [perl], [id(given[2])], known, widest)
    assert measured == ["perl"]
    assert got == Widest({"comm": 7}, [1]) and got.widths == measured_widths(columns, rows)
    # the only widest replaced by a row as wide (its figures moved): told from that row alone
    again = {"comm": "python3"}
    measured.clear()
    got = remeasured(columns, [again], [id(rows[3])], known, got)
    rows = [*rows[:3], again, *rows[4:]]
    assert measured == ["python3"]
    assert got == Widest({"comm": 7}, [1]) == widest_of(columns, rows, {})
    # the only widest gone, a short one come: cannot tell
    assert remeasured(columns, [{"comm": "sh"}], [id(rows[3])], known, got) is None
    rows2 = [*rows[:3], *rows[4:]]
    assert widest_of(columns, rows2, known).widths == {"comm": 4} == measured_widths(columns, rows2)


def test_rows_that_come_go_and_move_at_random_give_the_widths_of_every_row_measured() -> None:
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
    untold = 0
    for _ in range(300):
        rows = [r for r in given if rng.random() > 0.05]  # some go
        rows += [row() for _ in range(rng.randint(0, 3))]  # some come
        rng.shuffle(rows)  # and the order moves
        came = [r for r in rows if all(r is not g for g in given)]
        went = [id(g) for g in given if all(g is not r for r in rows)]
        got = remeasured(columns, came, went, known, widest)
        if got is None:
            untold += 1
            got = widest_of(columns, rows, known)
        assert got == widest_of(columns, rows, {})
        given, widest = rows, got
    assert untold < 150  # most fills are told from the rows that came and went


def test_row_keys_are_unique_as_a_table_needs_them() -> None:
    """Each row's key as a string; a key listed again gets a suffix (a table's keys are unique),
    whether or not the keys were unique to begin with."""
    from memtop.ui.panes.base import _unique_keys

    assert _unique_keys([{"pid": 3}, {"pid": 1}, {"pid": 2}], "pid") == ["3", "1", "2"]
    rows: list[dict[str, object]] = [{"k": 1}, {"k": 2}, {"k": 1}, {"k": "1"}, {"k": 2}]
    assert _unique_keys(rows, "k") == ["1", "2", "1#1", "1#2", "2#1"]
    assert _unique_keys([], "k") == []
