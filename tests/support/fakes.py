"""Records and sources for tests that need no kernel: a fake Source, recorded host facts, an OOM
kill and two ticks of vmscan data, and a forced tick of a live app."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from memtop.core.text import clean
from memtop.probes.base import Probe
from memtop.records import Batch, Lost, ProbeStatus, Record
from memtop.records.host import HostFacts, VmStat
from memtop.records.oom import OomKill
from memtop.records.reclaim import ReclaimEvent, ReclaimTotals
from memtop.records.vmscan import VmscanTotals
from memtop.stream.source import sleep_until

if TYPE_CHECKING:
    from memtop.ui.app import MemtopApp


OOM_KILL = OomKill(
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


def vmscan_batches() -> list[Batch]:
    """Two ticks of vmscan data as the probe would send them."""
    base = 1_000_000_000_000
    vm = [
        VmStat(
            counters=(
                ("pgscan_kswapd", 0),
                ("pgscan_direct", 0),
                ("pgsteal_kswapd", 0),
                ("pgsteal_direct", 0),
                ("pgscan_anon", 0),
                ("pgsteal_anon", 0),
                ("workingset_refault_anon", 0),
            )
        ),
        VmStat(
            counters=(
                ("pgscan_kswapd", 1000),
                ("pgscan_direct", 200),
                ("pgsteal_kswapd", 600),
                ("pgsteal_direct", 100),
                ("pgscan_anon", 3000),
                ("pgsteal_anon", 1500),
                ("workingset_refault_anon", 40),
            )
        ),
    ]
    t0 = VmscanTotals(
        origins=(("kswapd", 0, 0, 0), ("direct", 0, 0, 0), ("memcg", 0, 0, 0)),
        kswapd_wakes=0,
        kswapd_sleeps=0,
        kcompactd_wakes=0,
        compaction_count=0,
        compaction_total_ns=0,
    )
    t1 = VmscanTotals(
        origins=(("kswapd", 1000, 600, 10), ("direct", 200, 100, 4), ("memcg", 1800, 800, 30)),
        kswapd_wakes=3,
        kswapd_sleeps=2,
        kcompactd_wakes=1,
        compaction_count=2,
        compaction_total_ns=3_000_000,
        compaction_hist=((20, 2),),
        slab=(("super_cache_scan", 5, 50_000, 900), ("deferred_split_scan", 2, 900_000, 0)),
    )
    r1 = ReclaimTotals(
        histogram=(("memcg", 14, 3), ("direct", 20, 1)),
        pids=(
            (4242, "hog\x1b[31m", "memcg", 3, 90_000, 40_000, 96),
            (77, "[bold]x", "direct", 1, 1_500_000, 1_500_000, 32),
        ),
    )
    events = [ReclaimEvent(base + i, 4242, 4242, "hog\x1b[31m", "memcg", 30_000, 32) for i in range(3)]
    events.append(ReclaimEvent(base + 9, 77, 78, "[bold]x", "direct", 1_500_000, 32))
    return [
        Batch(
            base,
            (
                ProbeStatus("vmscan", "attached", "attached in 0.5s"),
                vm[0],
                t0,
                ReclaimTotals(histogram=(), pids=()),
                Lost("vmscan", "events", 0),
            ),
        ),
        Batch(base + 1_000_000_000, (vm[1], t1, r1, *events, Lost("vmscan", "events", 0))),
    ]


def force_tick(app: MemtopApp) -> None:
    """One poll of every probe regardless of cadence, applied and drawn as the timer would."""
    from memtop.stream.bridge import Bridge

    source = app.source
    assert isinstance(source, Bridge)
    source.publish(source.poll_sync(force=True))
    if not app.paused:
        app.redraw()


class FakeSource:
    """A source for UI tests (memtop.stream.source.Source): hands out the given batches one per poll,
    attaches nothing, and notes the intents it gets. ``mode`` is what the header shows."""

    def __init__(self, batches: list[Batch] | None = None, mode: str = "bpf") -> None:
        self.batches = list(batches or [])
        self._mode = mode
        self.subs: list[Callable[[Batch], None]] = []
        self.focused: list[int] = []
        self.traced: list[list[int]] = []
        self.measured: list[list[int]] = []
        self.declined: list[list[int]] = []
        self.trace_choices: list[int | None] = []
        self.trace_budgets: list[float] = []
        self.kernel_traced: list[tuple[str, bool]] = []
        self.working_set: list[tuple[int, bool, float]] = []
        #: what watch() was told, in order
        self.watched: list[frozenset[str] | None] = []
        self.closed = False

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def replay(self) -> None:
        return None

    def subscribe(self, fn: Callable[[Batch], None]) -> None:
        self.subs.append(fn)

    async def start(self) -> None:
        return None

    async def poll(self, at: float | None = None) -> Batch | None:
        await sleep_until(at)
        if not self.batches:
            return None
        b = self.batches.pop(0)
        for fn in self.subs:
            fn(b)
        return b

    def settled(self) -> bool:
        return True

    async def wait_settled(self, timeout_s: float = 60.0) -> bool:
        return True

    def statuses(self) -> dict[str, ProbeStatus]:
        return {}

    def begin_bpf(self) -> None:
        return None

    def focus(self, pid: int) -> None:
        self.focused.append(pid)

    def unfocus(self, pid: int) -> None:
        if pid in self.focused:
            self.focused.remove(pid)

    def trace_allocations(
        self, pids: Sequence[int], sample_bytes: int | None = None, budget: float = 0.0
    ) -> bool:
        self.traced.append(list(pids))
        self.trace_choices.append(sample_bytes)
        self.trace_budgets.append(budget)
        return False

    def measure_allocations(self, pids: Sequence[int]) -> bool:
        self.measured.append(list(pids))
        return False

    def decline_allocations(self, pids: Sequence[int]) -> None:
        self.declined.append(list(pids))

    def trace_kernel(self, tracer: str, on: bool) -> bool:
        self.kernel_traced.append((tracer, on))
        return False

    def measure_working_set(self, pid: int, on: bool, window_s: float = 10.0) -> bool:
        self.working_set.append((pid, on, window_s))
        return on

    def watch(self, probes: Collection[str] | None) -> bool:
        self.watched.append(None if probes is None else frozenset(probes))
        return False

    def use_parts(self, parts: Mapping[str, Collection[str]] | None) -> None:
        return None

    def stop_attaching(self) -> None:
        return None

    def close(self, wait_s: float = 5.0) -> None:
        self.closed = True

    async def stop(self) -> None:
        self.closed = True


#: host facts of a machine that is not this one (a replay must show these, never the viewer's)
RECORDED_FACTS = HostFacts(
    kernel_release="5.10.0-recorded",
    hostname="recorded-host",
    boot_time_ns=1_700_000_000 * 10**9,
    headers_kind="standin",
    headers_version="5.10.0-99-amd64",
    bpf_error="no BPF on the recorded host",
    bpf_hint="it was a test",
)


class CountedPolls(Probe):
    """A probe that reads nothing and counts its polls: what the bridge's cadence rules are tested
    with (subclasses set ``name`` and the cadence class variables)."""

    needs_bpf = False

    def __init__(self) -> None:
        self.polls = 0

    def load(self) -> None:
        return None

    def poll(self) -> list[Record]:
        self.polls += 1
        return []
