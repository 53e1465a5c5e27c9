"""The exporter's metric families on recorded state (no BPF, no server): names and types, log2
buckets as classic histograms, the cardinality guards, the listen address, the textfile."""

from __future__ import annotations

import dataclasses
import functools
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import CollectorRegistry
from support import memtop_cmd

from memtop.core.errors import MemtopError
from memtop.export.families import Metric
from memtop.export.metrics import Accumulators, Budget, Options, families, log2_buckets
from memtop.export.server import parse_listen
from memtop.state import State
from memtop.state.cgroups import CgroupsState
from memtop.state.kernel import KernelState
from memtop.state.processes import ProcessesState
from memtop.stream.recfile import Recording

ROOT = Path(__file__).resolve().parents[2]
CGROUPS = ROOT / "tests" / "data" / "cgroups.jsonl.gz"


@functools.cache
def recording() -> Recording:
    return Recording.load(CGROUPS)


def state_at_end() -> State:
    rec = recording()
    state = rec.state_at(rec.ts_at(rec.duration_s))
    assert isinstance(state, State)
    return state


def by_name(opts: Options | None = None) -> dict[str, Metric]:
    return {f.name: f for f in families(state_at_end(), opts or Options(), Accumulators())}


def test_names_types_and_units() -> None:
    fams = by_name()
    kinds = {name: f.type for name, f in fams.items()}
    assert kinds["memtop_reclaim_latency_seconds"] == "histogram"
    assert kinds["memtop_swapin_wait_seconds"] == "histogram"
    assert kinds["memtop_oom_kills"] == "counter" and kinds["memtop_swapins"] == "counter"
    assert kinds["container_memory_usage_bytes"] == "gauge"
    assert kinds["node_pressure_memory_waiting_seconds"] == "counter"
    # cAdvisor's labels on the cgroup families, the memcg at its limit among them
    usage = fams["container_spec_memory_limit_bytes"]
    limits = {s.labels["id"]: s.value for s in usage.samples}
    assert 100 * (1 << 20) in limits.values()
    # the histogram: cumulative buckets, +Inf equals the count, the sum in seconds
    h = fams["memtop_reclaim_latency_seconds"]
    memcg = [s for s in h.samples if s.labels.get("kind") == "memcg"]
    buckets = [s.value for s in memcg if s.name.endswith("_bucket")]
    count = next(s.value for s in memcg if s.name.endswith("_count"))
    total = next(s.value for s in memcg if s.name.endswith("_sum"))
    assert buckets == sorted(buckets) and buckets[-1] == count > 1000
    assert 0 < total < count  # seconds: each episode well under a second here
    text = generate_latest_of(fams.values())
    assert 'memtop_reclaim_latency_seconds_bucket{kind="memcg",le="+Inf"}' in text


class Fixed:
    """memtop's families for the library's encoder (its Collector protocol)."""

    def __init__(self, fams: Iterable[Metric]) -> None:
        self.fams = list(fams)

    def collect(self) -> Iterator[Any]:
        yield from self.fams


def generate_latest_of(fams: Iterable[Metric]) -> str:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(Fixed(fams))
    return generate_latest(reg).decode()


def test_log2_buckets_have_fixed_bounds() -> None:
    b = log2_buckets([(5, 3), (12, 4), (40, 1)])
    assert b[0] == ("1.024e-06", 3.0)  # below the first bound: folded into it
    assert ("8.192e-06", 7.0) in b  # bucket 12 is [4096, 8192) ns
    assert b[-2] == ("68.719476736", 7.0) and b[-1] == ("+Inf", 8.0)
    assert [le for le, _ in log2_buckets([])] == [le for le, _ in b]  # the same set every time


def test_topk_rest_bucket_and_no_pid_label() -> None:
    fams = by_name(Options(topk=3))
    rss = fams["memtop_process_rss_bytes"]
    rest = [s for s in rss.samples if s.labels.get("rest") == "true"]
    assert len(rest) == 1 and rest[0].labels == {"comm": "", "cgroup": "", "rest": "true"}
    assert len(rss.samples) <= 4
    assert all("pid" not in s.labels for s in rss.samples)
    total = sum(s.value for s in rss.samples)
    every = sum(s.value for s in by_name(Options(topk=10_000))["memtop_process_rss_bytes"].samples)
    assert total == every  # the rest is summed, not dropped
    labelsets = [
        tuple(sorted(s.labels.items()))
        for s in by_name(Options(topk=10_000))["memtop_process_rss_bytes"].samples
    ]
    assert len(labelsets) == len(set(labelsets))  # two bash in one cgroup are one series
    with_pid = by_name(Options(topk=3, pid_labels=True))["memtop_process_rss_bytes"]
    assert all("pid" in s.labels for s in with_pid.samples)
    assert "rest" in generate_latest_of([rss])


