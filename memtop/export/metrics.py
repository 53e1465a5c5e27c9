"""memtop's state as Prometheus metric families, read at scrape time.

Names compose with existing dashboards: where node_exporter or cAdvisor already name a figure,
theirs (``node_pressure_memory_*``, cAdvisor's ``container_memory_*`` with ``id`` = the cgroup
path); memtop's own figures under ``memtop_``, in base units (bytes, seconds), ``_total`` on
counters. Kernel log2 histograms become classic histograms with a fixed set of bounds: ``le`` is
a log2 bucket's upper bound in seconds (2**10 ns to 2**36 ns), counts cumulative.

Cardinality is guarded here: no pid label unless asked; the top K processes by RSS, swap and
stall, the rest summed in one series labelled ``rest="true"`` (see ``add_rest``); cgroups limited by depth and a regex; a hard budget on
series, the overflow counted in ``memtop_exporter_series_dropped_total``. Stacks never become
labels.

Nothing stale passes as current: a family is built only while the probe that feeds it is
attached; while it is erroring, failed or not attached yet its series are absent (a scraper sees
them go stale, alerts on ``absent()`` or ``memtop_probe_up == 0`` fire) rather than frozen at
their last value. ``memtop_probe_last_success_timestamp_seconds`` says when each probe last read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from operator import itemgetter

from memtop.export.families import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    Sample,
)
from memtop.records.cgroups import CgroupSample
from memtop.records.reclaim import RECLAIM_KINDS
from memtop.state import State
from memtop.state.cgroups import CgroupRow, CgroupsState
from memtop.state.host import HostState
from memtop.state.kernel import KernelState
from memtop.state.oom import MACHINE, OomState
from memtop.state.pagecache import PagecacheState
from memtop.state.processes import ProcessesState
from memtop.state.reclaim import ReclaimState
from memtop.state.shared import SharedState
from memtop.state.swapin import SwapinState
from memtop.state.vmscan import VmscanState
from memtop.views import wall_ns

NS = 1e-9

#: of each probe with optional parts (``Probe.optional_parts``), those an exported family uses:
#: the exporter's source reads no other (``Source.use_parts``). The kernel probe: slab caches
#: (memtop_slab_cache_*; meminfo is always read), never buddyinfo, vmallocinfo or allocinfo; the
#: kills probe: not every process's oom_score_adj (the OOM pane's column); the sharedinfo probe:
#: not the scan of every process's smaps (the Shared pane's tables); the /proc reader: not each
#: process's command line (process series are labelled by comm); the pagecache probe: its
#: totals, not its per-file and per-process map dumps; the pagecacheinfo probe: the listed files'
#: sum and the --cache-path files, not a record with holders and cgroup of every file listed
#: (``listed_cached_bytes``); the vmscan probe: not the slab shrinkers' calls (named from
#: /proc/kallsyms, held ~4 MiB; no family exports them); the cgroups probe: not who is in each
#: cgroup2 directory of a hybrid machine (the memory controller's members label the series). A new family that
#: uses one of those parts adds it here (tests/kernel/test_export_reads.py holds this honest).
EXPORTED_PARTS: dict[str, tuple[str, ...]] = {
    "kernel": ("slabinfo",),
    "kills": (),
    "sharedinfo": (),
    "procfs": (),
    "pagecache": (),
    "pagecacheinfo": (),
    "cgroups": (),
    "vmscan": (),
}
#: the label only the top-K families' rest bucket carries (``rest="true"``)
REST_LABEL = "rest"


@dataclass
class Options:
    """The exporter's cardinality guards."""

    #: the ``node`` label on every series ("" for none): memtop.export.node
    node: str = ""
    topk: int = 10
    pid_labels: bool = False
    cgroup_depth: int = 3  # deepest cgroup level exported (the root is 0)
    cgroup_regex: str = ""  # only cgroups whose path matches (search), "" for all
    max_series: int = 10000

    def cgroup_filter(self) -> re.Pattern[str] | None:
        return re.compile(self.cgroup_regex) if self.cgroup_regex else None


def _sample(name: str, labels: dict[str, str], value: float | None) -> Sample | None:
    return None if value is None else Sample(name, labels, float(value))


@dataclass(slots=True)
class CgroupBlock:
    """A cgroup's samples of the families that read its sample alone, in the families' order
    (None: the figure is not known, no series): cAdvisor's (usage, working set, swap, limit,
    cache, rss, kernel, failcnt, OOM events, pressure some and full) in ``container``, and its
    page cache by state and file refaults in ``cache``."""

    sample: CgroupSample
    labels: dict[str, str]
    container: tuple[Sample | None, ...]
    cache: tuple[Sample | None, ...]

    @staticmethod
    def of(r: CgroupRow, labels: dict[str, str], state_labels: list[dict[str, str]]) -> CgroupBlock:
        from memtop.linux.cgroupfs import working_set

        s = r.sample
        hits = r.event("max") if s.version == 2 else r.event("failcnt")
        oom = r.event("oom_kill")
        some = s.psi_some_us
        container = (
            _sample("container_memory_usage_bytes", labels, s.usage_bytes),
            _sample(
                "container_memory_working_set_bytes",
                labels,
                working_set(s.usage_bytes, r.stat("inactive_file")),
            ),
            _sample("container_memory_swap", labels, s.swap_bytes),
            _sample("container_spec_memory_limit_bytes", labels, s.limit_bytes or 0),
            _sample("container_memory_cache", labels, r.stat("file")),
            _sample("container_memory_rss", labels, r.stat("anon")),
            _sample("container_memory_kernel_usage", labels, r.stat("kernel")),
            _sample("container_memory_failcnt", labels, hits),
            None if oom is None else Sample("container_oom_events_total", labels, float(oom or 0)),
            None
            if some is None
            else Sample("container_pressure_memory_waiting_seconds_total", labels, some * 1e-6),
            None
            if some is None
            else Sample(
                "container_pressure_memory_stalled_seconds_total", labels, (s.psi_full_us or 0) * 1e-6
            ),
        )
        cache = tuple(
            _sample("memtop_cgroup_page_cache_bytes", sl, r.stat(name))
            for sl, (_label, name) in zip(state_labels, CGROUP_CACHE_STATES, strict=True)
        ) + (_sample("memtop_cgroup_page_cache_refaults_total", labels, r.stat("refault_file")),)
        return CgroupBlock(s, labels, container, cache)


