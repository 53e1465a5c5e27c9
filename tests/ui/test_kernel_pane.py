"""The Kernel pane as a user drives it, on fixture /proc files fed through a fake source: the
breakdown bar and the slab table, `t` and Enter asking the source to trace (and the call sites
then shown), `p` for page allocations, `v` cycling what is under the table, leaving the pane
detaching the tracers; and, without /proc/slabinfo, the pane saying why instead of an empty
table."""

from __future__ import annotations

from pathlib import Path

from support import FakeSource
from support.ui import drive, settle
from textual.widgets import DataTable, Static

from memtop.probes.kernel import KernelProbe
from memtop.records import Batch, ProbeStatus
from memtop.records.kernel import SlabTrace
from memtop.ui.app import MemtopApp
from memtop.views.kernel import SLAB_TRACERS

DATA = Path(__file__).resolve().parents[1] / "data" / "kernel"


class TracingSource(FakeSource):
    """Says yes to the Kernel pane's tracing intents (and notes them)."""

    def trace_kernel(self, tracer: str, on: bool) -> bool:
        self.kernel_traced.append((tracer, on))
        return True


def proc_root(tmp_path: Path, slabinfo: bool = True) -> Path:
    root = tmp_path / "proc"
    root.mkdir()
    (root / "meminfo").write_text((DATA / "meminfo-6.18.txt").read_text())
    (root / "buddyinfo").write_text((DATA / "buddyinfo.txt").read_text())
    (root / "vmallocinfo").write_text((DATA / "vmallocinfo.txt").read_text())
    if slabinfo:
        (root / "slabinfo").write_text((DATA / "slabinfo-2.1.txt").read_text())
    return root


def batches(root: Path, frees: bool = False) -> list[Batch]:
    """Two reads of the fixture /proc files, then two of a slab tracer: the default one
    (allocations only), or with ``frees`` the slabfrees tracer."""
    probe = KernelProbe(str(root))
    probe.load()
    status = ProbeStatus("kernel", "attached", "test")
    out = [Batch(1_000_000_000 * (i + 1), (status, *probe.poll())) for i in range(2)]
    traced = ProbeStatus("slabfrees" if frees else "slabtrace", "attached", "test")
    for i, n in enumerate((10, 30)):
        f = 1 if frees else 0
        rec = SlabTrace(
            sites=(("dentry", "__d_alloc", n, n * 192, f), ("filp", "alloc_empty_file", 2, 384, 0)),
            sample=64,
            events=1000 * (i + 1),
            frees_traced=frees,
        )
        out.append(Batch(1_000_000_000 * (i + 3), (traced, rec)))
    return out


def text_of(app: MemtopApp, selector: str) -> str:
    return str(app.query_one(selector, Static).render())


async def test_trace_keys_call_sites_and_leaving(tmp_path: Path) -> None:
    src = TracingSource(batches(proc_root(tmp_path)))
    app = MemtopApp(src, interval_s=1.0, initial_pane="kernel")
    async with app.run_test(size=(120, 40)) as pilot:
        await drive(app, pilot, 4)
        assert "free" in text_of(app, "#kernel-breakdown")
        table = app.query_one("#kernel-table", DataTable)
        names = [str(r.key.value) for r in table.ordered_rows]
        assert "dentry" in names and table.row_count == len(names)
        # the traced figures are in the table and under it
        assert "__d_alloc" in text_of(app, "#kernel-detail")
        # t asks for slab tracing; again stops it
        table.focus()
        await pilot.press("t")
        assert src.kernel_traced[-1] == ("slabtrace", True)
        await pilot.press("t")
        assert src.kernel_traced[-1] == ("slabtrace", False)
        # Enter on a cache: tracing on, that cache's call sites only
        table.move_cursor(row=names.index("filp"))
        await pilot.press("enter")
        await settle(pilot)
        assert src.kernel_traced[-1] == ("slabtrace", True)
        detail = text_of(app, "#kernel-detail")
        assert "alloc_empty_file" in detail and "__d_alloc" not in detail
        # p counts page allocations; v cycles what is under the table
        await pilot.press("p")
        assert src.kernel_traced[-1] == ("pagealloc", True)
        assert "Free blocks by order" in text_of(app, "#kernel-detail")
        await pilot.press("v")
        assert "vmalloc by caller" in text_of(app, "#kernel-detail")
        await pilot.press("v")
        assert "Allocation profiling" in text_of(app, "#kernel-detail")
        # the breakdown's every line, and used memory over time stacked
        await pilot.press("v")
        detail = text_of(app, "#kernel-detail")
        assert "unexplained" in detail and "kernel stacks" in detail and "█" in detail
        # leaving the pane detaches both tracers
        await pilot.press("1")
        await settle(pilot)
        assert ("slabtrace", False) in src.kernel_traced[-2:] and ("pagealloc", False) in src.kernel_traced[
            -2:
        ]


