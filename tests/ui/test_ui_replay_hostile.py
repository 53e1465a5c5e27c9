"""The TUI replaying a recording whose hostname, probe messages and process names hold terminal
escapes (OSC title change, CSI clear screen, C1 CSI): every one is shown as literal text, none
reaches the screen, and the replay runs on."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from support.ui import settle

from memtop.records import KIND_KEY, to_json
from memtop.records.host import MemInfo
from memtop.records.processes import ProcSample
from memtop.replay import Recording, ReplaySource
from memtop.ui.app import MemtopApp

HOSTILE = "evil\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x9b1m"


def hostile_recording(path: Path) -> Path:
    header = {
        "magic": "memtop-recording",
        "schema": [1, 0],
        "interval_s": 1.0,
        "hostname": HOSTILE,
        "probes": {
            "attached": [HOSTILE],
            "failed": [{"probe": "vmscan", "message": HOSTILE, "hint": HOSTILE}],
        },
    }
    status = {
        KIND_KEY: "probe_status",
        "probe": "procfs",
        "state": "failed",
        "message": HOSTILE,
        "hint": HOSTILE,
    }
    proc: dict[str, Any] = to_json(ProcSample(7, HOSTILE, HOSTILE, 0, 4096, 0, 0, 0, 1, 0, cmdline=HOSTILE))
    mem = to_json(MemInfo(8 << 30, 1 << 30, 4 << 30, 0, 0, 0, 0))
    lines = [json.dumps(header)]
    lines += [json.dumps({"ts_ns": 10**9 * (i + 1), "records": [status, mem, proc]}) for i in range(5)]
    path.write_bytes(gzip.compress("\n".join(lines).encode() + b"\n"))
    return path


async def test_escapes_in_a_recording_are_shown_literally(tmp_path: Path) -> None:
    rec = Recording.load(hostile_recording(tmp_path / "hostile.jsonl.gz"))
    app = MemtopApp(ReplaySource(rec, speed=100), interval_s=0.25, snapshot_dir=str(tmp_path))
    async with app.run_test(size=(200, 40)) as pilot:
        await settle(pilot)
        header = str(app.query_one("#header").render())
        assert "\\x1b]0;pwned" in header and "\x1b" not in header
        screen = app.export_screenshot()
        assert "\x1b" not in screen and "\x07" not in screen and "\x9b" not in screen
        assert "pwned" in screen  # shown, as text
        await pilot.press("left")  # a seek: the replay runs on
        assert app.is_running and app.state.batches >= 1