@dataclass
class Accumulators:
    """Sums that must never go down although the rows they come from are bounded: per pid the
    last cumulative value seen, and the running total of what was added."""

    last: dict[tuple[str, int], int] = field(default_factory=dict)
    total: dict[str, int] = field(default_factory=dict)
    #: each cgroup's label set as of its container facts, kept from build to build: the same
    #: dict object while the cgroup's labels do not change, so the text writer (given a memo)
    #: reuses its text instead of escaping and joining it again (500 cgroups, ~12 families each)
    cgroup_labels: dict[str, tuple[object, dict[str, str]]] = field(default_factory=dict)
    #: the same with one more label (the page cache's ``state``), by (path, state)
    cgroup_state_labels: dict[tuple[str, str], tuple[dict[str, str], dict[str, str]]] = field(
        default_factory=dict
    )
    #: each cgroup's samples of its sample alone, kept while it is the same (``block_of``)
    cgroup_blocks: dict[str, CgroupBlock] = field(default_factory=dict)
    #: each cgroup's derived samples by sample name, then path (``sample``)
    cgroup_samples: dict[str, dict[str, Sample]] = field(default_factory=dict)
    #: each derived per-cgroup family's last samples by sample name, with the paths, label sets
    #: and values they were made of (``column``)
    cgroup_columns: dict[str, tuple[list[str], list[dict[str, str]], list[float], list[Sample]]] = field(
        default_factory=dict
    )

    def labels_of(self, path: str, r: CgroupRow) -> dict[str, str]:
        """The cgroup's label set (the same object as at the last build while it holds)."""
        key = (r.sample.container, r.sample.image)
        hit = self.cgroup_labels.get(path)
        if hit is not None and hit[0] == key:
            return hit[1]
        labels = _cgroup_labels(path, r)
        self.cgroup_labels[path] = (key, labels)
        return labels

    def state_labels_of(self, path: str, base: dict[str, str], state: str) -> dict[str, str]:
        """``base`` (a cgroup's set from :meth:`labels_of`) with ``state``, kept the same way."""
        hit = self.cgroup_state_labels.get((path, state))
        if hit is not None and hit[0] is base:
            return hit[1]
        labels = {**base, "state": state}
        self.cgroup_state_labels[(path, state)] = (base, labels)
        return labels

    def forget_cgroups(self, paths: Iterable[str]) -> None:
        """Keep the label sets, samples and blocks of ``paths`` only (the cgroups exported now)."""
        keep = set(paths)
        if len(self.cgroup_labels) > len(keep):
            self.cgroup_labels = {p: v for p, v in self.cgroup_labels.items() if p in keep}
        if len(self.cgroup_state_labels) > len(CGROUP_CACHE_STATES) * len(keep):
            self.cgroup_state_labels = {k: v for k, v in self.cgroup_state_labels.items() if k[0] in keep}
        if len(self.cgroup_blocks) > len(keep):
            self.cgroup_blocks = {p: v for p, v in self.cgroup_blocks.items() if p in keep}
        for name, by_path in self.cgroup_samples.items():
            if len(by_path) > len(keep):
                self.cgroup_samples[name] = {p: v for p, v in by_path.items() if p in keep}

    def block_of(self, path: str, r: CgroupRow) -> CgroupBlock:
        """The cgroup's samples that come from its sample alone (:class:`CgroupBlock`): the same
        objects as at the last build while its sample and labels are the same objects (an idle
        cgroup's sample is kept from poll to poll), so the text writer reuses their lines."""
        labels = self.labels_of(path, r)
        hit = self.cgroup_blocks.get(path)
        if hit is not None and hit.sample is r.sample and hit.labels is labels:
            return hit
        block = CgroupBlock.of(
            r, labels, [self.state_labels_of(path, labels, st) for st, _ in CGROUP_CACHE_STATES]
        )
        self.cgroup_blocks[path] = block
        return block

    def sample(self, name: str, path: str, labels: dict[str, str], value: float) -> Sample:
        """A cgroup's sample of a figure derived beyond its sample (needed memory, reclaim,
        swap-ins): the last build's object while its labels and value are the same."""
        by_path = self.cgroup_samples.setdefault(name, {})
        hit = by_path.get(path)
        if hit is not None and hit.labels is labels and hit.value == value:
            return hit
        by_path[path] = out = Sample(name, labels, value)
        return out

    def column(
        self, name: str, paths: list[str], labels: list[dict[str, str]], values: list[float]
    ) -> list[Sample]:
        """A family of figures derived beyond the cgroups' samples, one sample per path: the
        last build's samples when the paths, label sets and values are all the last build's
        (compared in C: most cgroups neither reclaim nor swap, and an idle one's needed memory
        is flat), else each path's from :meth:`sample`. Equal values make equal samples, as
        :meth:`sample` has them (memtop's figures here have no negative zero or NaN)."""
        last = self.cgroup_columns.get(name)
        if last is not None and last[2] == values and last[0] == paths and last[1] == labels:
            return list(last[3])
        out = [self.sample(name, p, lab, v) for p, lab, v in zip(paths, labels, values, strict=True)]
        self.cgroup_columns[name] = (paths, labels, values, out)
        return list(out)

    def add(self, name: str, key: int, value: int) -> None:
        prev = self.last.get((name, key), 0)
        if value > prev:
            self.total[name] = self.total.get(name, 0) + value - prev
        self.last[(name, key)] = value
        if len(self.last) > 65536:  # forget the oldest pids; their sums are already added
            for k in list(self.last)[:16384]:
                del self.last[k]

    def get(self, name: str) -> int:
        return self.total.get(name, 0)


