"""Memleak stack browser: a purpose-built leaker (tests/workloads/leaky.c) checked against its own
count of what it leaked, growth against its fixed 400 KiB/s, two pids at once through the real
CLI, a target exiting mid-trace (last data kept, no uprobe left behind), folded export, and every
allocator of the family."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support import Leaker, Leakers, case_lines, compile_c, leaky_argv, run_snapshot

from memtop.probes.base import Probe
from memtop.probes.leaks import A_EMPTY, A_FREED, LeaksProbe, alloc_slots
from memtop.records import Batch
from memtop.records.leaks import LeakStack
from memtop.state import State
from memtop.state.leaks import LeaksState
from memtop.stream.bridge import now_ns
from memtop.views import Options
from memtop.views.leaks import LeaksView, LeakTableRow

LEAK_RATE = 4096 * 100  # leaky.c: 4 KiB every 10 ms


def tick(probe: Probe, state: State) -> None:
    state.apply(Batch(now_ns(), tuple(probe.poll())))


def rows_with(rows: list[LeakTableRow], func: str) -> list[LeakTableRow]:
    return [r for r in rows if any(f.startswith(func + "+") for f in r["frames"])]


def folded_lines(text: str) -> list[tuple[list[str], int]]:
    out = []
    for line in text.splitlines():
        if line.startswith("# memtop: "):  # what was not counted: flame graph tools skip it
            continue
        m = re.fullmatch(r"(.+) (\d+)", line)
        assert m, f"not a folded line: {line!r}"
        frames = m.group(1).split(";")
        assert all(frames), line
        out.append((frames, int(m.group(2))))
    return out


@pytest.mark.bpf
def test_leak_site_size_growth_and_churn(leakers: Leakers) -> None:
    from memtop.probes.leaks import LeaksProbe

    leaky = leakers.start(leaky_argv("a", 4.5, 30))
    probe = LeaksProbe([leaky.pid])
    state = State(mode="bpf")
    view = LeaksView()
    try:
        probe.load()
        assert probe.targets[leaky.pid].state == "tracing", probe.targets[leaky.pid]
        leaky.wait_for("start")
        tick(probe, state)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 3.5:  # while it still leaks: growth
            time.sleep(0.5)
            tick(probe, state)
        rows = view.rows(state, Options())
        assert rows and rows[0]["frames"][0].startswith("leak_here+"), rows[:2]
        growth = rows[0]["growth_bytes_per_s"]
        print(f"growth {growth:.0f} B/s (leaky: {LEAK_RATE} B/s)")
        assert 0.9 * LEAK_RATE <= growth <= 1.1 * LEAK_RATE, f"growth {growth:.0f} B/s vs {LEAK_RATE}"

        leaked_bytes, leaked_count = leaky.leaked()  # it stopped leaking; churn goes on
        time.sleep(0.3)
        tick(probe, state)
        rows = view.rows(state, Options())
        leak = rows_with(rows, "leak_here")
        assert len(leak) == 1 and leak is not None
        print(
            f"outstanding {leak[0]['outstanding_bytes']} B in {leak[0]['allocations']} (leaky: {leaked_bytes} B "
            f"in {leaked_count}); churn {sum(r['outstanding_bytes'] for r in rows_with(rows, 'churn_here'))} B "
            f"outstanding of {sum(r['alloc_count'] for r in rows_with(rows, 'churn_here'))} allocations"
        )
        assert abs(leak[0]["outstanding_bytes"] - leaked_bytes) <= 0.05 * leaked_bytes, (
            leak[0],
            leaked_bytes,
        )
        assert abs(leak[0]["allocations"] - leaked_count) <= max(1, 0.05 * leaked_count)
        assert leak[0]["oldest_age_s"] >= 3.0
        assert leak[0]["frames"][-1] == f"leaky [pid {leaky.pid}]"
        assert leak[0]["frames"][1].startswith("main+")
        churn = rows_with(rows, "churn_here")
        assert churn, "churn_here's allocations were not seen at all"
        assert sum(r["alloc_count"] for r in churn) >= 10 * leaked_count  # it did churn, a lot
        assert sum(r["outstanding_bytes"] for r in churn) <= max(4096, 0.01 * leaked_bytes)
        assert state.lost_total("leaks") == 0

        # folded export: parses, and sums to the outstanding bytes the document shows
        folded = view.export(state, Options(), "folded")
        lines = folded_lines(folded)
        doc = view.document(state, Options())
        assert sum(n for _, n in lines) == sum(r["outstanding_bytes"] for r in doc["rows"])
        assert any(fr[0] == f"leaky [pid {leaky.pid}]" and fr[-1].startswith("leak_here+") for fr, _ in lines)
        for row in doc["rows"]:
            assert set(row) == {
                "frames",
                "outstanding_bytes",
                "allocations",
                "oldest_age_s",
                "growth_bytes_per_s",
                "estimate_error_pct",
            }
            assert row["estimate_error_pct"] is None  # exact: no estimate
    finally:
        probe.close()


@pytest.mark.bpf
def test_two_pids_at_once_cli(leakers: Leakers) -> None:
    a, b = leakers.start(leaky_argv("a", 60, 0)), leakers.start(leaky_argv("b", 60, 0))
    doc = run_snapshot("leaks", 3, "--leaks", f"{a.pid},{b.pid}")
    assert doc["pane"] == "leaks" and doc["pids"] == sorted([a.pid, b.pid])
    here = [r for r in rows_with(doc["rows"], "leak_here")]
    there = [r for r in rows_with(doc["rows"], "leak_there")]
    assert len(here) == 1 and here[0]["frames"][-1] == f"leaky [pid {a.pid}]"
    assert len(there) == 1 and there[0]["frames"][-1] == f"leaky [pid {b.pid}]"
    for r in (here[0], there[0]):
        assert r["outstanding_bytes"] >= 4096 * 50 and r["growth_bytes_per_s"] > 0
    for r in doc["rows"]:
        assert set(r) == {
            "frames",
            "outstanding_bytes",
            "allocations",
            "oldest_age_s",
            "growth_bytes_per_s",
            "estimate_error_pct",
        }


def our_uprobes() -> list[dict[str, Any]]:
    """Uprobe attachments held by this process, per `bpftool perf` (tests/programs.txt: always here)."""
    out = subprocess.run(["bpftool", "-j", "perf"], capture_output=True, text=True, check=True).stdout
    entries: list[dict[str, Any]] = json.loads(out)
    return [e for e in entries if e.get("pid") == os.getpid() and "uprobe" in str(e.get("fd_type", ""))]


def our_links() -> list[dict[str, str]]:
    """uprobe_multi links held by this process (leaks on a budget), as the kernel shows each in
    /proc/self/fdinfo: link_type, pid (the one process whose breakpoints it places), path and
    uprobe_cnt. bpftool perf lists perf-event uprobes only."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:bpf_link":
                continue
            info = Path(f"/proc/self/fdinfo/{fd}").read_text()
        except OSError:  # closed meanwhile (the listing's own fd, a window's close)
            continue
        fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
        link = {k.strip(): v.strip() for k, v in fields.items()}
        if "probe_multi" in link.get("link_type", ""):
            out.append(link)
    return out


