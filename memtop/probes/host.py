"""Host facts: which machine, kernel and headers the data comes from, as a record.

Collected by the live source when it starts and when what BPF found changes (the header tree is
known after the first compilation; BPF may turn out unavailable), so a recording carries the
facts of the machine it was made on and a replay shows those, never the viewer's.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from memtop.core.errors import MemtopError, NoHeaders
from memtop.core.text import clean
from memtop.linux import bcc_compat
from memtop.records.host import HostFacts

#: the longest host name or kernel release kept (both are far shorter on any real system)
MAX_NAME = 256


def boot_time_ns(proc: Path = Path("/proc")) -> int:
    """Wall-clock time of boot, ns since the epoch: /proc/stat ``btime`` (whole seconds, what
    ps and uptime -s use), else CLOCK_REALTIME - CLOCK_BOOTTIME."""
    try:
        with open(proc / "stat", "rb") as f:
            for line in f:
                if line.startswith(b"btime "):
                    return int(line.split()[1]) * 1_000_000_000
    except (OSError, ValueError, IndexError):
        pass
    return time.clock_gettime_ns(time.CLOCK_REALTIME) - time.clock_gettime_ns(time.CLOCK_BOOTTIME)


def collect_host_facts(bpf_error: MemtopError | None = None) -> HostFacts:
    """This machine's facts now; ``bpf_error``: why BPF cannot load here (None: it can, or it
    has not been tried)."""
    info = bcc_compat.header_info()  # None until BPF looked for headers (and found some)
    if info is not None:
        kind = "none" if info.kind == "missing" else info.kind
        version = info.version
    else:
        kind = "none" if isinstance(bpf_error, NoHeaders) else ""
        version = ""
    return HostFacts(
        kernel_release=clean(os.uname().release, MAX_NAME),
        hostname=clean(socket.gethostname(), MAX_NAME),
        boot_time_ns=boot_time_ns(),
        headers_kind=kind,
        headers_version=clean(version, MAX_NAME),
        bpf_error=bpf_error.message if bpf_error is not None else "",
        bpf_hint=bpf_error.hint if bpf_error is not None else "",
        wall_minus_monotonic_ns=wall_minus_monotonic_ns(),
    )


def wall_minus_monotonic_ns() -> int:
    """The offset from CLOCK_MONOTONIC (the batches' clock) to wall-clock time, now; rounded to
    the millisecond so that facts collected moments apart compare equal."""
    return round((time.time_ns() - time.clock_gettime_ns(time.CLOCK_MONOTONIC)) / 1e6) * 1_000_000
