"""Case: the OOM pane's forecasts for 500 memory cgroups (issue 39: <= 1 % of a core).

In process, no kernel: 500 limited cgroups that all grow (every one is a forecast, the worst case)
with two processes each, 1,000 process samples and the machine's meminfo, applied tick by tick as
the runner does at 1 s refresh. Measured per tick, medians over the ticks after the window filled:
the state's forecast (every cgroup, each batch) and the OOM view's document (the 20 soonest, each
with the process the kernel would choose). ms per 1 s tick is % of a core / 10.

usage: .venv/bin/python bench/forecast_cost.py [TICKS]"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

from harness import machine, save

from memtop.records import Batch, Record
from memtop.records.cgroups import CgroupSample
from memtop.records.host import MemInfo
from memtop.records.processes import ProcSample
from memtop.state import State
from memtop.state.oom import OomState
from memtop.views import Options, get_view

N = 500
MiB = 1 << 20


def tick_records(i: int) -> list[Record]:
    recs: list[Record] = [
        MemInfo(
            total_bytes=24 << 30,
            free_bytes=8 << 30,
            available_bytes=(20 << 30) - i * 10 * MiB,
            buffers_bytes=0,
            cached_bytes=4 << 30,
            swap_total_bytes=1 << 30,
            swap_free_bytes=1 << 30,
        )
    ]
    for c in range(N):
        pids = (10_000 + 2 * c, 10_001 + 2 * c)
        recs.append(
            CgroupSample(
                path=f"/bench-{c}",
                version=1,
                usage_bytes=(100 + i * (1 + c % 7)) * MiB,
                limit_bytes=2048 * MiB,
                swap_bytes=0,
                swap_limit_bytes=0,
                pids=pids,
            )
        )
        for j, pid in enumerate(pids):
            recs.append(
                ProcSample(
                    pid=pid,
                    comm=f"w{c}",
                    user="root",
                    uid=0,
                    rss_anon_bytes=(50 + i + j) * MiB,
                    rss_file_bytes=MiB,
                    rss_shmem_bytes=0,
                    swap_bytes=0,
                    minor_faults=i,
                    major_faults=0,
                )
            )
    return recs


def main(ticks: int = 40) -> dict[str, Any]:
    state = State(mode="bpf")
    view = get_view("oom")
    oom = state.get(OomState)
    forecast_ms, document_ms = [], []
    ts = 1_000_000_000_000
    for i in range(ticks):
        state.apply(Batch(ts + i * 1_000_000_000, tuple(tick_records(i))))
        t0 = time.perf_counter()
        oom._forecast(state)  # what each batch's apply spends on it
        t1 = time.perf_counter()
        doc = view.document(state, Options())
        t2 = time.perf_counter()
        if i >= 12:  # the 10 s window filled
            forecast_ms.append((t1 - t0) * 1e3)
            document_ms.append((t2 - t1) * 1e3)
    assert len(oom.forecasts) == N + 1 and len(doc["at_risk"]) == 20
    f, d = statistics.median(forecast_ms), statistics.median(document_ms)
    result: dict[str, Any] = {
        "machine": machine(),
        "ticks": ticks,
        "cgroups": N,
        "forecast_ms": f,
        "document_ms": d,
        # at 1 s refresh: the forecast every tick; the document when the pane is drawn (once a
        # second at most)
        "cpu_pct": (f + d) / 10,
    }
    save("forecast_cost", result)
    return result


if __name__ == "__main__":
    import json

    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 40), indent=1))
