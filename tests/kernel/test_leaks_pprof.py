"""pprof profiles of the leaks pane, read by pprof itself (`go tool pprof`, tests/programs.txt):
a real leaker (tests/workloads/leaky.c) traced by memtop, its profile's top function and bytes
against memtop's own figure, its mapping's build id against `readelf -n`, and byte sampling's
period in the profile written by `memtop snapshot --format pprof`."""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

import pytest
from support import Leakers, compile_c, leaky_argv, run_snapshot
from test_leaks_kernel import tick

from memtop.probes.leaks import LeaksProbe
from memtop.state import State
from memtop.views import Options
from memtop.views.leaks import LeaksView


def pprof(profile: bytes, *args: str) -> str:
    """``go tool pprof ARGS`` on ``profile`` (a gzipped profile.proto), its output."""
    with tempfile.TemporaryDirectory(prefix="memtop-leakbudget-pprof-") as d:
        path = Path(d) / "leaks.pb.gz"
        path.write_bytes(profile)
        proc = subprocess.run(
            ["go", "tool", "pprof", *args, str(path)], capture_output=True, text=True, timeout=120
        )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def top_rows(text: str) -> list[tuple[int, str]]:
    """(flat bytes, function) of `go tool pprof -top -unit=B`, in its order."""
    rows = []
    for line in text.splitlines():
        m = re.fullmatch(r"\s*(\d+)B\s+\S+%\s+\S+%\s+\d+B\s+\S+%\s+(.+)", line)
        if m:
            rows.append((int(m.group(1)), m.group(2).strip()))
    return rows


def readelf_build_id(path: Path) -> str:
    out = subprocess.run(["readelf", "-n", str(path)], capture_output=True, text=True, check=True).stdout
    m = re.search(r"Build ID:\s*([0-9a-f]+)", out)
    assert m, out
    return m.group(1)


def raw_mappings(raw: str) -> dict[str, str]:
    """path -> build id from `go tool pprof -raw`'s Mappings section."""
    out = {}
    section = raw.split("Mappings\n", 1)[1] if "Mappings\n" in raw else ""
    for line in section.splitlines():
        m = re.fullmatch(r"\d+: 0x[0-9a-f]+/0x[0-9a-f]+/0x[0-9a-f]+ (\S+) ?([0-9a-f]*).*", line.strip())
        if m:
            out[m.group(1)] = m.group(2)
    return out


@pytest.mark.bpf
def test_pprof_names_the_leak_with_memtops_bytes_and_build_id(leakers: Leakers) -> None:
    exe = compile_c("leaky")
    leaky = leakers.start(leaky_argv("a", 1.0, 60))
    probe = LeaksProbe([leaky.pid])
    state = State(mode="bpf")
    view = LeaksView()
    try:
        probe.load()
        leaky.wait_for("start")
        leaky.leaked()  # it stopped leaking: the leak's figure no longer moves
        tick(probe, state)
        rows = view.rows(state, Options())
        leak = [r for r in rows if r["frames"][0].startswith("leak_here+")]
        assert leak and rows[0] is leak[0], rows[:2]
        profile = view.export_binary(state, Options(), "pprof")
        assert isinstance(profile, bytes) and profile[:2] == b"\x1f\x8b"  # gzip
    finally:
        probe.close()
    top = top_rows(pprof(profile, "-top", "-sample_index=inuse_space", "-unit=B"))
    assert top, "go tool pprof printed no rows"
    assert top[0] == (leak[0]["outstanding_bytes"], "leak_here"), (top[:3], leak[0]["outstanding_bytes"])
    # everything allocated, churn included: alloc_space sums the pane's allocated bytes
    alloc = top_rows(pprof(profile, "-top", "-sample_index=alloc_space", "-unit=B"))
    assert sum(b for b, _ in alloc) == sum(r["alloc_bytes"] for r in view.rows(state, Options(extra={})))
    raw = pprof(profile, "-raw")
    assert "leak_here leaky.c:" in raw  # file:line of the frame
    assert raw_mappings(raw).get(str(exe)) == readelf_build_id(exe), raw_mappings(raw)


@pytest.mark.bpf
def test_snapshot_pprof_sampled_carries_the_period(leakers: Leakers) -> None:
    exe = compile_c("leaky")
    leaky = leakers.start(leaky_argv("a", 60, 0))
    profile = run_snapshot(
        "leaks", 3, "--leaks", str(leaky.pid), "--sample-bytes", "16384", fmt="pprof", raw=True
    )
    assert isinstance(profile, bytes)
    raw = pprof(profile, "-raw")
    assert "PeriodType: space bytes" in raw and "Period: 16384" in raw, raw[:400]
    assert "byte sampling every ~16384 bytes" in raw
    assert raw_mappings(raw).get(str(exe)) == readelf_build_id(exe)
    top = top_rows(pprof(profile, "-top", "-sample_index=inuse_space", "-unit=B"))
    assert top and top[0][1] == "leak_here", top[:3]
