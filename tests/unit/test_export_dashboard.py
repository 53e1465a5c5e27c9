"""The shipped dashboard and rules against memtop's own exposition, without a server: no rate()
of a gauge (a gauge that falls reads as a counter reset: a spike), and the series the OOM and
reclaim panels need are there before the first kill and the first episode of each kind
(tests/kernel/test_export_prometheus.py evaluates every query through a real Prometheus)."""

from __future__ import annotations

from support import dashboard_expressions, rated_metrics
from test_export_cadvisor import exposition
from test_export_metrics import state_at_end

from memtop.export.metrics import Accumulators, Options, families
from memtop.records import Batch, ProbeStatus
from memtop.records.reclaim import ReclaimTotals
from memtop.state import State

#: counters exposed untyped under a name without _total (cAdvisor's): rate() is right on them
UNTYPED_COUNTERS = {"container_memory_failcnt"}


def test_no_rate_of_a_gauge() -> None:
    types, _ = exposition(list(families(state_at_end(), Options(), Accumulators())))
    counters = {n for n, t in types.items() if t == "counter"} | UNTYPED_COUNTERS
    counters |= {f"{n}_{s}" for n, t in types.items() if t == "histogram" for s in ("bucket", "count", "sum")}
    exprs = dashboard_expressions()
    assert len([w for w, _ in exprs if w.startswith("rule")]) == 7
    for where, expr in exprs:
        for name in rated_metrics(expr):
            assert name in counters, f"{where}: rate of {name}, a {types.get(name, 'missing')} family"


def test_oom_and_reclaim_series_before_anything_happened() -> None:
    """A memtop whose probes attached and saw no kill and no reclaim yet: the OOM counter's sum is
    0 (a series with every label empty), and the reclaim histogram and episode counter have both
    kinds, at 0, so the panels' sums and rates are numbers, not "No data"."""
    state = State(mode="bpf")
    state.apply(
        Batch(
            ts_ns=10**9,
            records=(
                ProbeStatus("oom", "attached"),
                ProbeStatus("vmscan", "attached"),
                ReclaimTotals(histogram=(), pids=(), unpaired=0),
            ),
        )
    )
    _, samples = exposition(list(families(state, Options(), Accumulators())))
    assert samples["memtop_oom_kills_total"] == [
        {"cgroup": "", "oom_cgroup": "", "constraint": "", "container": "", "pod": "", "namespace": ""}
    ]
    for name in ("memtop_reclaim_episodes_total", "memtop_reclaim_latency_seconds_count"):
        assert sorted(s["kind"] for s in samples[name]) == ["direct", "memcg"], name
