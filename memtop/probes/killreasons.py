"""Why a userspace memory killer killed, where it says so: its lines in the journal (earlyoom's
stderr, systemd-oomd's log) and the cgroup xattrs systemd-oomd and Meta's oomd set on what they
killed.

The journal is read with ``journalctl -o json``, bounded (the lines since a few seconds before the
kill, at most ``JOURNAL_LINES``) and with a timeout, from the kills probe's poll (a worker thread,
never the tick), and only where journald runs (its socket exists): a machine without it has no
such lines, and memtop says nothing rather than guess. Every message is untrusted text, cleaned
here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass

from memtop.core.text import clean

JOURNAL_SOCKET = "/run/systemd/journal/socket"
#: lines read from the journal at most, per query
JOURNAL_LINES = 2000
#: seconds a journalctl may take
JOURNAL_TIMEOUT_S = 2.0
#: bytes of journalctl's output read at most
JOURNAL_MAX_BYTES = 4 << 20
#: the killers whose journal lines memtop reads
JOURNAL_KILLERS = ("earlyoom", "systemd-oomd", "nohang")
#: systemd-oomd's xattrs on a cgroup it acted on: how many times, and how many processes it killed
OOMD_XATTRS = ("user.oomd_ooms", "user.oomd_kill")
#: Meta's oomd's (its BaseKillPlugin): kills begun and processes killed in the cgroup, and the
#: uuid of its latest kill (newer versions also write the user.* twins, read when the trusted.*
#: ones are not there)
META_OOMD_XATTRS = ("trusted.oomd_ooms", "trusted.oomd_kill", "trusted.oomd_kill_uuid")
#: the xattrs each killer sets, by the name memtop knows it by
KILLER_XATTRS = {"systemd-oomd": OOMD_XATTRS, "oomd": META_OOMD_XATTRS}
#: a reason's text, at most (a line or two)
REASON_MAX = 400

# earlyoom (v1.2 on): "low memory! at or below SIGTERM limits: mem 10.00%, swap 10.00%" (older:
# "mem avail: … <= SIGTERM threshold …") before "sending SIGTERM to process 42 uid 0 "hog": …"
EARLYOOM_LOW = re.compile(r"(low memory!.*|mem avail:.*<=.*threshold.*)")
EARLYOOM_SEND = re.compile(r"sending SIG(?:TERM|KILL) to process (\d+)")
EARLYOOM_STATUS = re.compile(r"^mem avail:.*swap free:.*$")
# systemd-oomd: "Killed /system.slice/x.service due to memory pressure for … being 80% > 50% …",
# "Killed /user.slice/… due to memory used (…) / total (…) and swap used (…) / total (…) being
# more than 90.00%"
OOMD_KILLED = re.compile(r"Killed (/\S*) due to (.*)")
# nohang (0.2): "Memory status that requires corrective actions:" then its indented reasons
# ("  MemAvailable [9340 MiB, 38.7 %] <= soft_threshold_min_mem [9342 MiB, 38.8 %]", "  SwapFree
# […] <= soft_threshold_min_swap […]", "  Current PSI metric value (…) >= soft_threshold_max_psi
# (…)", "  MemUsedZram […] >= …"), the victim ("  PID: 3, name: grower, badness: 2338" after
# "process with highest badness:", and "  PID:       3, name: grower, state: …" under "Victim
# status"), then "Implementing a corrective action:" / "  Sending SIGTERM to the victim"
NOHANG_STATUS = "Memory status that requires corrective actions:"
NOHANG_VICTIM = re.compile(r"^\s*PID:\s+(\d+), name: ")
NOHANG_SEND = re.compile(r"Sending SIG(?:TERM|KILL) to the victim")


@dataclass(frozen=True, slots=True)
class Said:
    """A killer's reason for a kill: of pid ``victim_pid`` (0: the killer names a cgroup), or of
    the processes of ``cgroup``."""

    killer: str
    victim_pid: int
    cgroup: str
    reason: str
    rule: str


def earlyoom_reasons(lines: Iterable[str]) -> list[Said]:
    """earlyoom's kills in its output, each with the low-memory line that preceded it (and its
    last status line, which says the figures)."""
    out: list[Said] = []
    low = status = ""
    for line in lines:
        m = EARLYOOM_LOW.search(line)
        if m:
            low = m.group(1).strip()
            continue
        if EARLYOOM_STATUS.search(line):
            status = line.strip()
            continue
        m = EARLYOOM_SEND.search(line)
        if m:
            reason = "; ".join(p for p in (low, status) if p) or line.strip()
            out.append(
                Said("earlyoom", int(m.group(1)), "", clean(reason.encode())[:REASON_MAX], "low_memory")
            )
    return out


def nohang_reasons(lines: Iterable[str]) -> list[Said]:
    """nohang's kills in its output (its messages span lines: each is split), each with the
    memory status it acted on and the victim it named."""
    out: list[Said] = []
    status: list[str] = []
    in_status = False
    victim = 0
    for line in (part for msg in lines for part in msg.rstrip("\n").split("\n")):
        if not line.strip():
            continue
        if line.strip() == NOHANG_STATUS:
            in_status, status = True, []
            continue
        if in_status and line.startswith("  ") and ("<=" in line or ">=" in line or "exceeded" in line):
            status.append(line.strip())
            continue
        in_status = False
        m = NOHANG_VICTIM.match(line)
        if m:
            victim = int(m.group(1))
            continue
        if NOHANG_SEND.search(line) and victim:
            reason = "; ".join(status) or line.strip()
            rule = (
                "pressure"
                if "PSI" in reason
                else "zram"
                if "MemUsedZram" in reason
                else "low_memory"
                if reason.startswith("MemAvailable")
                else ""
            )
            out.append(Said("nohang", victim, "", clean(reason.encode())[:REASON_MAX], rule))
            victim = 0
    return out


def oomd_reasons(lines: Iterable[str]) -> list[Said]:
    """systemd-oomd's kills in its log: the cgroup, and whether pressure or swap."""
    out: list[Said] = []
    for line in lines:
        m = OOMD_KILLED.search(line)
        if not m:
            continue
        why = m.group(2)
        rule = "pressure" if "pressure" in why else "swap" if "swap" in why else ""
        out.append(
            Said(
                "systemd-oomd", 0, clean(m.group(1).encode()), clean(line.strip().encode())[:REASON_MAX], rule
            )
        )
    return out