#: the exported buckets: log2 bounds from 2**10 ns (~1 µs) to 2**36 ns (~69 s), the same at every
#: scrape (a bucket set that grew as latencies appeared would make series come and go)
FIRST_BUCKET, LAST_BUCKET = 9, 35


def log2_buckets(counts: Iterable[tuple[int, int]]) -> list[tuple[str, float]]:
    """(le in seconds, cumulative count) for the kernel's log2 ns buckets given as (index, count):
    bucket ``i`` holds [2**i, 2**(i+1)) ns, so its bound is ``le`` = 2**(i+1) ns. Buckets below the
    first exported bound fold into it, above the last into +Inf."""
    per = dict(counts)
    out: list[tuple[str, float]] = []
    running = sum(n for i, n in per.items() if i < FIRST_BUCKET)
    for i in range(FIRST_BUCKET, LAST_BUCKET + 1):
        running += per.get(i, 0)
        out.append((f"{(1 << (i + 1)) * NS:.12g}", float(running)))
    out.append(("+Inf", float(sum(per.values()))))
    return out


def _depth(path: str) -> int:
    return 0 if path == "/" else path.count("/")


class Budget:
    """The series budget: families are built in order of importance; once ``max_series`` samples
    are out, the rest of each family is dropped and counted."""

    def __init__(self, max_series: int) -> None:
        self.left = max_series
        self.dropped = 0
        self.series = 0

    def take(self, family: Metric) -> Metric:
        n = len(family.samples)
        if n > self.left:
            self.dropped += n - self.left
            family.samples = family.samples[: self.left]
            n = self.left
        self.left -= n
        self.series += n
        return family


def families(state: State, opts: Options, acc: Accumulators) -> Iterator[Metric]:
    """Every metric family memtop exports, from ``state`` now (the caller holds the state's lock)."""
    yield from _host(state)
    yield from _probes(state)
    yield from _reclaim(state, acc)
    yield from _vmscan(state)
    yield from _swapin(state, acc)
    yield from _compressed(state)
    yield from _oom(state)
    yield from _kills(state, opts)
    cgroups = _exported_cgroups(state, opts, acc)
    yield from _cgroups(state, cgroups, acc)
    yield from _processes(state, opts)
    yield from _kernel(state, opts)
    yield from _shared(state)
    yield from _pagecache(state, opts, cgroups)


def measuring(state: State, probe: str) -> bool:
    """Whether ``probe`` is reading now: attached, and its polls succeed. An erroring probe's
    figures are its last good reading (of some age), a failed or detached one's are frozen: the
    exporter serves neither as current."""
    st = state.statuses.get(probe)
    return st is not None and st.state == "attached"


def _host(state: State) -> Iterator[Metric]:
    p = state.get(HostState).pressure
    if p is not None and measuring(state, "procfs"):  # the /proc reader reads PSI
        # node_exporter's names and units (seconds)
        c = CounterMetricFamily(
            "node_pressure_memory_waiting_seconds",
            "Total time in seconds that processes have waited for memory",
        )
        c.add_metric([], p.some_total_us * 1e-6)
        yield c
        c = CounterMetricFamily(
            "node_pressure_memory_stalled_seconds",
            "Total time in seconds no process could make progress due to memory congestion",
        )
        c.add_metric([], p.full_total_us * 1e-6)
        yield c


def _probes(state: State) -> Iterator[Metric]:
    up = GaugeMetricFamily(
        "memtop_probe_up",
        "1 when the probe is measuring (attached, its polls succeed), 0 when its polls fail (erroring: "
        "retried with backoff), it failed, detached or is not attached yet; reason says why",
        labels=["probe", "state", "reason"],
    )
    for name, st in sorted(state.statuses.items()):
        reason = st.message if st.state in ("failed", "erroring") else ""
        up.add_metric([name, st.state, reason[:200]], 1.0 if st.state == "attached" else 0.0)
    yield up
    last = GaugeMetricFamily(
        "memtop_probe_last_success_timestamp_seconds",
        "When the probe last read successfully (Unix time): the age of whatever it fed",
        labels=["probe"],
    )
    for name in sorted(state.statuses):
        ok = state.last_ok_ns.get(name)
        wall = wall_ns(state, ok) if ok else None
        if wall is not None:
            last.add_metric([name], wall * NS)
    yield last
    failures = GaugeMetricFamily(
        "memtop_probe_poll_failures",
        "Polls in a row that failed (0 when the last one succeeded)",
        labels=["probe"],
    )
    for name, st in sorted(state.statuses.items()):
        failures.add_metric([name], float(st.failures if st.state == "erroring" else 0))
    yield failures
    lost = CounterMetricFamily(
        "memtop_lost_events",
        "Events a probe could not deliver (full ring buffers or maps)",
        labels=["probe", "what"],
    )
    for (probe, what), n in sorted(state.lost.items()):
        lost.add_metric([probe, what], float(n))
    yield lost


def _reclaim(state: State, acc: Accumulators) -> Iterator[Metric]:
    if not measuring(state, "vmscan"):
        return
    rs = state.get(ReclaimState)
    cg = state.get(CgroupsState)
    h = HistogramMetricFamily(
        "memtop_reclaim_latency_seconds",
        "Direct and memcg reclaim episode latency (vmscan tracepoints; kernel log2 histogram)",
        labels=["kind"],
    )
    # every kind from the start, zero until its first episode: a dashboard's rate of a kind that
    # has not happened yet is 0, not "No data"
    kinds = sorted(set(RECLAIM_KINDS) | set(rs.histogram))
    for kind in kinds:
        # the exact sum: the kernel's per-cgroup sums cover every episode (unless its table was full)
        total_ns = sum(v[1] for (_, k), v in cg.kernel_reclaim.items() if k == kind)
        h.add_metric([kind], log2_buckets(rs.histogram.get(kind, {}).items()), total_ns * NS)
    yield h
    stall = CounterMetricFamily(
        "memtop_reclaim_episodes", "Reclaim episodes by kind since memtop started", labels=["kind"]
    )
    for kind in kinds:
        stall.add_metric([kind], float(rs.histogram_total(kind)))
    yield stall


