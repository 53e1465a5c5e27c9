"""The drill-in's mappings on a process with thousands of mappings, against the kernel's files.

The target (bench/workloads/manymaps.c) maps N one-page regions of alternating protection, so
/proc/PID/maps lists about N mappings. Oracles: /proc/PID/smaps_rollup for the totals and the
line count of /proc/PID/maps for the table, each read before and after memtop's read.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import ROOT, wait_until

from memtop.probes.procmaps import parse_rollup
from memtop.probes.smaps import SmapsProbe
from memtop.records import Batch
from memtop.records.process import Mappings
from memtop.state import State
from memtop.stream.bridge import now_ns
from memtop.views import Options, get_view

MAPPINGS = 8000


@pytest.fixture
def target() -> Iterator[int]:
    src = ROOT / "bench" / "workloads" / "manymaps.c"
    exe = Path("/tmp/memtop-test-bin/manymaps")
    exe.parent.mkdir(exist_ok=True)
    if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
        subprocess.run(["gcc", "-O1", "-o", str(exe), str(src)], check=True)
    proc = subprocess.Popen([str(exe), str(MAPPINGS)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("ready")
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def between(value: Any, a: int, b: int) -> bool:
    return value is not None and min(a, b) <= value <= max(a, b)


def kernel(pid: int) -> tuple[dict[str, int], int]:
    roll = parse_rollup(Path(f"/proc/{pid}/smaps_rollup").read_text())
    assert roll is not None
    figures = {
        "rss_bytes": roll.rss_bytes,
        "pss_bytes": roll.pss_bytes,
        "dirty_bytes": roll.dirty_bytes,
        "swap_bytes": roll.swap_bytes,
    }
    return figures, len(Path(f"/proc/{pid}/maps").read_text().splitlines())


def test_totals_from_rollup_and_every_mapping_in_the_table(target: int) -> None:
    before, n_before = kernel(target)
    probe = SmapsProbe(target)
    probe.load()
    state = State("procfs")
    parts: list[Mappings] = []
    try:

        def complete() -> bool:  # the table is read in a thread of the probe's own
            batch = Batch(now_ns(), tuple(probe.poll()))
            parts.extend(r for r in batch.records if isinstance(r, Mappings))
            state.apply(batch)
            doc = get_view("process").document(state, Options(pid=target, section="mappings"))
            return bool(doc["complete"])

        wait_until(complete, "every mapping read")
        doc = get_view("process").document(state, Options(pid=target, section="mappings"))
    finally:
        probe.close()
    after, n_after = kernel(target)
    assert n_before >= MAPPINGS
    assert doc["complete"] and doc["totals"]["from"] == "smaps_rollup"
    for key, value in before.items():
        assert between(doc["totals"][key], value, after[key]), (key, value, doc["totals"][key], after[key])
    assert between(len(doc["rows"]), n_before, n_after), (n_before, len(doc["rows"]), n_after)
    # in address order, each once, and the table's sizes add up to the size total
    starts = [r["start"] for r in doc["rows"]]
    assert starts == sorted(set(starts))
    assert doc["totals"]["size_bytes"] == sum(r["size_bytes"] for r in doc["rows"])
    # the parts of the first read, if it came in several, start a table once and end it once
    assert [p.append for p in parts][:1] == [False] and all(p.append for p in parts[1:])
    assert [p.complete for p in parts][-1] and not any(p.complete for p in parts[:-1])
    print(f"\n{len(doc['rows'])} mappings in {len(parts)} part(s); rollup {before} .. {after}")


def test_probe_stops_its_reader_on_close(target: int) -> None:
    import threading

    probe = SmapsProbe(target)
    probe.load()
    probe.poll()
    probe.close()
    assert not [t for t in threading.enumerate() if t.name == "memtop-smaps"]
