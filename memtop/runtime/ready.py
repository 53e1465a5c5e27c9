"""For scripts, tests and benchmarks: ``MEMTOP_READY_FILE=PATH`` makes memtop create PATH once every
probe is attached or has failed, with each probe's state, the time from process start to then and,
for the TUI, to its first frame with data and the CPU time it had used by then (every thread of it,
from its start: what a loaded machine stretches into that wall time). Timing lives here, not in the
front ends."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path

from memtop.records import ProbeStatus

ENV = "MEMTOP_READY_FILE"


def since_process_start() -> float:
    """Seconds since this process started (CLOCK_BOOTTIME vs /proc/self/stat starttime)."""
    try:
        text = Path("/proc/self/stat").read_text()
        start_ticks = int(text[text.rindex(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return 0.0
    return time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")


def announce(
    statuses: Mapping[str, ProbeStatus],
    first_frame_s: float | None = None,
    first_frame_cpu_s: float | None = None,
) -> None:
    """Write the ready file, if one was asked for (a no-op otherwise)."""
    path = os.environ.get(ENV)
    if not path:
        return
    doc = {
        "probes": {name: st.state for name, st in statuses.items()},
        "first_frame_s": first_frame_s,
        "first_frame_cpu_s": first_frame_cpu_s,
        "settled_s": since_process_start(),
    }
    Path(path).write_text(json.dumps(doc) + "\n")
