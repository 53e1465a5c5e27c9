"""Untrusted text: process names and command lines with markup, ANSI escapes, control characters,
wide/combining characters and invalid UTF-8 render literally everywhere and steer nothing."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import compile_c, memtop_cmd
from support.ui import settle

COMM = "[bold red]x[/]"
ARGS = [
    b"[link=file:///etc/passwd]y[/]",
    b"[@click=app.quit]z[/]",
    b"\x1b[31mred\x07",
    "宽字符e\u0301".encode(),
    b"bad\xff\xfeutf8",
]


@pytest.fixture
def hostile() -> Iterator[subprocess.Popen[bytes]]:
    exe = compile_c("named")
    proc = subprocess.Popen([str(exe), COMM.encode(), *ARGS], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"ready"
    yield proc
    proc.kill()
    proc.wait()


def check_literal(text: str) -> None:
    assert COMM in text
    assert "[link=file:///etc/passwd]y[/]" in text
    assert "[@click=app.quit]z[/]" in text
    assert "\x1b" not in text and "\x07" not in text  # escapes are shown, not sent to the terminal
    assert "\\x1b[31mred\\x07" in text
    assert "bad\\xff\\xfeutf8" in text  # each byte that is not UTF-8 shown as the kernel's log does


def test_snapshots_show_hostile_text_literally(hostile: subprocess.Popen[bytes], tmp_path: Path) -> None:
    for fmt in ("json", "txt", "svg"):
        out = tmp_path / f"s.{fmt}"
        # the SVG is a picture of the screen: the processes pane shows its top rows only, and on a
        # busy machine (CI beside other jobs: a thousand processes) the workload is not among
        # them; its drill-in shows its name whatever else runs
        pane = ["process", "--pid", str(hostile.pid)] if fmt == "svg" else ["processes"]
        proc = subprocess.run(
            memtop_cmd()
            + [
                "snapshot",
                "--no-bpf",
                "--pane",
                *pane,
                "--format",
                fmt,
                "--output",
                str(out),
                "--after",
                "0",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        text = out.read_text(encoding="utf-8")
        if fmt == "json":
            row = next(r for r in json.loads(text)["rows"] if r["pid"] == hostile.pid)
            assert row["comm"] == COMM
            check_literal(row["cmdline"])
        elif fmt == "txt":
            assert COMM in text
        else:
            assert COMM in text.replace("&#160;", " ")


async def test_tui_renders_hostile_text_literally(hostile: subprocess.Popen[bytes]) -> None:
    from rich.text import Text
    from textual.widgets import DataTable

    from memtop.probes.procfs import ProcfsProbe
    from memtop.stream.bridge import Bridge
    from memtop.ui.app import MemtopApp

    app = MemtopApp(Bridge([ProcfsProbe()]))
    async with app.run_test(size=(200, 40)) as pilot:
        await settle(pilot)
        await pilot.press("slash", *str(hostile.pid), "enter")
        await settle(pilot)
        table = app.query_one("#processes-table", DataTable)
        row = table.get_row(str(hostile.pid))
        cells = [c.plain if isinstance(c, Text) else str(c) for c in row]
        assert COMM in cells
        assert all(not c.spans for c in row if isinstance(c, Text) and COMM in c.plain)
        svg = app.export_screenshot().replace("&#160;", " ")
        assert COMM in svg
        assert app.is_running  # [@click=app.quit] did nothing
