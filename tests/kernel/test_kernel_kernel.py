"""Kernel pane against the kernel's own accounting: /proc/slabinfo, /proc/vmstat, /proc/meminfo,
and the kmem tracepoints' own output (a tracefs instance) for call sites.

- 300 000 negative dentries (stat of missing names): memtop's dentry delta within 5 % of
  /proc/slabinfo's over the same interval;
- with slab tracing on (allocations only, the default; and with the frees, slabfrees), the dentry
  cache's call site is the function the kernel's own trace output names for kmem_cache_alloc of
  "dentry", and the sampled estimate near slabinfo's growth; net growth per call site is null
  without the frees, and near slabinfo's growth with them;
- net growth per call site (slabfrees) follows 10 000 pipes opened and then closed as slabinfo
  does: up by two files a pipe while they are held, back down when they are closed;
- 10 000 pipes held open (two processes, the file limit here is 20 000): every cache that grows
  by thousands in slabinfo grows as much in memtop (filp, dentry, inode_cache, the pipes' buffers
  in kmalloc-cg-1k, pipe_inode_info in kmalloc-cg-192), and page allocations by order add up to
  vmstat's pgalloc_*;
- the breakdown adds up to MemTotal with less than 1 % unexplained on the live machine.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TypeVar

import pytest

from memtop.linux import kernelfs, tracefs
from memtop.probes.base import Probe
from memtop.probes.kernel import KernelProbe
from memtop.probes.pagealloc import PageAllocProbe
from memtop.probes.slabtrace import SlabFreesProbe, SlabStacksProbe, SlabTraceProbe
from memtop.records import Batch, ProbeStatus
from memtop.records.kernel import PageAlloc, SlabTrace
from memtop.state import State
from memtop.state.kernel import KernelState
from memtop.stream.bridge import now_ns
from memtop.views import Options, get_view

P = TypeVar("P", bound=Probe)
NEGATIVE = 300_000
PIPES = 10_000
HOLDERS = 2
CHILD = """
import os, resource, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
pipes = [os.pipe() for _ in range(int(sys.argv[1]))]
print("ready", flush=True)
sys.stdin.read()
"""


def slabinfo() -> dict[str, kernelfs.Slab]:
    return kernelfs.parse_slabinfo(Path("/proc/slabinfo").read_text())


def meminfo_now() -> dict[str, int]:
    return kernelfs.parse_meminfo(Path("/proc/meminfo").read_text())


def in_window(value: int, a: int, b: int, rel: float) -> bool:
    """``value`` within [min(a, b), max(a, b)], widened by ``rel`` of each end."""
    return min(a, b) * (1 - rel) <= value <= max(a, b) * (1 + rel)


def stat_missing(directory: Path, n: int, prefix: str) -> None:
    """Look up ``n`` names that do not exist: each leaves a negative dentry behind."""
    for i in range(n):
        try:
            os.stat(directory / f"{prefix}{i}")
        except FileNotFoundError:
            pass


def poll(state: State, *probes: Probe) -> None:
    recs = []
    for p in probes:
        recs += p.poll()
        recs.append(ProbeStatus(p.name, "attached", "test"))
    state.apply(Batch(now_ns(), tuple(recs)))


@contextmanager
def attached(probe: P) -> Iterator[P]:
    probe.load()
    try:
        yield probe
    finally:
        probe.close()


@contextmanager
def event_trace(event: str, filter: str | None = None, stacks: bool = False, kb: int = 256) -> Iterator[Path]:
    """A tracefs instance of its own tracing kmem:``event`` (with ``filter``; with ``stacks``, each
    event's kernel stack after it): the kernel's own account of the same tracepoint."""
    root = tracefs.root()
    assert root is not None
    inst = root / "instances" / f"memtop-test-{os.getpid()}"
    inst.mkdir()
    ev = inst / "events" / "kmem" / event
    try:
        (inst / "buffer_size_kb").write_text(str(kb))
        if filter:
            (ev / "filter").write_text(filter)
        if stacks:
            (inst / "options" / "stacktrace").write_text("1")
        (ev / "enable").write_text("1")
        yield inst
    finally:
        try:
            (ev / "enable").write_text("0")
        finally:
            inst.rmdir()


def dentry_alloc_trace(stacks: bool = False) -> AbstractContextManager[Path]:
    """kmem:kmem_cache_alloc of the dentry cache: who allocates dentries (call_site printed with
    %pS)."""
    return event_trace("kmem_cache_alloc", 'name == "dentry"', stacks)


def mark(inst: Path, n: int) -> None:
    """Write mark ``n`` into the instance's trace, between its events."""
    (inst / "trace_marker").write_text(f"memtop-mark-{n}\n")


def traced_orders(trace: str) -> tuple[Counter[int], Counter[int]]:
    """Page allocations by order in a trace with marks 0..3: those between marks 1 and 2, and
    those between marks 0 and 3."""
    inner: Counter[int] = Counter()
    outer: Counter[int] = Counter()
    at = -1
    for line in trace.splitlines():
        m = re.search(r"memtop-mark-(\d)", line)
        if m:
            at = int(m.group(1))
            continue
        o = re.search(r" order=(\d+) ", line)
        if o and 0 <= at < 3:
            outer[int(o.group(1))] += 1
            if at == 1:
                inner[int(o.group(1))] += 1
    assert at == 3, "the trace lost its marks"
    return inner, outer


def overruns(inst: Path) -> int:
    """Events the instance's ring buffers lost (overwritten or dropped)."""
    lost = 0
    for stats in (inst / "per_cpu").glob("cpu*/stats"):
        for line in stats.read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("overrun", "dropped events"):
                lost += int(value.split()[0])
    return lost


@pytest.fixture
def holders() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    try:
        yield procs
    finally:
        for p in procs:
            if p.stdin is not None:
                p.stdin.close()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_negative_dentries_grow_the_dentry_cache_as_slabinfo_says(tmp_path: Path) -> None:
    state = State("procfs")
    with attached(KernelProbe()) as probe:
        before = slabinfo()["dentry"]
        poll(state, probe)
        stat_missing(tmp_path, NEGATIVE, "missing-")
        poll(state, probe)
        after = slabinfo()["dentry"]
    kernel_delta = after.active_objs - before.active_objs
    assert kernel_delta > NEGATIVE * 0.8, f"the workload did not grow dentry ({kernel_delta})"
    row = next(r for r in get_view("kernel").document(state, Options())["rows"] if r["name"] == "dentry")
    assert row["delta_objs"] == pytest.approx(kernel_delta, rel=0.05)
    kernel_bytes = after.total_bytes - before.total_bytes
    assert row["delta_bytes"] == pytest.approx(kernel_bytes, rel=0.05)
    # the slab table's own figures are slabinfo's
    assert row["objsize"] == after.objsize
    assert state.get(KernelState).slabs["dentry"].objs_per_s > 0


def hold_pipes(holders: list[subprocess.Popen[str]]) -> None:
    """PIPES pipes made and held open by HOLDERS children (the file limit here is 20 000)."""
    for _ in range(HOLDERS):
        p = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(PIPES // HOLDERS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        holders.append(p)
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"


def release_pipes(holders: list[subprocess.Popen[str]]) -> None:
    """The holders exit: their pipes are closed."""
    for p in holders:
        assert p.stdin is not None
        p.stdin.close()
    for p in holders:
        assert p.wait(timeout=30) == 0


def settle(cache: str = "dentry", timeout_s: float = 10.0) -> None:
    """Wait until ``cache``'s objects freed after an RCU grace period are gone (closed pipes'
    dentries), so they do not shrink the cache under the next test's measurement."""
    last = None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        n = slabinfo()[cache].active_objs
        if last is not None and abs(n - last) < 100:
            return
        last = n
        time.sleep(0.3)


@pytest.mark.parametrize("frees", [False, True], ids=["allocations", "with-frees"])
@pytest.mark.parametrize("raw", [True, False], ids=["raw-tracepoints", "tracepoints"])
def test_slab_tracing_names_the_function_that_allocates_dentries(
    tmp_path: Path, raw: bool, frees: bool
) -> None:
    """Both ways in: raw tracepoints (the cache's name read through BTF offsets; what this
    kernel gets) and the regular tracepoints (the fallback); both tracers: allocations only
    (the default: no net growth per call site, null not 0) and with the frees (slabfrees)."""
    state = State("bpf")
    n = 100_000
    cls = SlabFreesProbe if frees else SlabTraceProbe
    with attached(KernelProbe()) as kprobe, attached(cls(raw=raw)) as tracer:
        assert tracer.raw == raw, tracer.note()
        # the hooks attached: the free hooks only when the frees are traced
        hooks = tracer.bpf._raw_fds if raw else tracer.bpf._fds
        assert len(hooks) == (4 if frees else 2)
        poll(state, kprobe, tracer)
        before = slabinfo()["dentry"]
        with dentry_alloc_trace() as inst:
            stat_missing(tmp_path, n, "traced-")
            trace = (inst / "trace").read_text()
        after = slabinfo()["dentry"]
        poll(state, kprobe, tracer)
    theirs = Counter(re.findall(r"call_site=([A-Za-z0-9_.]+)\+0x", trace))
    assert theirs, "the kernel's trace of dentry allocations is empty"
    kernel_site = theirs.most_common(1)[0][0]
    doc = get_view("kernel").document(state, Options(extra={"cache": "dentry"}))
    sites = doc["sites"]
    assert sites["tracing"] and sites["sample"] == 64
    ours = sites["rows"][0]
    assert ours["cache"] == "dentry"
    assert ours["site"] == kernel_site
    assert "d_alloc" in ours["site"]  # __d_alloc on 6.x
    # 1 in 64 sampled per CPU: the estimate near what slabinfo says grew (negative dentries stay)
    grew = after.active_objs - before.active_objs
    assert grew > n * 0.8
    assert ours["allocs"] == pytest.approx(grew, rel=0.15)
    assert sites["mode"] == ("allocs+frees" if frees else "allocs")
    if frees:
        assert ours["net_objs"] == pytest.approx(grew, rel=0.15)
        assert sites["frees_seen"] > 0 and sites["frees_note"] is None
    else:  # not measured: null with the reason, never 0
        assert ours["net_objs"] is None and ours["frees"] is None and ours["net_per_s"] is None
        assert sites["frees_seen"] is None and sites["frees_note"] == "frees not traced: f to trace"
        last = state.get(KernelState).slabtrace
        assert last is not None and isinstance(last.cur, SlabTrace)
        assert last.cur.frees == 0 and not last.cur.frees_traced  # no free program ran
    assert doc["sites"]["dropped"] == 0
    # its cost, as the kernel measured it
    t = state.get(KernelState).slabtrace
    assert t is not None and t.cur.runs > 0 and t.cur.run_ns > 0
    assert doc["sites"]["cost"]["events_per_s"] > 0
    # the table carries it too
    whole = get_view("kernel").document(state, Options())
    dentry = next(r for r in whole["rows"] if r["name"] == "dentry")
    assert dentry["top_site"] == kernel_site and dentry["allocs_per_s"] > 0


@pytest.mark.parametrize("raw", [True, False], ids=["raw-tracepoints", "tracepoints"])
def test_net_growth_per_call_site_follows_pipes_opened_then_closed(
    holders: list[subprocess.Popen[str]], raw: bool
) -> None:
    """slabfrees (f): two files a pipe, allocated in alloc_empty_file; their net count per call
    site grows while 10 000 pipes are held and falls back when they are closed, as the filp
    cache's active objects do in /proc/slabinfo."""
    state = State("bpf")
    view = get_view("kernel")
    with attached(SlabFreesProbe(raw=raw)) as tracer:
        poll(state, tracer)
        before = slabinfo()["filp"]
        hold_pipes(holders)
        held = slabinfo()["filp"]
        poll(state, tracer)
        opened = view.document(state, Options(extra={"cache": "filp"}))["sites"]
        release_pipes(holders)
        holders.clear()
        after = slabinfo()["filp"]
        poll(state, tracer)
        closed = view.document(state, Options(extra={"cache": "filp"}))["sites"]
    settle()
    up, down = held.active_objs - before.active_objs, after.active_objs - held.active_objs
    assert up >= 2 * PIPES * 0.9 and down <= -2 * PIPES * 0.9, (up, down)
    assert opened["frees_traced"] is True
    site = {r["site"]: r for r in opened["rows"]}["alloc_empty_file"]
    assert site["net_objs"] == pytest.approx(up, rel=0.15)
    site_after = {r["site"]: r for r in closed["rows"]}["alloc_empty_file"]
    assert site_after["net_objs"] - site["net_objs"] == pytest.approx(down, rel=0.15)
    assert site_after["frees"] - site["frees"] >= 2 * PIPES * 0.8


def test_kernel_stacks_are_the_ones_the_kernel_prints(tmp_path: Path) -> None:
    """slabstacks (k): the heaviest stack of dentry allocations, from the call site outward, is
    the one the kernel's own stacktrace of those allocations shows most often."""
    state = State("bpf")
    with attached(SlabStacksProbe()) as tracer:
        assert tracer.raw and "kernel stacks" in tracer.note()
        with dentry_alloc_trace(stacks=True) as inst:
            stat_missing(tmp_path, 20_000, "stacked-")
            trace = (inst / "trace").read_text()
        poll(state, tracer)
    theirs: Counter[tuple[str, ...]] = Counter()
    for block in trace.split("<stack trace>")[1:]:
        frames = [m.group(1) for m in re.finditer(r"^ => ([A-Za-z0-9_.]+)", block, re.M)]
        if "__d_alloc" in frames:
            theirs[tuple(frames[frames.index("__d_alloc") :][:6])] += 1
    assert theirs, "the kernel printed no stacks of dentry allocations"
    doc = get_view("kernel").document(state, Options(extra={"cache": "dentry"}))
    assert doc["sites"]["stacks"] is True
    # kernel stacks ride on the allocations-only tracer: no net growth per call site
    assert doc["sites"]["mode"] == "allocs" and doc["sites"]["rows"][0]["net_objs"] is None
    row = doc["sites"]["rows"][0]
    assert row["site"] == "__d_alloc" and row["stacks"]
    ours = row["stacks"][0]
    assert tuple(ours["frames"][:6]) == theirs.most_common(1)[0][0]
    # each stat of a missing name allocated one dentry through it (sampled 1 in 64, scaled back;
    # the kernel's trace buffer keeps only the last of them)
    assert ours["allocs"] == pytest.approx(20_000, rel=0.15)


def test_ten_thousand_pipes_grow_the_right_caches(holders: list[subprocess.Popen[str]]) -> None:
    state = State("bpf")
    with (
        attached(KernelProbe()) as kprobe,
        attached(PageAllocProbe()) as pages,
        event_trace("mm_page_alloc", kb=8192) as inst,
    ):
        # each of memtop's two slabinfo reads (its polls) is bracketed by two of the test's own:
        # the rest of the machine's slab traffic (a neighbour's dentries, a shrinker's burst of
        # frees) moves the caches on a loaded machine, and memtop's figure must lie within what
        # the kernel showed on either side of its reads
        poll(state, pages)
        s0 = slabinfo()
        poll(state, kprobe)
        before = slabinfo()
        vm0 = kernelfs.parse_vmstat(Path("/proc/vmstat").read_text())
        mark(inst, 0)
        first = pages.poll()[0]
        mark(inst, 1)
        hold_pipes(holders)
        mark(inst, 2)
        last = pages.poll()[0]
        mark(inst, 3)
        vm1 = kernelfs.parse_vmstat(Path("/proc/vmstat").read_text())
        after = slabinfo()
        poll(state, kprobe)
        s3 = slabinfo()
        poll(state, pages)
        (inst / "tracing_on").write_text("0")
        trace = (inst / "trace").read_text()
        assert overruns(inst) == 0
    grown = {
        name: s.active_objs - before[name].active_objs
        for name, s in after.items()
        if name in before and s.active_objs - before[name].active_objs >= PIPES // 2
    }
    # two files per pipe, one inode and one dentry, the pipe_inode_info and its buffer array
    assert grown.get("filp", 0) >= 2 * PIPES * 0.9
    assert {"filp", "dentry", "kmalloc-cg-1k"} <= set(grown), grown
    rows = {r["name"]: r for r in get_view("kernel").document(state, Options())["rows"]}
    for name, delta in grown.items():
        starts = (s0[name].active_objs, before[name].active_objs)
        ends = (after[name].active_objs, s3[name].active_objs)
        low, high = min(ends) - max(starts), max(ends) - min(starts)
        slack = 0.05 * delta  # an object freed and another allocated inside one bracket
        assert low - slack <= rows[name]["delta_objs"] <= high + slack, (name, low, high)
    # page allocations by order, counted in kernel, against the kernel's own trace of the same
    # tracepoint: memtop's two reads are each bracketed by two marks in the trace, so its count
    # lies between the events from mark 1 to mark 2 and those from mark 0 to mark 3 (a neighbour
    # allocating pages while the counters are read falls in the outer window only)
    assert isinstance(first, PageAlloc) and isinstance(last, PageAlloc)
    ours = Counter(
        {o: n - (first.orders[o] if o < len(first.orders) else 0) for o, n in enumerate(last.orders)}
    )
    inner, outer = traced_orders(trace)
    assert inner.total() > 1000
    for order in sorted(outer | ours):
        if inner[order] >= 100:
            slack = 0.05 * inner[order]
            assert inner[order] - slack <= ours[order] <= outer[order] + slack, (order, inner, outer)
    # and against vmstat's pgalloc_* (pages): the bulk allocator (vmalloc's pages, network page
    # pools) adds to pgalloc but passes no tracepoint, so the traced pages are at most the count
    pages_ours = sum(n << o for o, n in ours.items())
    pages_theirs = sum(v - vm0.get(k, 0) for k, v in vm1.items() if k.startswith("pgalloc_"))
    assert 0 < pages_ours <= pages_theirs
    doc = get_view("kernel").document(state, Options())["pages"]
    assert doc["page_alloc"]["tracing"] and doc["page_alloc"]["orders"][0]["allocs"] > 0
    assert doc["zones"] and all(z["free_bytes"] >= 0 for z in doc["zones"])


def test_the_breakdown_adds_up_to_memtotal_on_this_machine() -> None:
    # the slab moves between two reads (a test before this one closing 10,000 pipes frees their
    # inodes and dentries through RCU for seconds after): memtop's figures and the slab table's
    # are held to meminfo read just before and just after them. Pages the kernel hands out
    # outside every meminfo line (a pipe's buffers, say) are "unexplained" while they are out:
    # a reading is taken again until that settles (the kernel awaited, 30 s at most), then judged
    def reading() -> tuple[State, dict[str, int], dict[str, int]]:
        state = State("procfs")
        with attached(KernelProbe()) as probe:
            before = meminfo_now()
            poll(state, probe)
            after = meminfo_now()
        return state, before, after

    deadline = time.monotonic() + 30
    state, before, after = reading()
    while time.monotonic() < deadline:
        b = get_view("kernel").document(state, Options())["breakdown"]
        if abs(b["unexplained_bytes"]) < before["MemTotal"] * 0.01:
            break
        time.sleep(0.5)
        state, before, after = reading()
    b = get_view("kernel").document(state, Options())["breakdown"]
    assert b["total_bytes"] == before["MemTotal"] == b["sum_bytes"]
    assert abs(b["unexplained_bytes"]) < before["MemTotal"] * 0.01, b["unexplained_bytes"]
    lines = {ln["key"]: ln["bytes"] for ln in b["lines"]}
    ours = lines["slab_reclaimable"] + lines["slab_unreclaimable"]
    assert in_window(ours, before["Slab"], after["Slab"], 0.05), (ours, before["Slab"], after["Slab"])
    # the slab table's caches hold what meminfo's Slab says, give or take the allocator's slack
    m0 = meminfo_now()
    caches = sum(s.total_bytes for s in slabinfo().values())
    m1 = meminfo_now()
    assert in_window(caches, m0["Slab"], m1["Slab"], 0.10), (caches, m0["Slab"], m1["Slab"])
