"""systemd-oomd's own account of what it watches: ``oomctl dump``, run where the program exists,
bounded (a timeout, a cap on its output), never on the tick (a thread of its own, started by the
kills probe's poll at most every ``EVERY_S``; the poll never waits for it), and parsed for the
cgroups systemd-oomd monitors and the limit it applies to each.

The dump's shape (systemd's ``manager_get_dump_string`` and ``oomd_dump_*_cgroup_context``)::

    Dry Run: no
    Swap Used Limit: 90.00%
    Default Memory Pressure Limit: 60.00%
    Default Memory Pressure Duration: 20s
    System Context:
    <TAB>Memory: Used: 12.4G, Total: 30.8G
    Swap Monitored CGroups:
    <TAB>Path: /user.slice
    <TAB><TAB>Swap Usage: 4.0K
    Memory Pressure Monitored CGroups:
    <TAB>Path: /user.slice/user-1000.slice/user@1000.service
    <TAB><TAB>Memory Pressure Limit: 50.00%
    <TAB><TAB>Memory Pressure Duration: 20s
    <TAB><TAB>Pressure: Avg10: 0.00, Avg60: 0.00, Avg300: 0.00, Total: 5s
    <TAB><TAB>Current Memory Usage: 1.9G

Paths are untrusted text (unit names), cleaned here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass

from memtop.core.text import clean

#: seconds an oomctl may take (it asks the daemon over D-Bus)
TIMEOUT_S = 2.0
#: seconds between runs
EVERY_S = 30.0
#: bytes of its output read at most
MAX_BYTES = 1 << 20
#: monitored cgroups kept at most
MAX_CGROUPS = 1000
#: the section headers of the dump, and which rule a cgroup under each is monitored for
SECTIONS = {"Swap Monitored CGroups:": "swap", "Memory Pressure Monitored CGroups:": "pressure"}

_PERCENT = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)%\s*$")
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(min|ms|us|h|s)")
_DURATION_UNITS = {"h": 3600.0, "min": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6}


@dataclass(frozen=True, slots=True)
class Monitored:
    """A cgroup systemd-oomd watches: for ``rule`` "swap" (killed when the machine's swap use is
    over SwapUsedLimit) or "pressure" (killed when its memory PSI stays over ``limit_percent``
    for ``duration_s``)."""

    path: str
    rule: str
    limit_percent: float | None = None
    duration_s: float | None = None


@dataclass(frozen=True, slots=True)
class Dump:
    """What ``oomctl dump`` said: systemd-oomd's limits and the cgroups it watches."""

    dry_run: bool
    swap_used_limit_percent: float | None
    pressure_limit_percent: float | None
    pressure_duration_s: float | None
    monitored: tuple[Monitored, ...]


def _percent(text: str) -> float | None:
    m = _PERCENT.match(text)
    if not m:
        return None
    v = float(m.group(1))
    return v if 0 <= v <= 100 else None


def _duration(text: str) -> float | None:
    """systemd's timespan ("20s", "1min 30s", "500ms"); None: not one."""
    parts = text.split()
    if not parts:
        return None
    total = 0.0
    for part in parts:
        m = _DURATION_PART.fullmatch(part)
        if not m:
            return None
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
    return total


def parse_dump(text: str) -> Dump | None:
    """``oomctl dump``'s output parsed (None: not a dump: no section of monitored cgroups)."""
    dry = False
    swap_limit = pressure_limit = pressure_s = None
    monitored: list[Monitored] = []
    section = ""
    seen_section = False
    current: dict[str, str] | None = None

    def flush() -> None:
        if current is not None and section and len(monitored) < MAX_CGROUPS:
            monitored.append(
                Monitored(
                    current["path"],
                    section,
                    _percent(current.get("Memory Pressure Limit", "")),
                    _duration(current.get("Memory Pressure Duration", "")),
                )
            )

    for raw in text.splitlines():
        line = raw.rstrip("\n")
        stripped = line.strip()
        if not line.startswith("\t"):  # a top-level line ends any cgroup's block
            flush()
            current = None
            if stripped in SECTIONS:
                section, seen_section = SECTIONS[stripped], True
                continue
            section = "" if stripped.endswith(":") else section
            key, _, value = stripped.partition(": ")
            if key == "Dry Run":
                dry = value.strip() == "yes"
            elif key == "Swap Used Limit":
                swap_limit = _percent(value)
            elif key == "Default Memory Pressure Limit":
                pressure_limit = _percent(value)
            elif key == "Default Memory Pressure Duration":
                pressure_s = _duration(value)
            continue
        if not section:
            continue  # the System Context's lines
        key, _, value = stripped.partition(": ")
        if key == "Path" and not line.startswith("\t\t"):
            flush()
            current = {"path": clean(value.strip().encode("utf-8", "surrogateescape"))}
        elif current is not None:
            current[key] = value.strip()
    flush()
    if not seen_section:
        return None
    return Dump(dry, swap_limit, pressure_limit, pressure_s, tuple(monitored))


def run(exe: str) -> tuple[Dump | None, str]:
    """Run ``exe dump`` once: (the dump, "") or (None, why not, in one line)."""
    try:
        done = subprocess.run(
            [exe, "--no-pager", "dump"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None, f"oomctl dump took more than {TIMEOUT_S:g} s"
    except OSError as exc:
        return None, f"oomctl could not run: {exc.strerror or exc}"
    if done.returncode != 0:
        # its last line, cleaned (cleaned first, the newlines were escapes: "…directory\x0a")
        err = done.stderr[:400].strip().splitlines()
        why = clean(err[-1]) if err else f"exit status {done.returncode}"
        return None, f"oomctl dump failed (systemd-oomd not running?): {why}"
    dump = parse_dump(clean(done.stdout[:MAX_BYTES]))
    if dump is None:
        return None, "oomctl dump printed no monitored cgroups section"
    return dump, ""


class Reader:
    """Runs oomctl in a thread of its own at most every ``every_s``: ``take()`` (from the kills
    probe's poll) starts a run when one is due and returns the latest result not yet taken, never
    waiting. Nothing runs when oomctl is not installed (looked up on each due run: a package
    installed later is found)."""

    def __init__(self, every_s: float = EVERY_S, exe: str | None = None) -> None:
        self.every_s = every_s
        self.exe = exe  # None: found on PATH
        self._at = -every_s
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._result: tuple[Dump | None, str] | None = None
        #: how many times oomctl was started (for tests: none when absent)
        self.runs = 0

    def take(self, now: float | None = None) -> tuple[Dump | None, str] | None:
        now = time.monotonic() if now is None else now
        with self._lock:
            result, self._result = self._result, None
        running = self._thread is not None and self._thread.is_alive()
        if not running and now - self._at >= self.every_s:
            self._at = now
            exe = self.exe or shutil.which("oomctl")
            if exe is not None:
                self.runs += 1
                self._thread = threading.Thread(target=self._run, args=(exe,), name="oomctl", daemon=True)
                self._thread.start()
        return result

    def _run(self, exe: str) -> None:
        result = run(exe)
        with self._lock:
            self._result = result
