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

        async def poll(self, at: float | None = None) -> Any:
            self.seen.append(gc.isenabled())
            return await super().poll(at)

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


def test_the_doctors_checks_name_bccs_version_without_loading_llvm() -> None:
    """`memtop export --no-bpf` runs the doctor's checks at start: the BCC check reads the
    package's version without importing it (importing loads libbcc and LLVM: ~14 MiB of RssAnon
    for a version string). A fresh interpreter, and the version equals the one bcc gives."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import sys
        from memtop.headless import doctor
        bcc = [c for c in doctor.run_checks() if c.name == "bcc"]
        assert len(bcc) == 1, bcc
        assert "bcc" not in sys.modules, "bcc imported for the doctor's checks"
        maps = open("/proc/self/maps").read()
        assert "libLLVM" not in maps and "libbcc.so" not in maps, "LLVM loaded"
        try:
            import bcc as real
        except ImportError:
            assert not bcc[0].ok
        else:
            assert bcc[0].ok and bcc[0].detail == real.__version__, (bcc[0], real.__version__)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_a_pause_gives_the_collector_back_once_the_last_pause_and_the_hold_end() -> None:
    """startup_gc.paused (the page cache probe's bulk scan, in a worker thread) shares one count
    with the start-up hold: the collector is on again only when the last pause has ended and the
    hold was released, and a pause begun while it was off leaves it off."""
    import gc

    assert gc.isenabled()
    try:
        with startup_gc.paused():
            assert not gc.isenabled()
            with startup_gc.paused():  # another thread's, nested in time
                assert not gc.isenabled()
            assert not gc.isenabled()  # the first is still running
        assert gc.isenabled()
        # the hold taken during a pause: the pause's end leaves it off, the release turns it on
        with startup_gc.paused():
            startup_gc.hold()
        assert not gc.isenabled()
        startup_gc.release()
        assert gc.isenabled()
        # released during a pause: on once the pause ends, not before
        startup_gc.hold()
        with startup_gc.paused():
            startup_gc.release()
            assert not gc.isenabled()
        assert gc.isenabled()
        # off before (gc.disable by someone else): a pause does not turn it on
        gc.disable()
        with startup_gc.paused():
            pass
        assert not gc.isenabled()
    finally:
        startup_gc.release()
        gc.enable()  # the test disabled it last: the tests after it run with it on


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
