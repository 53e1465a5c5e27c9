"""A pane whose probe failed (or never ran) says so and shows no zero as a measurement: documents
carry the probes' statuses and null figures, text snapshots a note; the same through `memtop
snapshot` and `--batch` on a recording whose statuses say the probe failed."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from fakeproc import make_fake_proc
from support import memtop_cmd

from memtop.cli import main
from memtop.probes.procfs import ProcfsProbe
from memtop.records import Batch, ProbeStatus, Record
from memtop.records.process import FaultCoverage, FaultStack
from memtop.state import State
from memtop.stream.recording import open_recorder
from memtop.views import Options, get_view

FAILED = ProbeStatus("vmscan", "failed", "kernel lacks tracepoint(s) vmscan:mm_vmscan_x", "see memtop doctor")


def procfs_batches(tmp_path: Path, n: int = 2) -> list[Batch]:
    probe = ProcfsProbe(make_fake_proc(tmp_path / "proc"))
    return [Batch(10**9 * (i + 1), tuple(probe.poll())) for i in range(n)]


def state_with(tmp_path: Path, *statuses: ProbeStatus) -> State:
    state = State("bpf")
    batches = procfs_batches(tmp_path)
    state.apply(Batch(1, (ProbeStatus("procfs", "attached"), *statuses)))
    for b in batches:
        state.apply(b)
    return state


def doc(state: State, pane: str, **kw: Any) -> dict[str, Any]:
    return get_view(pane).document(state, Options(**kw))


def test_vmscan_failed_is_null_not_zero(tmp_path: Path) -> None:
    state = state_with(tmp_path, FAILED)
    d = doc(state, "vmscan")
    assert d["probes"]["vmscan"] == {
        "state": "failed",
        "message": FAILED.message,
        "hint": FAILED.hint,
        "failures": 0,
        "reading_age_s": None,
    }
    assert d["rows"] == [] and d["slab_shrink"] == []
    assert d["kswapd_wakes"] is None and d["kswapd_wakes_per_s"] is None and d["compaction"]["count"] is None
    assert d["kernel"]["have_vmstat"]  # /proc/vmstat's part is procfs's: still there
    text = get_view("vmscan").text(state, Options())
    assert text.startswith(f"note: vmscan failed — {FAILED.message} (hint: {FAILED.hint})")
    assert "kswapd wakes -" in text and "kswapd wakes 0" not in text and "Compaction: - runs" in text
    # reclaim (the same probe) and the processes' reclaim column
    r = doc(state, "reclaim")
    assert r["events_total"] == {"direct": None, "memcg": None} and r["events_received"] is None
    assert "note: vmscan failed" in get_view("reclaim").text(state, Options())
    rows = doc(state, "processes")["rows"]
    assert rows and all(row["reclaim_stall_ns"] is None and row["swapin_wait_ns"] is None for row in rows)
    # attached: a zero is a measurement
    ok = state_with(tmp_path / "ok", ProbeStatus("vmscan", "attached"), ProbeStatus("swapin", "attached"))
    assert doc(ok, "vmscan")["kswapd_wakes"] == 0
    assert all(row["reclaim_stall_ns"] == 0 for row in doc(ok, "processes")["rows"])
    assert "note:" not in get_view("vmscan").text(ok, Options())


def test_probes_that_never_ran_or_are_attaching(tmp_path: Path) -> None:
    state = state_with(tmp_path, ProbeStatus("oom", "attaching", "attaching…"))
    assert doc(state, "oom")["total"] is None
    assert "note: oom attaching; its figures are not measured" in get_view("oom").text(state, Options())
    assert "no OOM kill since" not in get_view("oom").text(state, Options())
    d = doc(state, "swapin")  # swapin and swapinfo never ran (as with --no-bpf)
    assert d["probes"]["swapin"]["state"] == "absent" and d["system"]["swap_devices"] is None
    assert "swap devices not read" in get_view("swapin").text(state, Options())


def fault_state(*records: Record, status: str = "attached") -> State:
    state = State("bpf")
    state.apply(Batch(1, (ProbeStatus("faultstack", status, "why", ""), *records)))
    return state


def test_fault_stacks_no_thread_traced_is_not_measured() -> None:
    cov = FaultCoverage(7, 5001, 0, "open-file limit: 5001 threads need 10002 perf event fds")
    state = fault_state(cov)
    for section in ("fault_stacks", "fault_files"):
        d = doc(state, "process", pid=7, section=section)
        assert d["total_faults"] is None and d["measured"] is False and d["rows"] == []
        assert d["coverage"] == {
            "threads_total": 5001,
            "threads_traced": 0,
            "threads_uncovered": 5001,
            "covered": False,
            "reason": cov.reason,
        }
        text = get_view("process").text(state, Options(pid=7, section=section))
        assert "0 of 5001 traced; 5001 not traced (open-file limit" in text
        assert text.rstrip().endswith(": not measured")


def test_fault_stacks_partly_covered_counts_and_says_so() -> None:
    cov = FaultCoverage(7, 5001, 460, "open-file limit")
    state = fault_state(cov, FaultStack(7, 1, ("f+0x1 [a]",), 900, 2))
    d = doc(state, "process", pid=7, section="fault_stacks")
    assert d["total_faults"] == 902 and d["coverage"]["threads_uncovered"] == 4541
    assert not d["coverage"]["covered"]
    text = get_view("process").text(state, Options(pid=7, section="fault_stacks"))
    assert "460 of 5001 traced; 4541 not traced" in text and "not measured" not in text


def test_fault_stacks_probe_failed() -> None:
    state = fault_state(status="failed")
    d = doc(state, "process", pid=7, section="fault_stacks")
    assert d["total_faults"] is None and d["probes"] == {
        "faultstack": {"state": "failed", "message": "why", "hint": "", "failures": 0, "reading_age_s": None}
    }
    text = get_view("process").text(state, Options(pid=7, section="fault_stacks"))
    assert "note: faultstack failed — why" in text and "FAULTS" not in text  # no table of zeros


def recording(tmp_path: Path) -> Path:
    path = tmp_path / "failed.jsonl.gz"
    statuses = [ProbeStatus("procfs", "attached"), FAILED]
    rec = open_recorder(path, statuses, interval_s=1.0, mode="bpf", prelude=statuses)
    for b in procfs_batches(tmp_path, 3):
        rec.write(b)
    rec.close()
    return path


def test_snapshot_and_batch_of_a_recording_whose_probe_failed(tmp_path: Path) -> None:
    rec = recording(tmp_path)
    out = tmp_path / "vmscan.txt"
    assert (
        main(["snapshot", "--replay", str(rec), "--pane", "vmscan", "--format", "txt", "--output", str(out)])
        == 0
    )
    text = out.read_text()
    assert f"note: vmscan failed — {FAILED.message}" in text
    origins = text.split("vmscan\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert origins == [origins[0]] and "ORIGIN" in origins[0]  # the header, no zero rows
    assert not re.search(r"kswapd wakes 0\b", text)
    out = tmp_path / "vmscan.json"
    assert (
        main(["snapshot", "--replay", str(rec), "--pane", "vmscan", "--format", "json", "--output", str(out)])
        == 0
    )
    d = json.loads(out.read_text())
    assert d["probes"]["vmscan"]["state"] == "failed" and d["kswapd_wakes"] is None and d["rows"] == []
    proc = subprocess.run(
        memtop_cmd() + ["--batch", "--replay", str(rec), "--pane", "reclaim", "--interval", "0.5"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "note: vmscan failed" in proc.stdout and "episodes)" in proc.stdout
    assert "(0 episodes)" not in proc.stdout