@pytest.mark.bpf
def test_target_exit_keeps_last_data_and_detaches(leakers: Leakers) -> None:
    from memtop.probes.leaks import LeaksProbe

    leaky = leakers.start(leaky_argv("a", 1.5, 0.2))
    probe = LeaksProbe([leaky.pid])
    state = State(mode="bpf")
    view = LeaksView()
    try:
        probe.load()
        assert our_uprobes(), "bpftool perf does not show our uprobes while tracing"
        leaky.wait_for("start")
        while leaky.proc.poll() is None:
            time.sleep(0.3)
            tick(probe, state)
        leaked_bytes, _ = leaky.leaked()
        tick(probe, state)
        tick(probe, state)
        leaks = state.get(LeaksState)
        assert leaks.targets[leaky.pid].state == "exited"
        assert our_uprobes() == [], "uprobes still attached after the target exited"
        uprobe_events = Path("/sys/kernel/tracing/uprobe_events")
        if uprobe_events.exists():
            assert f"_{leaky.pid}\n" not in uprobe_events.read_text() + "\n"
        # the last figures stay, and say the target is gone
        rows = rows_with(view.rows(state, Options()), "leak_here")
        assert rows and abs(rows[0]["outstanding_bytes"] - leaked_bytes) <= 0.05 * leaked_bytes
        age = rows[0]["oldest_age_s"]
        time.sleep(1.1)
        tick(probe, state)
        rows = rows_with(view.rows(state, Options()), "leak_here")
        assert rows[0]["oldest_age_s"] == age, "ages must freeze at exit"
        assert "exited" in view.text(state, Options())
    finally:
        probe.close()
    assert our_uprobes() == []


