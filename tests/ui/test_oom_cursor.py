"""OOM pane: a new kill takes the cursor (the cursor stayed on an older kill and Enter opened the
wrong process), and ages read as people say them (issue 22, item 6)."""

from __future__ import annotations

import dataclasses

from support import FakeSource
from support.ui import drive
from textual.widgets import DataTable

from memtop.core import fmt
from memtop.records import Batch, ProbeStatus
from memtop.records.oom import OomKill
from memtop.ui.app import MemtopApp

KILL = OomKill(
    ts_ns=10**9, victim_pid=101, victim_comm="old", trigger_pid=101, trigger_comm="old", scope="memcg",
    total_vm_bytes=1 << 30, anon_rss_bytes=1 << 29, file_rss_bytes=0, shmem_rss_bytes=0, uid=0,
    oom_score_adj=0,
)  # fmt: skip


async def test_a_new_kill_takes_the_cursor() -> None:
    first = Batch(10**9, (ProbeStatus("oom", "attached"), KILL))
    second = Batch(
        2 * 10**9, (dataclasses.replace(KILL, ts_ns=2 * 10**9, victim_pid=202, victim_comm="new"),)
    )
    source = FakeSource([first, second])
    app = MemtopApp(source, initial_pane="oom")
    async with app.run_test(size=(120, 30)) as pilot:
        await drive(app, pilot)
        table = app.query_one("#oom-table", DataTable)
        assert table.row_count == 1
        await drive(app, pilot)
        assert table.row_count == 2 and table.cursor_row == 0
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        assert key == str(2 * 10**9)  # the new kill, whose victim Enter opens


def test_ages_read_as_people_say_them() -> None:
    assert fmt.age_h(5.24) == "5.2s"
    assert fmt.age_h(1131.14) == "18m51s"
    assert fmt.age_h(3 * 3600 + 5 * 60) == "3h05m"
    assert fmt.age_h(2 * 86400 + 4 * 3600) == "2d04h"
    assert fmt.age_h(None) == "-"