def journald_runs() -> bool:
    return os.path.exists(JOURNAL_SOCKET) and shutil.which("journalctl") is not None


def journal_lines(since_s: float, killers: Iterable[str] = JOURNAL_KILLERS) -> dict[str, list[str]]:
    """The journal's messages of each killer since Unix time ``since_s``, oldest first (empty when
    journald does not run, journalctl fails or takes too long)."""
    wanted = set(killers)
    if not wanted or not journald_runs():
        return {}
    cmd = [
        "journalctl",
        "--no-pager",
        "--quiet",
        "-o",
        "json",
        "--output-fields=MESSAGE,_COMM,SYSLOG_IDENTIFIER",
        f"--since=@{since_s:.0f}",
        "-n",
        str(JOURNAL_LINES),
    ]
    try:
        done = subprocess.run(
            cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=JOURNAL_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    out: dict[str, list[str]] = {}
    for raw in done.stdout[:JOURNAL_MAX_BYTES].splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        who = entry.get("SYSLOG_IDENTIFIER") or entry.get("_COMM")
        if who not in wanted:
            continue
        msg = entry.get("MESSAGE")
        if isinstance(msg, list):  # not UTF-8: journald gives the bytes
            msg = clean(bytes(b for b in msg if isinstance(b, int) and 0 <= b < 256))
        if isinstance(msg, str):
            out.setdefault(str(who), []).append(clean(msg.encode("utf-8", "surrogateescape")))
    return out


def reasons(lines: dict[str, list[str]]) -> list[Said]:
    return (
        earlyoom_reasons(lines.get("earlyoom", []))
        + oomd_reasons(lines.get("systemd-oomd", []))
        + nohang_reasons(lines.get("nohang", []))
    )


def oomd_xattrs(cgroup_dir: str, names: Iterable[str] = OOMD_XATTRS) -> str:
    """A killer's marks on a cgroup directory ("user.oomd_ooms=2, user.oomd_kill=5"; "" none):
    systemd-oomd's by default, Meta oomd's with ``META_OOMD_XATTRS`` (a trusted.* one missing is
    looked for as its user.* twin)."""
    parts = []
    for name in names:
        for attr in (name, "user." + name[len("trusted.") :]) if name.startswith("trusted.") else (name,):
            try:
                value = os.getxattr(cgroup_dir, attr, follow_symlinks=False)
            except OSError:
                continue
            parts.append(f"{attr}={clean(value[:64])}")
            break
    return ", ".join(parts)