@pytest.mark.parametrize("name", ["other", ""])
def test_a_process_or_slab_cannot_forge_the_rest_bucket(name: str) -> None:
    """Processes named "other" (or with an empty comm) in the root cgroup, and a slab cache named
    "other", beside the rest bucket: every series still has labels of its own."""
    state = state_at_end()
    procs = state.get(ProcessesState)
    cg = state.get(CgroupsState)
    # the biggest processes get the forged name and no known cgroup (a process memtop has not
    # placed yet), so they are in the top K with the labels the rest bucket had
    for pid, row in sorted(procs.rows.items(), key=lambda pr: -pr[1].sample.rss_bytes)[:5]:
        row.sample = dataclasses.replace(row.sample, comm=name)
        cg.pid_memcg.pop(pid, None)
    kernel = state.get(KernelState)
    if kernel.slabs:
        big = max(kernel.slabs.values(), key=lambda r: r.slab.total_bytes)
        big.slab = dataclasses.replace(big.slab, name=name or "other")
    fams = {f.name: f for f in families(state, Options(topk=3), Accumulators())}
    for fam in ("memtop_process_rss_bytes", "memtop_process_swap_bytes", "memtop_slab_cache_bytes"):
        if fam not in fams:
            continue
        labelsets = [tuple(sorted(s.labels.items())) for s in fams[fam].samples]
        assert len(labelsets) == len(set(labelsets)), (fam, labelsets)
        assert sum(1 for s in fams[fam].samples if s.labels.get("rest") == "true") <= 1
    # and the text Prometheus parses has no duplicate series either
    text = generate_latest_of(fams.values())
    series = [line.rsplit(" ", 1)[0] for line in text.splitlines() if line and not line.startswith("#")]
    assert len(series) == len(set(series))


def test_cgroup_depth_regex_and_series_budget() -> None:
    shallow = by_name(Options(cgroup_depth=0))["container_memory_usage_bytes"]
    assert {s.labels["id"] for s in shallow.samples} == {"/"}
    only = by_name(Options(cgroup_regex="memtop-test"))["container_memory_usage_bytes"]
    assert only.samples and all("memtop-test" in s.labels["id"] for s in only.samples)
    budget = Budget(50)
    kept = [budget.take(f) for f in families(state_at_end(), Options(), Accumulators())]
    assert sum(len(f.samples) for f in kept) == 50 == budget.series
    assert budget.dropped > 0


def test_listen_addresses() -> None:
    assert parse_listen("127.0.0.1:9479") == ("127.0.0.1", 9479)
    assert parse_listen("[::1]:9479") == ("::1", 9479)
    assert parse_listen(":9479") == ("127.0.0.1", 9479)  # loopback unless an address is given
    for bad in ("9479", "host:99999", "example.com:9479", "1.2.3.4:x"):
        with pytest.raises(MemtopError):
            parse_listen(bad)