def _vmscan(state: State) -> Iterator[Metric]:
    if not measuring(state, "vmscan"):
        return
    vs = state.get(VmscanState).totals
    if vs is None:
        return
    scanned = CounterMetricFamily(
        "memtop_vmscan_pages_scanned", "LRU pages scanned by reclaim origin", labels=["origin"]
    )
    reclaimed = CounterMetricFamily(
        "memtop_vmscan_pages_reclaimed", "LRU pages reclaimed by reclaim origin", labels=["origin"]
    )
    for origin, s, r, _ in vs.origins:
        scanned.add_metric([origin], float(s))
        reclaimed.add_metric([origin], float(r))
    yield scanned
    yield reclaimed


def _swapin(state: State, acc: Accumulators) -> Iterator[Metric]:
    if not measuring(state, "swapin"):
        return
    st = state.get(SwapinState)
    for pid, row in st.rows.items():
        acc.add("swapin_wait_ns", pid, row.rec.swapin_wait_ns)
        acc.add("swapins", pid, row.rec.swapins)
        acc.add("file_major_faults", pid, row.rec.file_major_faults)
    if st.hist is not None:
        h = HistogramMetricFamily(
            "memtop_swapin_wait_seconds", "Time a swap-in kept its task waiting (kernel log2 histogram)"
        )
        h.add_metric([], log2_buckets(enumerate(st.hist.swapin_counts)), acc.get("swapin_wait_ns") * NS)
        yield h
    c = CounterMetricFamily("memtop_swapins", "Pages read back from swap by faulting tasks")
    c.add_metric([], float(acc.get("swapins")))
    yield c
    f = CounterMetricFamily(
        "memtop_file_major_faults",
        "Major faults of faulting tasks on file pages (read from disk); with memtop_swapins_total "
        "every major fault",
    )
    f.add_metric([], float(acc.get("file_major_faults")))
    yield f


def _compressed(state: State) -> Iterator[Metric]:
    """Compressed swap: meminfo's zswap figures under node_exporter's names (its meminfo
    collector's ``node_memory_<Field>_bytes``), zswap's debugfs counters and zram devices (which
    node_exporter does not read) under memtop's."""
    m = state.get(HostState).meminfo
    if m is not None and measuring(state, "procfs"):
        for name, value, what in (
            ("node_memory_Zswap_bytes", m.zswap_bytes, "Memory information field Zswap_bytes (zswap's pool)"),
            (
                "node_memory_Zswapped_bytes",
                m.zswapped_bytes,
                "Memory information field Zswapped_bytes (what it holds)",
            ),
        ):
            g = GaugeMetricFamily(name, what)
            g.add_metric([], float(value))
            yield g
    info = state.get(SwapinState).swapinfo
    if info is None or not measuring(state, "swapinfo"):
        return
    g = GaugeMetricFamily("memtop_zswap_enabled", "1 when zswap is enabled (/sys/module/zswap/parameters)")
    g.add_metric([], float(info.zswap_enabled))
    yield g
    debug = dict(info.zswap_debug)
    if debug:  # debugfs mounted: absent otherwise, never 0
        for name, key, what in (
            ("memtop_zswap_stored_pages", "stored_pages", "Pages zswap holds (debugfs)"),
            ("memtop_zswap_pool_total_size_bytes", "pool_total_size", "Memory zswap's pool takes (debugfs)"),
        ):
            if key in debug:
                g = GaugeMetricFamily(name, what)
                g.add_metric([], float(debug[key]))
                yield g
        c = CounterMetricFamily(
            "memtop_zswap_written_back_pages", "Pages zswap wrote back to the swap device"
        )
        c.add_metric([], float(debug.get("written_back_pages", 0)))
        yield c
        c = CounterMetricFamily(
            "memtop_zswap_rejected_pages",
            "Pages zswap refused (they went to disk), by reason",
            labels=["reason"],
        )
        for key, v in sorted(debug.items()):
            if key.startswith("reject_"):
                c.add_metric([key.removeprefix("reject_")], float(v))
        yield c
    if info.zram:
        spec = (
            ("memtop_zram_orig_data_bytes", "orig_data_size", "What a zram device holds, uncompressed"),
            ("memtop_zram_compr_data_bytes", "compr_data_size", "What a zram device holds, compressed"),
            (
                "memtop_zram_mem_used_bytes",
                "mem_used_total",
                "Memory a zram device takes, with its allocator's",
            ),
            ("memtop_zram_same_pages", "same_pages", "Same-filled pages a zram device holds (no memory)"),
            ("memtop_zram_huge_pages", "huge_pages", "Incompressible pages a zram device holds"),
        )
        for name, key, what in spec:
            g = GaugeMetricFamily(name, what, labels=["device"])
            for dev, _alg, _size, pairs in info.zram:
                figure = dict(pairs).get(key)
                if figure is not None:
                    g.add_metric([dev], float(figure))
            yield g
        c = CounterMetricFamily(
            "memtop_zram_backing_writes_pages",
            "Pages a zram device wrote back to its backing device",
            labels=["device"],
        )
        for dev, _alg, _size, pairs in info.zram:
            if "bd_writes" in dict(pairs):
                c.add_metric([dev], float(dict(pairs)["bd_writes"]))
        yield c


