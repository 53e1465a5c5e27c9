"""Any local user could hang root's memtop (issue 19, item 4): a binary whose .gnu_debuglink names
a FIFO blocked BCC's symbolizer in open() under memtop's compile lock, so `memtop --leaks PID`
sat "attaching…" and q, SIGTERM and SIGINT did nothing. Now the FIFO is never opened, the leak
stacks still have their names, and SIGTERM ends memtop with everything detached."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import (
    WORKLOADS,
    PtyMemtop,
    bpf_left_behind,
    code_byte,
    function_address,
    prog_ids_of,
    run_snapshot,
    wait_until,
)

pytestmark = pytest.mark.bpf

GONE_WITHIN_S = 3.0
#: longer than any test here runs: the fixture kills the leaker before it stops leaking
LEAK_S = 600


@pytest.fixture
def trap(tmp_path: Path) -> Iterator[tuple[int, list[Path]]]:
    """leaky, its debug info split off and named by .gnu_debuglink, every place a debuglink is
    looked for (beside it, its .debug/) and its perf map holding a FIFO instead; running."""
    exe = tmp_path / "leaky"
    subprocess.run(
        [
            "gcc",
            "-O1",
            "-g",
            "-fno-omit-frame-pointer",
            "-fno-inline",
            "-o",
            str(exe),
            str(WORKLOADS / "leaky.c"),
        ],
        check=True,
    )
    subprocess.run(["objcopy", "--only-keep-debug", "leaky", "leaky.debug"], cwd=tmp_path, check=True)
    subprocess.run(
        ["objcopy", "--strip-debug", "--add-gnu-debuglink=leaky.debug", "leaky"], cwd=tmp_path, check=True
    )
    (tmp_path / "leaky.debug").unlink()
    (tmp_path / ".debug").mkdir()
    fifos = [tmp_path / "leaky.debug", tmp_path / ".debug" / "leaky.debug"]
    # leaking starts at the first breakpoint in malloc: the leaks preflight's count, a second and a
    # compilation before the leaks probe attaches (6-11 s under load); so it leaks until killed
    # (400 KiB/s), whenever that probe attaches, rather than for a fixed time that may end first
    proc = subprocess.Popen([str(exe), "a", str(LEAK_S), "0"], stdout=subprocess.DEVNULL)
    # the dynamic loader maps libc a moment after the fork returns
    wait_until(lambda: "libc.so" in Path(f"/proc/{proc.pid}/maps").read_text(), "libc mapped")
    fifos.append(Path(f"/tmp/perf-{proc.pid}.map"))
    for f in fifos:
        os.mkfifo(f)
    try:
        yield proc.pid, fifos
    finally:
        proc.kill()
        proc.wait()
        for f in fifos:
            f.unlink(missing_ok=True)


def opened_by_anyone(fifo: Path) -> bool:
    """A FIFO opens for writing without blocking only while a reader has it open (or is blocked
    opening it, as BCC was)."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        return True
    except OSError:
        return False


def test_leak_stacks_are_named_and_the_fifo_never_opened(trap: tuple[int, list[Path]]) -> None:
    pid, fifos = trap
    doc = run_snapshot("leaks", 2, "--leaks", str(pid), timeout=120)
    frames = [r["frames"] for r in doc["rows"]]
    assert any(f[0].startswith("leak_here+") and "[leaky]" in f[0] for f in frames), frames[:3]
    assert not any(opened_by_anyone(f) for f in fifos)


def test_sigterm_ends_it_with_everything_detached(trap: tuple[int, list[Path]]) -> None:
    pid, fifos = trap
    malloc = function_address(pid, "libc.so", "malloc")
    int3_is_ours = code_byte(pid, malloc) != 0xCC
    m = PtyMemtop(["--leaks", str(pid), "--sample-bytes", "0"])  # traced without asking
    try:
        doc = m.wait_ready()
        assert doc["probes"].get("leaks") == "attached", doc
        mine = prog_ids_of(m.pid)
        assert code_byte(pid, malloc) == 0xCC
        m.send(b"6", 2.0)  # the leaks pane: its stacks are symbolized while it is shown
        assert not any(opened_by_anyone(f) for f in fifos)
        os.kill(m.pid, signal.SIGTERM)
        assert m.wait_gone(GONE_WITHIN_S), "memtop did not end on SIGTERM"
    finally:
        m.kill()
    assert m.status == 128 + signal.SIGTERM
    assert bpf_left_behind(m.pid, mine) == {}
    if int3_is_ours:
        assert code_byte(pid, malloc) != 0xCC, "a uprobe breakpoint is still in the target"
