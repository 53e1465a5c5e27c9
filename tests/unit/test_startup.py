"""Start-up from the command line: no TLS on the way to the app, the garbage collector held for
commands that start one."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

from memtop.runtime import startup_gc


def test_commands_import_asyncio_without_tls(tmp_path: Path) -> None:
    """asyncio comes in as on a Python without TLS, so the app's imports load no OpenSSL (~11 ms of
    the start); ssl itself stays importable afterwards. A fresh interpreter: this one has asyncio."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import sys
        from memtop import cli
        from memtop.commands import snapshot

        def fake_snapshot(args):
            import asyncio.base_events
            import memtop.stream.bridge, memtop.ui.app
            assert "ssl" not in sys.modules, "ssl loaded on the way to the app"
            assert asyncio.base_events.ssl is None
            import ssl
            assert sys.modules["ssl"] is ssl and ssl.SSLContext
            return 0

        snapshot.run_snapshot = fake_snapshot
        sys.exit(cli.main(["snapshot", "--pane", "processes", "--output", sys.argv[1]]))
    """)
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "o.json")], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr


def test_collector_is_held_from_the_command_line_for_an_app_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`memtop` and `memtop snapshot` hold the garbage collector from their first line (the
    imports before the app ran ~40 collections); `memtop doctor` and `memtop export` (no app)
    get it back at once; every command gives it back on its way out."""
    import gc

    from memtop import cli

    seen: dict[str, bool] = {}

    def fake_snapshot(args: object) -> int:
        seen["snapshot"] = gc.isenabled()
        return 0

    def fake_report(as_json: bool) -> tuple[str, int]:
        seen["doctor"] = gc.isenabled()
        return "", 0

    def fake_export(args: object) -> int:
        seen["export"] = gc.isenabled()
        return 0

    monkeypatch.setattr("memtop.commands.snapshot.run_snapshot", fake_snapshot)
    monkeypatch.setattr("memtop.headless.doctor.report", fake_report)
    monkeypatch.setattr("memtop.commands.export.run_export", fake_export)
    try:
        assert gc.isenabled()
        assert cli.main(["snapshot", "--pane", "processes", "--output", str(tmp_path / "o.json")]) == 0
        assert seen["snapshot"] is False
        assert gc.isenabled()  # given back on the way out, when no first frame did
        assert cli.main(["doctor"]) == 0
        assert seen["doctor"] is True and gc.isenabled()
        # the exporter draws no app and runs for weeks: cycles its polls make must be collected
        assert cli.main(["export", "--textfile", str(tmp_path / "m.prom"), "--no-listen"]) == 0
        assert seen["export"] is True and gc.isenabled()
    finally:
        startup_gc.release()
        gc.enable()


def test_a_long_headless_snapshot_gives_the_collector_back_once_started(tmp_path: Path) -> None:
    """`memtop snapshot --after 7200` (JSON, no app, so no first frame to release it) held the
    collector for its whole run: every cycle its polls made stayed, RssAnon 56 -> 250 MiB in 40
    minutes. The polls after the first tick run with it on."""
    import asyncio
    import gc

    from support.fakes import FakeSource

    from memtop.headless.frontends import snapshot
    from memtop.headless.snapshots import SnapshotRequest

    class Watching(FakeSource):
        seen: list[bool] = []

        async def poll(self) -> Any:
            self.seen.append(gc.isenabled())
            return await super().poll()

    source = Watching()
    startup_gc.hold()
    try:
        assert not gc.isenabled()
        req = SnapshotRequest("processes", "json", str(tmp_path / "o.json"), after_s=0.05)
        asyncio.run(snapshot(source, req, interval_s=0.01))
        assert source.seen[0] is False  # start-up: still held
        assert source.seen[-1] is True and gc.isenabled()
    finally:
        startup_gc.release()
        gc.enable()


def test_the_tui_collects_at_its_steady_thresholds_after_the_first_frame() -> None:
    """Once the TUI's first frame is on screen the collector runs again, at thresholds that keep
    it from running several times a second over what each tick frees by itself."""
    saved = gc.get_threshold()
    startup_gc.hold()
    try:
        startup_gc.release(steady=True)
        assert gc.isenabled() and gc.get_threshold() == startup_gc.STEADY_THRESHOLDS
        assert startup_gc.STEADY_THRESHOLDS[0] > saved[0]
    finally:
        gc.set_threshold(*saved)
        gc.enable()