def _oom(state: State) -> Iterator[Metric]:
    if not measuring(state, "oom"):
        return
    st = state.get(OomState)
    cg = state.get(CgroupsState)
    counts: dict[tuple[str, ...], int] = {}
    for k in st.kills:
        victim_cg = k.task_memcg or cg.memcg_of(k.victim_pid) or ""
        row = cg.rows.get(victim_cg)
        _name, container, pod, namespace, _image = container_labels(row.sample if row is not None else None)
        key = (
            victim_cg,
            k.memcg,
            {
                "memcg": "CONSTRAINT_MEMCG",
                "cpuset": "CONSTRAINT_CPUSET",
                "mempolicy": "CONSTRAINT_MEMORY_POLICY",
            }.get(k.scope, "CONSTRAINT_NONE"),
            container,
            pod,
            namespace,
        )
        counts[key] = counts.get(key, 0) + 1
    fam = CounterMetricFamily(
        "memtop_oom_kills",
        "OOM kills seen since memtop started (the last 1000 kept), by the victim's cgroup, the cgroup whose limit fired, "
        "the constraint, container, pod and namespace",
        labels=["cgroup", "oom_cgroup", "constraint", "container", "pod", "namespace"],
    )
    # a series with every label empty stays at 0: before the first kill sum() is 0, not "No data"
    # (no kill has an empty constraint, so it is never a kill's own series)
    fam.add_metric([""] * 6, 0.0)
    for labels, n in sorted(counts.items()):
        fam.add_metric(list(labels), float(n))
    yield fam


def cut_depth(path: str, depth: int) -> str:
    """``path`` cut to its first ``depth`` levels ("/a/b/c" at 2: "/a/b")."""
    if _depth(path) <= depth:
        return path
    return "/" + "/".join(path.split("/")[1 : depth + 1]) if depth > 0 else "/"


def _kills(state: State, opts: Options) -> Iterator[Metric]:
    """Every memory kill memtop saw while it ran, whoever the killer, and each forecast of the
    next: the kernel's kills while the oom probe measures, userspace killers' while the kills
    probe does; a cgroup's forecast while the cgroups probe does, the machine's while the /proc
    reader does."""
    kernel, users = measuring(state, "oom"), measuring(state, "kills")
    st = state.get(OomState)
    if kernel or users:
        fam = CounterMetricFamily(
            "memtop_memory_kills",
            "Memory kills seen since memtop started, by killer (kernel: the OOM killer; a userspace "
            "killer by name), reason (the kernel's: its constraint memcg, global, cpuset, mempolicy; a "
            "userspace killer's rule: low_memory, swap, pressure, unknown) and the victim's cgroup",
            labels=["killer", "reason", "cgroup"],
        )
        # every label empty, at 0: before the first kill sum() is 0, not "No data" (no kill has
        # an empty killer, so it is never a kill's own series)
        fam.add_metric(["", "", ""], 0.0)
        counts: dict[tuple[str, str, str], int] = {}
        for (killer, reason, cgroup), n in st.kill_counts.items():
            if not (kernel if killer == "kernel" else users):
                continue
            key = (killer, reason, cut_depth(cgroup, opts.cgroup_depth) if cgroup else "")
            counts[key] = counts.get(key, 0) + n
        for labels, n in sorted(counts.items()):
            fam.add_metric(list(labels), float(n))
        yield fam
    machine, cgroups = measuring(state, "procfs"), measuring(state, "cgroups")
    if not (machine or cgroups):
        return
    pattern = opts.cgroup_filter()
    g = GaugeMetricFamily(
        "memtop_memory_exhaustion_forecast_seconds",
        "Seconds until a memory cgroup's usage + swap reaches its limit (cgroup empty: the machine's "
        "MemAvailable reaches the first killer's threshold) at its growth over the last 10 s; absent "
        "while it does not grow. killer: who kills then (kernel, or earlyoom / systemd-oomd)",
        labels=["cgroup", "killer"],
    )
    for path, f in sorted(st.forecasts.items()):
        if f.seconds_left is None:
            continue
        if path == MACHINE:
            if not machine:
                continue
        elif not cgroups or _depth(path) > opts.cgroup_depth or (pattern and not pattern.search(path)):
            continue
        g.add_metric([path, f.killer], f.seconds_left)
    yield g


#: cAdvisor's labels on its container_* series: ``id`` the cgroup path, ``name`` the runtime's
#: name of the container, ``container``/``pod``/``namespace`` Kubernetes' names (a plain podman or
#: docker container's ``container`` is its name), ``image`` the image; "" where not known
CONTAINER_LABELS = ["id", "name", "container", "pod", "namespace", "image"]


def container_labels(sample: CgroupSample | None) -> list[str]:
    """Every label of :data:`CONTAINER_LABELS` but ``id``, for a cgroup's sample (None: unknown)."""
    c = sample.container if sample is not None else None
    if c is None or sample is None:
        return ["", "", "", "", ""]
    _runtime, cid, _pod_uid, name, pod = c
    namespace, _, pod_name = pod.rpartition("/")
    return [name or cid, name, pod_name, namespace, sample.image]


def _cgroup_rows(cg: CgroupsState, opts: Options) -> list[tuple[str, CgroupRow]]:
    """The cgroups exported: down to ``--cgroup-depth``, matching ``--cgroup-regex``."""
    pattern = opts.cgroup_filter()
    return [
        (path, r)
        for path, r in sorted(cg.rows.items())
        if _depth(path) <= opts.cgroup_depth and (pattern is None or pattern.search(path))
    ]


def _cgroup_labels(path: str, r: CgroupRow) -> dict[str, str]:
    # a label left out is one whose value is "" (the same series to Prometheus): the four
    # container labels are empty on most cgroups of most machines, and would cost ~40 bytes
    # on every cgroup series
    values = zip(CONTAINER_LABELS, [path, *container_labels(r.sample)], strict=True)
    return {k: v for k, v in values if v or k in ("id", "name")}


#: cAdvisor's families of a cgroup's sample alone, in :class:`CgroupBlock`'s order (its last
#: four, failcnt, OOM events and pressure, are made in ``_cgroups``)
CONTAINER_GAUGES = (
    (
        "container_memory_usage_bytes",
        "Current memory usage in bytes, including all memory regardless of when it was accessed",
    ),
    ("container_memory_working_set_bytes", "Current working set in bytes (usage minus inactive file)"),
    ("container_memory_swap", "Container swap usage in bytes"),
    ("container_spec_memory_limit_bytes", "Memory limit for the container (0: none)"),
    ("container_memory_cache", "Number of bytes of page cache memory"),
    ("container_memory_rss", "Size of RSS (anonymous memory) in bytes"),
    ("container_memory_kernel_usage", "Size of kernel memory allocated in bytes"),
)