async def test_without_slabinfo_the_pane_says_why(tmp_path: Path) -> None:
    src = FakeSource(batches(proc_root(tmp_path, slabinfo=False))[:2])
    app = MemtopApp(src, interval_s=1.0, initial_pane="kernel")
    async with app.run_test(size=(100, 30)) as pilot:
        await drive(app, pilot, 2)
        assert app.query_one("#kernel-table", DataTable).row_count == 0
        detail = text_of(app, "#kernel-detail")
        assert "slabinfo does not exist" in detail
        # tracing cannot start (the fake source says no): the pane does not pretend it did
        await pilot.press("t")
        assert src.kernel_traced == [("slabtrace", True)]


async def test_tracers_not_asked_for_are_off_not_missing(tmp_path: Path) -> None:
    """slabtrace and pagealloc run when asked (t, p): before that the status line says "off",
    not the yellow "not running in this session" of a probe that should be there."""
    app = MemtopApp(TracingSource(batches(proc_root(tmp_path))[:2]), interval_s=1.0, initial_pane="kernel")
    async with app.run_test(size=(160, 45)) as pilot:
        await drive(app, pilot, 2)
        status = text_of(app, "#kernel-status")
        assert "slabtrace: off" in status and "pagealloc: off" in status
        assert "slabstacks" not in status and "slabfrees" not in status  # one of the slab tracers
        assert "not running" not in status


async def test_k_traces_with_kernel_stacks_and_shows_the_callers(tmp_path: Path) -> None:
    """k swaps the slab tracer for the one collecting kernel stacks (and back); under each call
    site its heaviest stack's callers."""
    stacked = []
    for i, n in enumerate((10, 30)):
        frames = ("__d_alloc", "d_alloc_parallel", "__lookup_slow", "walk_component")
        rec = SlabTrace(
            sites=(("dentry", "__d_alloc", n, n * 192, 1),),
            sample=64,
            events=1000 * (i + 1),
            stacks=(("dentry", "__d_alloc", frames, n - 1), ("dentry", "__d_alloc", frames[:2], 1)),
        )
        stacked.append(Batch(1_000_000_000 * (i + 3), (ProbeStatus("slabstacks", "attached", "test"), rec)))
    src = TracingSource(batches(proc_root(tmp_path))[:2] + stacked)
    app = MemtopApp(src, interval_s=1.0, initial_pane="kernel")
    async with app.run_test(size=(120, 40)) as pilot:
        app.query_one("#kernel-table", DataTable).focus()
        await pilot.press("k")
        assert src.kernel_traced == [("slabstacks", True)]
        await drive(app, pilot, 4)
        detail = text_of(app, "#kernel-detail")
        assert "↳ d_alloc_parallel ← __lookup_slow ← walk_component" in detail
        # one of the two slab tracers on the status line: the one running
        status = text_of(app, "#kernel-status")
        assert "slabstacks: attached" in status and "slabtrace" not in status
        # k again: back to call sites alone; t stops whichever runs
        await pilot.press("k")
        assert src.kernel_traced[-2:] == [("slabstacks", False), ("slabtrace", True)]
        await pilot.press("t")
        assert src.kernel_traced[-1] == ("slabtrace", False)
        # Enter while nothing traces starts the plain tracer; k from there swaps it
        await pilot.press("enter")
        assert src.kernel_traced[-1] == ("slabtrace", True)
        await pilot.press("k")
        assert src.kernel_traced[-2:] == [("slabtrace", False), ("slabstacks", True)]