def test_textfile_refuses_a_symlink_and_a_failed_write_exits_2(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("keep\n")
    link = tmp_path / "memtop.prom"
    link.symlink_to(target)
    run = subprocess.run(
        [*memtop_cmd(), "export", "--no-bpf", "--no-listen", "--textfile", str(link), "--duration", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and target.read_text() == "keep\n", run.stderr
    ok = tmp_path / "ok.prom"
    run = subprocess.run(
        [
            *memtop_cmd(),
            "export",
            "--no-bpf",
            "--node-name",
            "test",
            "--no-listen",
            "--textfile",
            str(ok),
            "--duration",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    text = ok.read_text()
    # every series says which node it is from (--node-name)
    assert 'memtop_probe_up{node="test",probe="procfs",reason="",state="attached"} 1.0' in text
    # --no-bpf: the BPF figures are left out (not zeros), the probes say why
    assert "memtop_reclaim_latency_seconds" not in text and "memtop_swapins_total" not in text


def test_shared_pools_and_orphaned_segments() -> None:
    """From the shared recording: the 2 MiB pool as /sys gave it, and the orphaned segment."""
    rec = Recording.load(ROOT / "tests" / "data" / "shared.jsonl.gz")
    state = rec.state_at(rec.ts_at(rec.duration_s))
    assert isinstance(state, State)
    fams = {f.name: f for f in families(state, Options(), Accumulators())}
    from memtop.state.shared import SharedState

    st = state.get(SharedState)
    assert st.pools is not None
    pools = {
        (s.labels["page_size_bytes"], s.labels["state"]): s.value
        for s in fams["memtop_hugetlb_pool_pages"].samples
    }
    for size, total, free, resv, surp in st.pools.pools:
        assert [pools[(str(size), k)] for k in ("total", "free", "reserved", "surplus")] == [
            total,
            free,
            resv,
            surp,
        ]
    assert pools[(str(2 << 20), "total")] - pools[(str(2 << 20), "free")] == 2  # the recording's two pages
    segs = {s.labels["orphan"]: s.value for s in fams["memtop_sysv_shm_segments"].samples}
    rss = {s.labels["orphan"]: s.value for s in fams["memtop_sysv_shm_resident_bytes"].samples}
    orphans = [g for g in st.segments.values() if g.nattch == 0]
    assert segs == {"true": 1.0, "false": float(len(st.segments) - 1)} and len(orphans) == 1
    assert rss["true"] == orphans[0].rss_bytes == 4 << 20
    assert fams["memtop_hugetlb_pool_pages"].type == "gauge"
    # the exposition renders them
    text = generate_latest_of(fams.values())
    assert 'memtop_sysv_shm_segments{orphan="true"} 1.0' in text


def test_shared_families_absent_without_the_probe() -> None:
    """No sharedinfo in a recording: no pool or segment series (absent, not zeros)."""
    fams = by_name()
    assert "memtop_hugetlb_pool_pages" not in fams and "memtop_sysv_shm_segments" not in fams


def pagecache_state(paths: bool) -> State:
    """A live state with the page cache pane's probes attached: a memcg's memory.stat, two files
    (one under a --cache-path when ``paths``), the tracepoints' counts, vmstat's workingset."""
    from memtop.records import Batch, ProbeStatus
    from memtop.records.cgroups import CgroupSample
    from memtop.records.host import VmStat
    from memtop.records.pagecache import CachedFile, CachedFiles, PagecacheActivity

    state = State(mode="bpf")
    stat: tuple[tuple[str, int], ...] = (
        ("file", 300 << 20),
        ("active_file", 200 << 20),
        ("inactive_file", 100 << 20),
        ("dirty", 4096),
        ("writeback", 0),
        ("refault_file", 1234),
    )
    recs = (
        *(ProbeStatus(p, "attached") for p in ("cgroups", "procfs", "pagecacheinfo", "pagecache")),
        CgroupSample(path="/web", version=1, usage_bytes=400 << 20, stat=stat),
        VmStat(
            counters=(
                ("workingset_refault_file", 50),
                ("workingset_activate_file", 7),
                ("workingset_restore_file", 3),
            )
        ),
        CachedFile(
            dev=1, ino=2, path="/srv/a.db", size_bytes=8 << 20, cached_bytes=8 << 20, under_path=paths
        ),
        CachedFile(dev=1, ino=3, path="/usr/lib/libc.so.6", size_bytes=2 << 20, cached_bytes=2 << 20),
        CachedFiles(paths=("/srv",) if paths else (), files_known=2, cached_bytes=10 << 20),
        PagecacheActivity(added=1000, deleted=400),
    )
    state.apply(Batch(ts_ns=1_000_000_000, records=recs))
    return state


def test_pagecache_series_per_cgroup_and_per_named_file_only() -> None:
    fams = {f.name: f for f in families(pagecache_state(paths=False), Options(), Accumulators())}
    cache = {s.labels["state"]: s.value for s in fams["memtop_cgroup_page_cache_bytes"].samples}
    assert cache == {"active": 200 << 20, "inactive": 100 << 20, "dirty": 4096, "writeback": 0}
    assert fams["memtop_cgroup_page_cache_refaults"].type == "counter"
    assert [s.value for s in fams["memtop_cgroup_page_cache_refaults"].samples] == [1234]
    ws = {s.labels["event"]: s.value for s in fams["memtop_page_cache_workingset_events"].samples}
    assert ws == {"refault": 50, "activate": 7, "restore": 3}
    pages = {s.labels["op"]: s.value for s in fams["memtop_page_cache_pages"].samples}
    assert pages == {"added": 1000, "deleted": 400}
    assert [s.value for s in fams["memtop_page_cache_listed_bytes"].samples] == [10 << 20]
    # no path named: no series per file (an open file each would be unbounded)
    assert "memtop_page_cache_file_bytes" not in fams
    named = {f.name: f for f in families(pagecache_state(paths=True), Options(), Accumulators())}
    per = {(s.labels["path"], s.labels["state"]) for s in named["memtop_page_cache_file_bytes"].samples}
    assert ("/srv/a.db", "cached") in per and all(p == "/srv/a.db" for p, _ in per)
    text = generate_latest_of(named.values())
    assert 'memtop_page_cache_file_bytes{path="/srv/a.db",state="cached"} 8.388608e+06' in text


def test_pagecache_series_absent_without_their_probes() -> None:
    """A recording made before the page cache probes: none of what they feed (vmstat's
    workingset events come from the /proc reader, which it has)."""
    fams = by_name()
    fed = {"memtop_page_cache_pages", "memtop_page_cache_listed_bytes", "memtop_page_cache_file_bytes"}
    assert not fed & set(fams) and "memtop_page_cache_workingset_events" in fams