def _column(blocks: list[CgroupBlock], i: int) -> list[Sample]:
    """The samples of one family, the ``i``-th of each cgroup's block, those that exist."""
    return [x for x in [b.container[i] for b in blocks] if x is not None]


@dataclass(slots=True)
class ExportedCgroups:
    """The cgroups a build exports (``_cgroup_rows``), in order, and each one's
    :class:`CgroupBlock`: found once per build for the cAdvisor and page cache families."""

    rows: list[tuple[str, CgroupRow]]
    blocks: list[CgroupBlock]


def _exported_cgroups(state: State, opts: Options, acc: Accumulators) -> ExportedCgroups | None:
    """None while the cgroups probe is not measuring (or found none): no cgroup series."""
    cg = state.get(CgroupsState)
    if not cg.rows or not measuring(state, "cgroups"):
        return None
    rows = _cgroup_rows(cg, opts)
    # one label set per cgroup, shared by its samples of every family (read-only): built once
    # per cgroup while its labels hold, not once per series (7,000 of them with 500 cgroups);
    # and the samples of its sample alone, made once while its sample holds (an idle cgroup's
    # from build to build: the text writer then reuses their lines)
    acc.forget_cgroups(path for path, _r in rows)
    return ExportedCgroups(rows, [acc.block_of(path, r) for path, r in rows])


def _cgroups(state: State, cgroups: ExportedCgroups | None, acc: Accumulators) -> Iterator[Metric]:
    if cgroups is None:
        return
    cg = state.get(CgroupsState)
    rows, blocks = cgroups.rows, cgroups.blocks
    paths = [path for path, _r in rows]
    labels = [b.labels for b in blocks]

    # cAdvisor's names and labels (id = the cgroup path, name = the container's)
    for i, (name, doc) in enumerate(CONTAINER_GAUGES):
        g = GaugeMetricFamily(name, doc, labels=CONTAINER_LABELS)
        g.samples = _column(blocks, i)
        yield g
    # cAdvisor's name has no _total (it predates the convention), and prometheus_client's counters
    # always add one: untyped, under exactly cAdvisor's name, so its queries find it
    fail = Metric("container_memory_failcnt", "Number of memory usage hits limits", "unknown")
    fail.samples = _column(blocks, 7)
    yield fail
    ooms = CounterMetricFamily(
        "container_oom_events",
        "Count of out of memory events observed for the container",
        labels=CONTAINER_LABELS,
    )
    ooms.samples = _column(blocks, 8)
    yield ooms
    some = CounterMetricFamily(
        "container_pressure_memory_waiting_seconds",
        "Total time duration tasks in the container have waited due to memory congestion",
        labels=CONTAINER_LABELS,
    )
    some.samples = _column(blocks, 9)
    yield some
    full = CounterMetricFamily(
        "container_pressure_memory_stalled_seconds",
        "Total time duration no tasks in the container could make progress due to memory congestion",
        labels=CONTAINER_LABELS,
    )
    full.samples = _column(blocks, 10)
    yield full
    yield from _needed(cg, rows, labels, acc)
    # memtop's own per cgroup: memcg reclaim (its processes', not its children's: sum by prefix)
    if measuring(state, "vmscan"):
        eps = CounterMetricFamily(
            "memtop_cgroup_reclaim_episodes",
            "Memcg reclaim episodes of the cgroup's own processes",
            labels=CONTAINER_LABELS,
        )
        stall = CounterMetricFamily(
            "memtop_cgroup_reclaim_stall_seconds",
            "Time the cgroup's own processes stalled in memcg reclaim",
            labels=CONTAINER_LABELS,
        )
        probed = [cg.probed.get(path) for path in paths]
        eps.samples = acc.column(
            "memtop_cgroup_reclaim_episodes_total",
            paths,
            labels,
            [float(p.reclaim_events if p else 0) for p in probed],
        )
        stall.samples = acc.column(
            "memtop_cgroup_reclaim_stall_seconds_total",
            paths,
            labels,
            [(p.reclaim_ns if p else 0) * NS for p in probed],
        )
        yield eps
        yield stall
    if measuring(state, "swapin"):
        sw = CounterMetricFamily(
            "memtop_cgroup_swapin_wait_seconds",
            "Time the cgroup's own processes waited on swap-ins",
            labels=CONTAINER_LABELS,
        )
        by_path = cg.swapin_by_path()
        sw.samples = acc.column(
            "memtop_cgroup_swapin_wait_seconds_total",
            paths,
            labels,
            [by_path.get(path, (0, 0))[1] * NS for path in paths],
        )
        yield sw


def _needed(
    cg: CgroupsState,
    rows: list[tuple[str, CgroupRow]],
    labels: list[dict[str, str]],
    acc: Accumulators,
) -> Iterator[Metric]:
    """The needed-memory estimate per cgroup (docs/panes/cgroups.md): what it needs, what is cold,
    whether it thrashes. Not cAdvisor's working set (usage − inactive file), hence memtop_."""
    need = GaugeMetricFamily(
        "memtop_working_set_bytes",
        "Memory the cgroup needs: anon + shmem + active file + file activated and pages refaulted in 10 s",
        labels=CONTAINER_LABELS,
    )
    cold = GaugeMetricFamily(
        "memtop_cgroup_cold_bytes",
        "Inactive file pages of the cgroup not touched again",
        labels=CONTAINER_LABELS,
    )
    thrash = GaugeMetricFamily(
        "memtop_cgroup_thrashing",
        "1 when refaults are high and needed memory exceeds the limit",
        labels=CONTAINER_LABELS,
    )
    paths: list[str] = []
    labs: list[dict[str, str]] = []
    figures: list[tuple[int, int, bool]] = []
    for (path, r), lab in zip(rows, labels, strict=True):
        n = r.needed_figures(cg.polled_ns or r.ts_ns)
        if n is None:
            continue  # memory.stat lacks the inputs: absent, not 0
        paths.append(path)
        labs.append(lab)
        figures.append(n)
    for fam, i in ((need, 0), (cold, 1), (thrash, 2)):
        fam.samples = acc.column(fam.name, paths, labs, [float(n[i]) for n in figures])
    yield need
    yield cold
    yield thrash