@pytest.mark.bpf
@pytest.mark.parametrize("exact", [False, True], ids=["usable-sizes", "requested-sizes"])
def test_allocator_family_nested_and_failed(exact: bool) -> None:
    """Each allocator's leaks land on their own stack, counted once (glibc's realloc and big
    mallocs reach mmap inside libc), frees through every path are seen, failures never count."""
    from memtop.probes.leaks import LeaksProbe

    proc = subprocess.Popen([str(compile_c("allocfamily"))], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline().startswith("ready")
        probe = LeaksProbe([proc.pid], exact_sizes=exact)
        state = State(mode="bpf")
        try:
            probe.load()
            cases = case_lines(proc.stdout)
            tick(probe, state)
            counters = probe.counters()
        finally:
            probe.close()
        rows = LeaksView().rows(state, Options())
        assert len(cases) == 9
        for name, (count, requested) in cases.items():
            mine = [r for r in rows if r["frames"][0].startswith(name + "+")]
            out_bytes = sum(r["outstanding_bytes"] for r in mine)
            out_count = sum(r["allocations"] for r in mine)
            assert out_count == count, (name, out_count, count, mine)
            # usable sizes: the request rounded up to glibc's granule (mmapped chunks to a page)
            slack = 0 if exact else count * 4096
            assert requested <= out_bytes <= requested + slack, (name, out_bytes, requested)
        assert counters["failed allocations"] >= 4 * 5  # malloc, calloc, posix_memalign, mmap
        assert counters["libc-internal mmap/munmap"] > 0  # realloc/big malloc reached mmap inside libc
    finally:
        proc.kill()
        proc.wait()


@contextmanager
def addrchurn(leakers: Leakers, args: list[str], max_allocs: int) -> Iterator[tuple[LeaksProbe, Leaker]]:
    """tests/workloads/addrchurn.c run with ``args`` (ROUNDS BATCH LEAK), traced by a leaks probe
    whose address table holds ``max_allocs`` blocks."""
    leaky = leakers.start([str(compile_c("addrchurn")), *args])
    probe = LeaksProbe([leaky.pid], max_allocs=max_allocs)
    try:
        probe.load()
        yield probe, leaky
    finally:
        probe.close()


def churned_and_leaked(probe: LeaksProbe, leaky: Leaker) -> tuple[list[LeakStack], list[LeakStack]]:
    """The churn_here and leak_here stacks of tests/workloads/addrchurn.c, once it has leaked."""
    leaky.wait_for("leaked")
    time.sleep(0.3)
    stacks = [r for r in probe.poll() if isinstance(r, LeakStack)]
    churn = [r for r in stacks if any(f.startswith("churn_here+") for f in r.frames[:2])]
    leak = [r for r in stacks if any(f.startswith("leak_here+") for f in r.frames[:2])]
    return churn, leak


@pytest.mark.bpf
def test_freed_slots_fill_the_address_table_and_the_count_stays_exact(leakers: Leakers) -> None:
    """40,000 blocks at ever new addresses go through an address table of 4,096 slots (1,024
    blocks): its slots end up marked freed, not empty, so searches run past them. Every churned
    block is counted out, and the 1,000 blocks leaked after are all found, none lost."""
    with addrchurn(leakers, ["40", "1000", "1000"], max_allocs=1024) as (probe, leaky):
        churn, leak = churned_and_leaked(probe, leaky)
        _, leaked_bytes, leaked_count = leaky.wait_for("leaked").split()
        assert sum(r.alloc_count for r in churn) == 40_000
        assert all(r.free_count == r.alloc_count and r.free_bytes == r.alloc_bytes for r in churn), churn
        assert len(leak) == 1, leak
        assert (leak[0].alloc_count, leak[0].free_count) == (int(leaked_count), 0)
        assert leak[0].alloc_bytes == int(leaked_bytes)
        assert probe.counters()["allocations (address map full)"] == 0
        with memoryview(probe._alloc_table()[0]) as mv, mv.cast("Q") as words:
            marks = words.tolist()[: alloc_slots(1024)]
        assert len(marks) == 4096
        # the churn reached every part of the table: few slots were never used
        assert marks.count(A_EMPTY) < 0.05 * len(marks) and marks.count(A_FREED) > 0.5 * len(marks)


@pytest.mark.bpf
def test_a_full_address_table_counts_what_it_could_not_hold(leakers: Leakers) -> None:
    """3,000 blocks leaked into a table sized for 256: at least 256 are held, and every other one
    is counted as lost, so held + lost is exactly what the program leaked."""
    with addrchurn(leakers, ["0", "1", "3000"], max_allocs=256) as (probe, leaky):
        _churn, leak = churned_and_leaked(probe, leaky)
        lost = probe.counters()["allocations (address map full)"]
        assert len(leak) == 1 and leak[0].alloc_count >= 256, leak
        assert leak[0].alloc_count + lost == 3000 and lost > 0, (leak[0].alloc_count, lost)


@pytest.mark.bpf
def test_leaks_uprobes_leave_room_for_another_tracer_at_the_same_address(leakers: Leakers) -> None:
    """The kernel keeps one reference-counter offset per probed address: memtop must register
    with 0, as bpftrace, libbpf and a second memtop do, or theirs is refused (EINVAL). A probe of
    the test's own at the address memtop traces, for another pid, registers."""
    import ctypes

    from memtop.linux import bcc_compat

    leaky = leakers.start(leaky_argv("a", 30, 0.2))
    probe = LeaksProbe([leaky.pid])
    other = bcc_compat.compile_text("int other_tracer(struct pt_regs *ctx) { return 0; }\n")
    try:
        probe.load()
        t = probe.targets[leaky.pid]
        assert t.state == "tracing", t.message
        _fn, path, offset, _ret, _hot = t.attach_list[0]
        prog = other.load_func(b"other_tracer", 2)  # BPF_PROG_TYPE_KPROBE
        lib = ctypes.CDLL("libbcc_bpf.so.0", use_errno=True)
        lib.bpf_attach_uprobe.restype = ctypes.c_int
        lib.bpf_attach_uprobe.argtypes = [
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_ulonglong,
            ctypes.c_int,
            ctypes.c_uint32,
        ]
        ev = f"p_memtop_test_other_{os.getpid()}".encode()
        fd = lib.bpf_attach_uprobe(prog.fd, 0, ev, path.encode(), offset, os.getpid(), 0)
        assert fd >= 0, (
            f"another tracer's probe at {path}+{offset:#x} refused: memtop's ref_ctr_offset is not 0"
        )
        bcc_compat.close_perf_event_fd(fd)
    finally:
        probe.close()
        bcc_compat.cleanup(other)
