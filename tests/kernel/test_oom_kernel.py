"""OOM pane: a real memcg OOM kill (swap forbidden for the cgroup) seen with the victim, scope and
RSS the kernel had."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support import compile_c, memcg, vmstat, wait_until

from memtop.probes.oom import OomProbe
from memtop.records import Batch
from memtop.records.oom import OomKill
from memtop.state import State
from memtop.state.oom import OomState
from memtop.stream.bridge import now_ns
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

            def polled() -> bool:  # the kill's event, through the ring buffer
                recs = probe.poll()
                state.apply(Batch(now_ns(), tuple(recs)))
                events.extend(r for r in recs if isinstance(r, OomKill) and r.victim_pid == w.pid)
                return bool(events)

            wait_until(polled, "the OOM kill's event")
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


def dmesg_kill(pid: int) -> tuple[int, str]:
    """(timestamp µs since boot of the report, its oom-kill summary line) of ``pid``'s kill, as
    ``dmesg`` prints them (the report starts at the ``invoked oom-killer`` line before it)."""
    lines = subprocess.run(["dmesg"], capture_output=True, text=True, check=True).stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if f"Killed process {pid} " in line)
    start = max(i for i in range(at) if "invoked oom-killer" in lines[i])
    summary = next(line for line in lines[start:at] if "oom-kill:" in line)
    stamp = lines[start].split("]", 1)[0].strip("[ ")
    secs, _, micros = stamp.partition(".")
    return int(secs) * 1_000_000 + int(micros), summary


@pytest.mark.bpf
def test_kill_before_start_is_in_the_first_snapshot() -> None:
    """A memcg OOM kill that happened before memtop started: its first snapshot lists it, read
    from the kernel log, with the victim, the memcg and the time dmesg shows, and the memcg's own
    counter (memory.oom_control) beside it."""
    from support import run_snapshot

    exe = compile_c("swapfill")
    with memcg(100 * MiB, swap=False) as cg:
        w = subprocess.Popen([str(exe), "300"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert w.stdout is not None and w.stdin is not None
        assert w.stdout.readline().startswith("ready")
        cg.add(w.pid)
        w.stdin.write("go\n")
        w.stdin.flush()
        assert w.wait(timeout=60) == -9, "the workload was not killed"
        kills = oom_kills(cg.path)
        ts_us, summary = dmesg_kill(w.pid)
        doc = run_snapshot("oom", 0)
    assert kills == 1
    ev = next(e for e in doc["events"] if e["victim_pid"] == w.pid)
    assert ev["source"] == "kmsg"
    assert ev["victim_comm"] == "swapfill" and ev["scope"] == "memcg"
    assert ev["memcg"] == f"/{cg.name}" and f"oom_memcg=/{cg.name}," in summary
    assert ev["ts_ns"] == ts_us * 1000  # the report's own timestamp
    assert ev["at"] is not None and ev["trigger_pid"] == w.pid
    assert ev["memcg_limit_bytes"] == 100 * MiB
    assert 0.7 * 100 * MiB <= ev["anon_rss_bytes"] <= 100 * MiB
    assert ev["top_tasks"] and ev["top_tasks"][0]["pid"] == w.pid
    assert doc["before_start"] >= 1
    counters = {c["path"]: c for c in doc["cgroups"]}
    assert counters[f"/{cg.name}"]["oom_kill"] == kills