def _processes(state: State, opts: Options) -> Iterator[Metric]:
    procs = state.get(ProcessesState)
    if not procs.rows or not measuring(state, "procfs"):
        return
    cg = state.get(CgroupsState)
    stalls = {pid: r.total_ns for pid, r in state.get(ReclaimState).pids.items()}
    lab = ["comm", "cgroup"] + (["pid"] if opts.pid_labels else [])
    pids = list(procs.rows)
    rows = list(procs.rows.values())
    # gauges: a top-K set changes as processes come, go and change rank, so even the cumulative
    # stall time is a per-process gauge here (a counter summed over "other" would go down)
    spec: list[tuple[str, str, Callable[[], list[float]]]] = [
        (
            "memtop_process_rss_bytes",
            "Resident memory of the top processes by RSS (the rest summed in rest=true)",
            lambda: [float(r.sample.rss_bytes) for r in rows],
        ),
        (
            "memtop_process_swap_bytes",
            "Swapped-out memory of the top processes by swap (the rest summed in rest=true)",
            lambda: [float(r.sample.swap_bytes) for r in rows],
        ),
        (
            "memtop_process_reclaim_stall_seconds",
            "Time the top processes by stall spent in reclaim since memtop started (the rest summed in rest=true)",
            lambda: [stalls.get(pid, 0) * NS for pid in pids],
        ),
    ]
    for name, doc, values in spec:
        if name == "memtop_process_reclaim_stall_seconds" and not measuring(state, "vmscan"):
            continue  # the stalls come from vmscan's tracepoints
        fam = GaugeMetricFamily(name, doc, labels=lab)
        top, rest = top_and_rest(values(), pids, opts.topk)
        # processes with the same labels (two bash in one cgroup, without pid labels) are one series
        series: dict[tuple[str, ...], float] = {}
        for value, pid, i in top:
            key = (rows[i].sample.comm, cg.memcg_of(pid) or "") + ((str(pid),) if opts.pid_labels else ())
            series[key] = series.get(key, 0.0) + value
        for key, value in series.items():
            fam.add_metric(list(key), value)
        if rest is not None:
            add_rest(fam, rest)
        yield fam


def top_and_rest(
    values: list[float], pids: list[int], k: int
) -> tuple[list[tuple[float, int, int]], float | None]:
    """The ``k`` largest (value, pid, index) of the processes, largest first (by value, then
    pid: (value, pid) is unique, so the index never decides), and the sum of the others'
    values in that order (None when there are no others): what sorting them all gives. Values
    are >= 0, and on a machine that swaps most processes still have no swap and no reclaim
    stall: when at least K are not zero and a quarter or more are, only those not zero are
    sorted (tuples compared in C); the zeros would rank after them and add nothing to the sum.
    Otherwise (RSS, or no K processes with any) all are sorted."""
    n = len(values)
    zeros = values.count(0.0)
    if zeros * 4 < n or n - zeros < k:
        ranked = sorted(zip(values, pids, range(n), strict=True), reverse=True)
    else:
        ranked = sorted([t for t in zip(values, pids, range(n), strict=True) if t[0]], reverse=True)
    if n <= k:
        return ranked, None
    # in rank order, as the values were summed; from a float 0.0, as a zero would have made it
    return ranked[:k], sum(map(itemgetter(0), ranked[k:]), 0.0)


def add_rest(fam: Metric, value: float) -> None:
    """The sum of what is not in the top K, as the one series with ``rest="true"`` and its other
    labels empty: a label a process or slab name cannot forge (a process may call itself
    "other", and its series would have collided with a rest bucket named so)."""
    labels = dict.fromkeys(getattr(fam, "_labelnames", ()), "")
    labels[REST_LABEL] = "true"
    fam.samples.append(Sample(fam.name, labels, value, None))


def _kernel(state: State, opts: Options) -> Iterator[Metric]:
    """The Kernel pane: where MemTotal went (one series per breakdown line, adding up to
    MemTotal, "unexplained" among them) and the slab caches: the top K by size, the rest summed
    in ``rest="true"``."""
    from memtop.linux import kernelfs

    if not measuring(state, "kernel"):
        return
    st = state.get(KernelState)
    b = st.breakdown()
    if b:
        g = GaugeMetricFamily(
            "memtop_kernel_memory_bytes",
            "Where MemTotal went, from /proc/meminfo: the lines add up to MemTotal (unexplained is the rest)",
            labels=["line"],
        )
        for key, _label in kernelfs.BREAKDOWN:
            g.add_metric([key], float(b[key]))
        yield g
    if st.slab_readable and st.slabs:
        ranked = sorted(st.slabs.values(), key=lambda r: (-r.slab.total_bytes, r.slab.name))
        g = GaugeMetricFamily(
            "memtop_slab_cache_bytes",
            "Memory a slab cache holds (/proc/slabinfo: slabs x pages per slab x page size), the top K; "
            'the rest summed in rest="true"',
            labels=["cache"],
        )
        o = GaugeMetricFamily(
            "memtop_slab_cache_objects",
            "Objects in use in a slab cache (/proc/slabinfo active_objs), the same caches",
            labels=["cache"],
        )
        for r in ranked[: opts.topk]:
            g.add_metric([r.slab.name], float(r.slab.total_bytes))
            o.add_metric([r.slab.name], float(r.slab.active_objs))
        rest = ranked[opts.topk :]
        if rest:
            add_rest(g, float(sum(r.slab.total_bytes for r in rest)))
            add_rest(o, float(sum(r.slab.active_objs for r in rest)))
        yield g
        yield o


