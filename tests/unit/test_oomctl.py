"""systemd-oomd's ``oomctl dump``: the parser on the documented output (tests/data/oomctl/dump.txt,
in the shape systemd's manager_get_dump_string and oomd_dump_*_cgroup_context print), and the
reader for real: nothing runs when oomctl is not installed; the installed oomctl with no
systemd-oomd (this machine has no systemd as PID 1) gives one line saying why; a hung oomctl is
cut at the timeout and never holds up the caller."""

from __future__ import annotations

import os
import shutil
import stat
import time
from pathlib import Path

import pytest

from memtop.probes import oomctl
from memtop.probes.oomctl import Monitored

DATA = Path(__file__).resolve().parents[1] / "data" / "oomctl"
WAIT_S = 30.0  # a bound on waits for the reader's thread, never the thing asserted


def test_parse_documented_dump() -> None:
    dump = oomctl.parse_dump((DATA / "dump.txt").read_text())
    assert dump is not None
    assert not dump.dry_run
    assert dump.swap_used_limit_percent == 90.0
    assert dump.pressure_limit_percent == 60.0
    assert dump.pressure_duration_s == 20.0
    assert dump.monitored == (
        Monitored("/", "swap"),
        Monitored("/user.slice", "swap"),
        Monitored("/user.slice/user-1000.slice/user@1000.service", "pressure", 50.0, 90.0),
        Monitored("/system.slice/app\\x2dweb.service", "pressure", 80.0, 20.0),
    )


def test_parse_no_cgroups_and_not_a_dump() -> None:
    text = (DATA / "dump.txt").read_text()
    empty = (
        text.split("Swap Monitored CGroups:")[0]
        + "Swap Monitored CGroups:\nMemory Pressure Monitored CGroups:\n"
    )
    dump = oomctl.parse_dump(empty.replace("Dry Run: no", "Dry Run: yes"))
    assert dump is not None and dump.monitored == () and dump.dry_run
    assert oomctl.parse_dump("Failed to connect system bus: No such file or directory\n") is None


def test_parse_cleans_untrusted_paths() -> None:
    text = "Swap Monitored CGroups:\n\tPath: /evil\x1b[31m.slice\n\t\tSwap Usage: 0B\n"
    dump = oomctl.parse_dump(text)
    assert dump is not None
    (m,) = dump.monitored
    assert "\x1b" not in m.path and m.rule == "swap"


def _result(reader: oomctl.Reader) -> tuple[oomctl.Dump | None, str]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        got = reader.take()
        if got is not None:
            return got
        time.sleep(0.05)
    raise AssertionError("oomctl's run never finished")


def test_absent_oomctl_runs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no oomctl on PATH
    reader = oomctl.Reader(every_s=0)
    for _ in range(5):
        assert reader.take() is None
    assert reader.runs == 0


def test_installed_oomctl_without_daemon_says_why() -> None:
    assert shutil.which("oomctl"), "oomctl (Debian package systemd-oomd) is in tests/programs.txt"
    assert not Path("/run/systemd/system").exists(), "systemd runs here: this test wants no systemd-oomd"
    reader = oomctl.Reader(every_s=3600)
    dump, why = _result(reader)
    assert dump is None
    assert why.startswith("oomctl dump failed (systemd-oomd not running?): ")
    assert "\n" not in why
    assert not why.endswith("\\x0a")  # its stderr's last line, not the newline after it, escaped
    assert reader.runs == 1
    assert reader.take() is None and reader.runs == 1  # not again before every_s


def test_hung_oomctl_is_cut_and_never_waited_for(tmp_path: Path) -> None:
    hung = tmp_path / "oomctl"
    mark = f"600.{os.getpid()}"  # its sleep, told apart from any other on the machine
    hung.write_text(f"#!/bin/sh\nexec {shutil.which('sleep') or '/bin/sleep'} {mark}\n")
    hung.chmod(hung.stat().st_mode | stat.S_IXUSR)
    reader = oomctl.Reader(every_s=3600, exe=str(hung))  # one run
    assert reader.take() is None  # started, not waited for
    thread = reader._thread
    assert thread is not None and thread.is_alive()  # the run goes on without the caller
    dump, why = _result(reader)
    assert dump is None and why == f"oomctl dump took more than {oomctl.TIMEOUT_S:g} s"
    # the hung oomctl was killed at the timeout, not left behind
    left = [p for p in os.listdir("/proc") if p.isdigit() and mark.encode() + b"\0" in _cmd(p)]
    assert not left and reader.runs == 1


def _cmd(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