async def test_the_tracer_line_says_what_was_hooked_and_f_traces_the_frees(tmp_path: Path) -> None:
    """By default the frees are not hooked: the cost line says "allocations only" and why there
    is no net growth, each call site's net is a dash, never 0. f swaps in the slabfrees tracer
    (and back); with it the net growth per call site shows."""
    root = proc_root(tmp_path)
    src = TracingSource(batches(root))
    app = MemtopApp(src, interval_s=1.0, initial_pane="kernel")
    async with app.run_test(size=(160, 40)) as pilot:
        await drive(app, pilot, 4)
        detail = text_of(app, "#kernel-detail")
        # the reason comes right after the mode: it stays on screen at 80 columns
        assert detail.startswith(
            "Call sites of every cache  allocations only · frees not traced: f to trace · "
        )
        assert "net —" in detail and "Σnet" not in detail and "net 0" not in detail
        table = app.query_one("#kernel-table", DataTable)
        table.focus()
        await pilot.press("f")
        assert src.kernel_traced == [("slabfrees", True)]
        await pilot.press("f")
        assert src.kernel_traced[-2:] == [("slabfrees", False), ("slabtrace", True)]
        # from kernel stacks, f goes to the frees (one slab tracer at a time)
        await pilot.press("k")
        await pilot.press("f")
        assert src.kernel_traced[-2:] == [("slabstacks", False), ("slabfrees", True)]

    src = TracingSource(batches(root, frees=True))
    app = MemtopApp(src, interval_s=1.0, initial_pane="kernel")
    async with app.run_test(size=(160, 40)) as pilot:
        await drive(app, pilot, 4)
        detail = text_of(app, "#kernel-detail")
        assert "allocations and frees · 1 in 64 sampled" in detail
        assert "frees not traced" not in detail and "net —" not in detail
        assert "Σnet 1856" in detail  # (30 sampled - 1 freed) x 64 dentries
        status = text_of(app, "#kernel-status")
        assert "slabfrees: attached" in status and "slabtrace" not in status


class ExclusiveSource(FakeSource):
    """Keeps which tracers are on as the live source does: on is refused for one already on, off
    says whether there was one to stop."""

    def __init__(self, batches: list[Batch]) -> None:
        super().__init__(batches)
        self.on: set[str] = set()

    def trace_kernel(self, tracer: str, on: bool) -> bool:
        self.kernel_traced.append((tracer, on))
        was = tracer in self.on
        if on:
            self.on.add(tracer)
        else:
            self.on.discard(tracer)
        return not was if on else was


async def test_slab_tracer_keys_keep_one_tracer_and_leaving_stops_it(tmp_path: Path) -> None:
    """f then k (and every other order of the slab keys) runs one slab tracer at a time: each
    key stops the one running before it starts another; leaving the pane stops the last."""
    src = ExclusiveSource(batches(proc_root(tmp_path)))
    app = MemtopApp(src, interval_s=1.0, initial_pane="kernel")
    async with app.run_test(size=(120, 40)) as pilot:
        await drive(app, pilot, ticks=4)
        app.query_one("#kernel-table", DataTable).focus()
        expected = {"f": "slabfrees", "k": "slabstacks", "t": "slabtrace"}
        for key in "fkfktkkfft":
            before = set(src.on)
            await pilot.press(key)
            slab = src.on & set(SLAB_TRACERS)
            assert len(slab) <= 1, (key, src.on)
            # the tracer the key names, or none when it stopped the one running (a toggle)
            assert slab in ({expected[key]}, {"slabtrace"}, set()), (key, before, src.on)
        await pilot.press("f", "k", "p")
        assert src.on == {"slabstacks", "pagealloc"}
        await pilot.press("1")  # leave the pane
        await pilot.pause()
        assert src.on == set(), src.kernel_traced
        # every tracer started was stopped once, in the order asked
        starts = [t for t, on in src.kernel_traced if on]
        stops = [t for t, on in src.kernel_traced if not on]
        assert sorted(starts) == sorted(stops)