def _shared(state: State) -> Iterator[Metric]:
    """The Shared pane's figures an alert wants: hugetlb pools (an exhausted pool makes a service
    fall back to 4 KiB pages, or fail) and System V segments no process has attached (memory held
    by nobody)."""
    if not measuring(state, "sharedinfo"):
        return
    st = state.get(SharedState)
    if st.pools is not None:
        pools = GaugeMetricFamily(
            "memtop_hugetlb_pool_pages",
            "hugetlb pool per page size: total, free, reserved (promised, not faulted) and surplus pages",
            labels=["page_size_bytes", "state"],
        )
        for size, total, free, resv, surp in st.pools.pools:
            for name, v in (("total", total), ("free", free), ("reserved", resv), ("surplus", surp)):
                pools.add_metric([str(size), name], float(v))
        yield pools
    if st.sysv_readable:
        segs = GaugeMetricFamily(
            "memtop_sysv_shm_segments",
            "System V shared memory segments; orphan=true: no process attached (nattch 0)",
            labels=["orphan"],
        )
        rss = GaugeMetricFamily(
            "memtop_sysv_shm_resident_bytes",
            "Resident memory of System V segments; orphan=true: held by segments no process attached",
            labels=["orphan"],
        )
        swap = GaugeMetricFamily(
            "memtop_sysv_shm_swap_bytes",
            "Swapped-out memory of System V segments",
            labels=["orphan"],
        )
        for orphan in (False, True):
            chosen = [g for g in st.segments.values() if (g.nattch == 0) == orphan]
            label = ["true" if orphan else "false"]
            segs.add_metric(label, float(len(chosen)))
            rss.add_metric(label, float(sum(g.rss_bytes for g in chosen)))
            swap.add_metric(label, float(sum(g.swap_bytes for g in chosen)))
        yield segs
        yield rss
        yield swap


#: /proc/vmstat's workingset counters of file pages, by the ``event`` label
WORKINGSET_EVENTS = (
    ("refault", "workingset_refault_file"),
    ("activate", "workingset_activate_file"),
    ("restore", "workingset_restore_file"),
)
#: memory.stat's page cache figures, by the ``state`` label (memtop.linux.cgroupfs.STAT_NAMES names)
CGROUP_CACHE_STATES = (
    ("active", "active_file"),
    ("inactive", "inactive_file"),
    ("dirty", "dirty"),
    ("writeback", "writeback"),
)


def _pagecache(state: State, opts: Options, cgroups: ExportedCgroups | None) -> Iterator[Metric]:
    """The Page cache pane's figures: per cgroup its page cache by state and its file refaults
    (the cgroups probe; the whole of it is cAdvisor's container_memory_cache), the machine's
    workingset events (/proc/vmstat), pages added to and deleted from the cache (the pagecache
    probe), the listed files' total, and per file only for the files under the directories the
    user named with --cache-path (a series per open file would be unbounded)."""
    if cgroups is not None:
        g = GaugeMetricFamily(
            "memtop_cgroup_page_cache_bytes",
            "The cgroup's page cache by state (memory.stat: active/inactive file, dirty, writeback)",
            labels=[*CONTAINER_LABELS, "state"],
        )
        refaults = CounterMetricFamily(
            "memtop_cgroup_page_cache_refaults",
            "File pages the cgroup read back after their eviction (memory.stat workingset_refault_file)",
            labels=CONTAINER_LABELS,
        )
        blocks = cgroups.blocks
        n = len(CGROUP_CACHE_STATES)
        g.samples = [x for b in blocks for x in b.cache[:n] if x is not None]
        refaults.samples = [x for x in [b.cache[n] for b in blocks] if x is not None]
        yield g
        yield refaults
    host = state.get(HostState)
    if host.vmstat and measuring(state, "procfs"):
        ws = CounterMetricFamily(
            "memtop_page_cache_workingset_events",
            "File pages refaulted (read back after eviction), of those activated at once, and restored"
            " (/proc/vmstat workingset_*_file)",
            labels=["event"],
        )
        for label, name in WORKINGSET_EVENTS:
            if name in host.vmstat:
                ws.add_metric([label], float(host.vmstat[name]))
        yield ws
    pc = state.get(PagecacheState)
    if pc.activity is not None and measuring(state, "pagecache"):
        pages = CounterMetricFamily(
            "memtop_page_cache_pages",
            "Pages added to and deleted from the page cache (filemap tracepoints)",
            labels=["op"],
        )
        pages.add_metric(["added"], float(pc.activity.added))
        pages.add_metric(["deleted"], float(pc.activity.deleted))
        yield pages
    if measuring(state, "pagecacheinfo") and pc.table is not None:
        listed = GaugeMetricFamily(
            "memtop_page_cache_listed_bytes",
            "Page cache of the files memtop lists (open, mapped or under --cache-path): not all of Cached",
        )
        # the probe's sum of the files it lists (the exporter asks for no record of each); a
        # recording made before it was sent: its listed files' records
        total = pc.table.listed_cached_bytes
        if total is None:
            total = sum(f.rec.cached_bytes for f in pc.files.values())
        listed.add_metric([], float(total))
        yield listed
        named = [f.rec for f in pc.files.values() if f.rec.under_path]
        if named:
            per = GaugeMetricFamily(
                "memtop_page_cache_file_bytes",
                "Files under --cache-path, the top --topk by cached bytes: cached, dirty, writeback,"
                " recently evicted bytes (cachestat)",
                labels=["path", "state"],
            )
            named.sort(key=lambda f: (-f.cached_bytes, f.path))
            for f in named[: opts.topk]:
                for label, v in (
                    ("cached", f.cached_bytes),
                    ("dirty", f.dirty_bytes),
                    ("writeback", f.writeback_bytes),
                    ("recently_evicted", f.recently_evicted_bytes),
                ):
                    if v is not None:
                        per.add_metric([f.path, label], float(v))
            yield per
