"""OOM pane: a real memcg OOM kill (swap forbidden for the cgroup) seen with the victim, scope and
RSS the kernel had; the notice on any screen; older kernels' missing fields."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import ClassVar

import pytest
from support import compile_c, memcg, vmstat

from memtop.bridge import Bridge, now_ns
from memtop.probes.base import Probe
from memtop.probes.oom import OomProbe, parse_kmsg_kill
from memtop.records import Batch, Record, from_json, to_json
from memtop.records.oom import OomKill
from memtop.state import State
from memtop.state.oom import OomState
from memtop.text import clean
from memtop.views import Options, get_view

MiB = 1 << 20


def oom_kills(cg_path: Path) -> int:
    """The cgroup's own count of OOM kills (v1 memory.oom_control, v2 memory.events)."""
    for name in ("memory.oom_control", "memory.events"):
        p = cg_path / name
        if p.exists():
            for line in p.read_text().splitlines():
                k, _, v = line.partition(" ")
                if k == "oom_kill":
                    return int(v)
    return -1


@pytest.mark.bpf
def test_memcg_oom_kill_shows_victim_scope_and_rss() -> None:
    exe = compile_c("swapfill")
    probe = OomProbe()
    probe.load()
    state = State(mode="bpf")
    limit = 100 * MiB
    try:
        with memcg(limit, swap=False) as cg:
            w = subprocess.Popen([str(exe), "300"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert w.stdout is not None and w.stdin is not None
            assert w.stdout.readline().startswith("ready")
            cg.add(w.pid)
            kills_before, vm_before = oom_kills(cg.path), vmstat().get("oom_kill", 0)
            w.stdin.write("go\n")
            w.stdin.flush()
            rc = w.wait(timeout=60)
            kills = oom_kills(cg.path) - kills_before
            vm_kills = vmstat().get("oom_kill", 0) - vm_before
            events: list[OomKill] = []
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                recs = probe.poll()
                state.apply(Batch(now_ns(), tuple(recs)))
                events += [r for r in recs if isinstance(r, OomKill) and r.victim_pid == w.pid]
                if events:
                    break
                time.sleep(0.2)
    finally:
        probe.close()
    assert rc == -9, f"the workload was not killed (rc {rc})"
    assert kills == 1 and vm_kills >= 1, (kills, vm_kills)
    assert len(events) == 1, "memtop did not see the kill"
    doc = get_view("oom").document(state, Options())
    ev = next(e for e in doc["events"] if e["victim_pid"] == w.pid)
    assert ev["victim_comm"] == "swapfill"
    assert ev["scope"] == "memcg"
    assert ev["trigger_pid"] == w.pid and ev["trigger_comm"] == "swapfill"  # it charged the page
    # RSS at the kill: the cgroup was full of its anonymous memory, nothing swapped (forbidden)
    assert 0.7 * limit <= ev["anon_rss_bytes"] <= limit, ev
    assert ev["total_vm_bytes"] >= 300 * MiB  # its 300 MiB mapping
    assert ev["shmem_rss_bytes"] == 0 and ev["file_rss_bytes"] < 20 * MiB
    assert ev["oom_score_adj"] == int(Path("/proc/self/oom_score_adj").read_text())  # inherited
    assert ev["uid"] == 0 and ev["missing"] == []
    assert ev["ts_ns"] > 0 and len(ev["loadavg"]) == 3
    if events[0].memcg:  # the kernel log said which memcg
        assert events[0].memcg.endswith(cg.name)
    # the log survives the victim, and the app gets one notice for it
    notices = state.get(OomState).pop_notices()
    assert len(notices) == 1 and "swapfill" in notices[0][0] and str(w.pid) in notices[0][0]
    assert state.get(OomState).pop_notices() == []
    txt = get_view("oom").text(state, Options())
    assert "swapfill" in txt and "memcg" in txt


def test_kmsg_parsing() -> None:
    line = (
        "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
        "oom_memcg=/memtop-test-1,task_memcg=/memtop-test-1,task=a,b c,pid=42,uid=1000"
    )
    assert parse_kmsg_kill(line) == (42, "memcg", "/memtop-test-1")
    line = "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/,task=x,pid=7,uid=0"
    assert parse_kmsg_kill(line) == (7, "global", "")
    assert parse_kmsg_kill("Out of memory: Killed process 7 (x)") is None


KILL = OomKill(
    ts_ns=5_000_000_000,
    victim_pid=4242,
    victim_comm=clean("[red]evil\x07"),
    trigger_pid=99,
    trigger_comm="alloc",
    scope="global",
    total_vm_bytes=3 << 30,
    anon_rss_bytes=2 << 30,
    file_rss_bytes=1 << 20,
    shmem_rss_bytes=0,
    uid=1000,
    oom_score_adj=300,
    pgtables_bytes=4 << 20,
    loadavg=(1.5, 1.0, 0.5),
)


def test_record_round_trip() -> None:
    assert from_json(to_json(KILL)) == KILL


class FakeOom(Probe):
    name = "oom"
    needs_bpf = False
    cadence_s = 0.0
    pending: ClassVar[list[Record]] = []

    def load(self) -> None:
        pass

    def poll(self) -> list[Record]:
        out, FakeOom.pending = list(FakeOom.pending), []
        return out


async def test_notice_on_any_screen_and_pane() -> None:
    from textual.widgets import DataTable

    from memtop.ui.app import MemtopApp

    source = Bridge([FakeOom()])
    app = MemtopApp(source, initial_pane="processes")
    shown: list[tuple[str, bool]] = []
    orig = app.notify

    def spy(message: str, **kw: object) -> None:
        shown.append((message, bool(kw.get("markup", True))))
        orig(message, **kw)  # type: ignore[arg-type]

    app.notify = spy  # type: ignore[method-assign]
    async with app.run_test(size=(170, 40)) as pilot:
        await pilot.pause(0.3)
        FakeOom.pending = [KILL]
        await app._tick()  # the app's own timer path, on the processes pane
        await pilot.pause(0.1)
        assert any("evil" in m and "4242" in m and not markup for m, markup in shown), shown
        n = len(shown)
        await app._tick()
        assert len(shown) == n  # once per kill
        app.show_pane("oom")
        await pilot.pause(0.2)
        app.redraw()
        await pilot.pause(0.1)
        table = app.query_one("#oom-table", DataTable)
        assert table.row_count == 1
        row = [str(c) for c in table.get_row_at(0)]
        assert "4242" in row and "global" in row and "[red]evil\\x07" in row
        app.paused = True  # no redraw from a timer tick while the app tears down
    doc = get_view("oom").document(app.state, Options())
    assert doc["pane"] == "oom" and doc["total"] == 1
    assert set(doc["events"][0]) >= {
        "ts_ns",
        "victim_pid",
        "victim_comm",
        "trigger_pid",
        "trigger_comm",
        "scope",
        "total_vm_bytes",
        "anon_rss_bytes",
        "file_rss_bytes",
        "shmem_rss_bytes",
        "uid",
        "oom_score_adj",
    }
