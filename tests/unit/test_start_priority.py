"""The start's priority (memtop/runtime/priority.py): the terminal app starts with its session's
autogroup and its threads raised, and is back at the priority it was started with once its first
frame is drawn; commands that draw no app are never raised. Each case runs in a fresh interpreter
in a session of its own: the autogroup is the session's, and this one's is left alone."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import PtyMemtop
from support.waits import BOUND_S

from memtop.runtime import priority

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="raising a priority needs root")

#: what a fresh interpreter reads of itself: its autogroup's nice and every thread's. It starts at
#: nice 0, a default start, whatever the nice of the suite's runner (`nice make test`, a CI job
#: run niced): its one thread so far set back (root)
PRELUDE = """
import os, sys, threading
os.setpriority(os.PRIO_PROCESS, 0, 0)
from memtop import cli

def autogroup():
    return int(open("/proc/self/autogroup").read().split()[-1])

def nices():
    return {os.getpriority(os.PRIO_PROCESS, int(t)) for t in os.listdir("/proc/self/task")}
"""


def run_fresh(code: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(code), str(tmp_path / "o.json")],
        capture_output=True,
        text=True,
        timeout=BOUND_S,
        start_new_session=True,
    )
    assert proc.returncode == 0, proc.stderr


def test_the_app_starts_raised_and_every_thread_is_put_back(tmp_path: Path) -> None:
    """While `memtop` starts, its autogroup and its thread run BOOST nice values higher, and a
    thread it starts meanwhile inherits that; on the way out (here the app ends before a frame)
    the autogroup and every thread are back at 0."""
    run_fresh(
        f"""
        from memtop.commands import tui
        assert autogroup() == 0 and nices() == {{0}}, "not a default start"
        seen = {{}}
        started = threading.Event()
        done = threading.Event()

        def worker():
            seen["thread"] = os.getpriority(os.PRIO_PROCESS, 0)
            started.set()
            done.wait()

        def fake_tui(args):
            seen["autogroup"], seen["main"] = autogroup(), os.getpriority(os.PRIO_PROCESS, 0)
            threading.Thread(target=worker, daemon=True).start()
            started.wait()
            return 0

        tui.run_tui = fake_tui
        assert cli.main([]) == 0
        want = -{priority.BOOST}
        assert seen == {{"autogroup": want, "main": want, "thread": want}}, seen
        assert autogroup() == 0, autogroup()
        assert nices() == {{0}}, nices()  # the worker thread too, still running
        done.set()
        """,
        tmp_path,
    )


def test_commands_without_an_app_are_not_raised(tmp_path: Path) -> None:
    """`memtop snapshot` (and every command that draws no terminal app) runs as started."""
    run_fresh(
        """
        from memtop.commands import snapshot
        seen = {}

        def fake_snapshot(args):
            seen["autogroup"], seen["nices"] = autogroup(), nices()
            return 0

        snapshot.run_snapshot = fake_snapshot
        assert cli.main(["snapshot", "--pane", "processes", "--output", sys.argv[1]]) == 0
        assert seen == {"autogroup": 0, "nices": {0}}, seen
        """,
        tmp_path,
    )


def test_a_niced_start_is_left_as_started(tmp_path: Path) -> None:
    """A user who started memtop niced chose that: it is not raised, nor changed on the way out."""
    run_fresh(
        """
        from memtop.commands import tui
        os.setpriority(os.PRIO_PROCESS, 0, 5)
        seen = {}

        def fake_tui(args):
            seen["main"] = os.getpriority(os.PRIO_PROCESS, 0)
            return 0

        tui.run_tui = fake_tui
        assert cli.main([]) == 0
        assert seen == {"main": 5} and nices() == {5}, (seen, nices())
        """,
        tmp_path,
    )


def test_the_running_app_is_back_at_its_priority_after_the_first_frame() -> None:
    """The real terminal app, on a pseudo-terminal, still running: once drawn (its ready file says
    when its first frame was), its session's autogroup is at 0 and every one of its threads at the
    nice it was started with (the suite's: 0, or a niced runner's, left as started)."""
    started = os.getpriority(os.PRIO_PROCESS, 0)
    m = PtyMemtop(["--no-bpf"])
    try:
        doc = m.wait_ready()
        assert doc["first_frame_s"] is not None
        assert m.alive()
        ag = Path(f"/proc/{m.pid}/autogroup").read_text().split()[-1]
        threads = {
            int(Path(f"/proc/{m.pid}/task/{t}/stat").read_text().rsplit(")", 1)[1].split()[16])
            for t in os.listdir(f"/proc/{m.pid}/task")
        }
        assert ag == "0" and threads == {started}, (ag, threads)
        m.send(b"q")
        assert m.wait_gone(BOUND_S), "memtop did not quit on q"
    finally:
        m.kill()
