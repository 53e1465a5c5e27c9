"""Reading a process's mappings: /proc/PID/maps (for resolving addresses) and /proc/PID/smaps
(the pmap -x view). Pure parsing; no BPF."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path

from memtop.records.process import MappingRow
from memtop.text import clean


@dataclass(frozen=True, slots=True)
class MapEntry:
    start: int
    end: int
    perms: str
    offset: int
    path: str  # "" for anonymous; "[heap]", "[stack]", a file path…

    @property
    def label(self) -> str:
        """How faults in this mapping are grouped: the file, the special name, or [anon]."""
        return self.path or "[anon]"


def parse_maps(text: str) -> list[MapEntry]:
    out: list[MapEntry] = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 5:
            continue
        lo, _, hi = parts[0].partition("-")
        try:
            out.append(
                MapEntry(
                    int(lo, 16),
                    int(hi, 16),
                    parts[1],
                    int(parts[2], 16),
                    clean(parts[5].strip()) if len(parts) > 5 else "",
                )
            )
        except ValueError:
            continue
    out.sort(key=lambda m: m.start)
    return out


def read_maps(pid: int, proc_root: str | Path = "/proc") -> list[MapEntry] | None:
    """The mappings of ``pid`` sorted by start, or None if it is gone."""
    try:
        return parse_maps((Path(proc_root) / str(pid) / "maps").read_text())
    except (OSError, ProcessLookupError):
        return None


class AddressMap:
    """Address -> mapping lookups over one read of /proc/PID/maps."""

    def __init__(self, entries: list[MapEntry]) -> None:
        self.entries = entries
        self._starts = [m.start for m in entries]

    def find(self, addr: int) -> MapEntry | None:
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0 and self.entries[i].start <= addr < self.entries[i].end:
            return self.entries[i]
        return None


# smaps field -> index in the row
_SMAPS_FIELDS = {"Size": 2, "Rss": 3, "Pss": 4, "Swap": 6}


def parse_smaps(text: str) -> list[MappingRow]:
    """One row per mapping: (start, end, size, rss, pss, dirty, swap, mode, name); sizes in bytes.
    dirty = Shared_Dirty + Private_Dirty (as pmap -x)."""
    rows: list[MappingRow] = []
    cur: list[int | str] | None = None

    def flush() -> None:
        if cur is not None:
            rows.append(tuple(cur))  # type: ignore[arg-type]

    for line in text.splitlines():
        first = line.split(None, 1)[0] if line else ""
        if "-" in first and not first.endswith(":"):
            flush()
            parts = line.split(None, 5)
            lo, _, hi = parts[0].partition("-")
            name = clean(parts[5].strip()) if len(parts) > 5 else ""
            cur = [int(lo, 16), int(hi, 16), 0, 0, 0, 0, 0, parts[1], name]
            continue
        if cur is None or not first.endswith(":"):
            continue
        key = first[:-1]
        if key in _SMAPS_FIELDS or key in ("Shared_Dirty", "Private_Dirty"):
            try:
                value = int(line.split()[1]) * 1024
            except (IndexError, ValueError):
                continue
            if key in _SMAPS_FIELDS:
                cur[_SMAPS_FIELDS[key]] = value
            else:
                cur[5] = int(cur[5]) + value
    flush()
    return rows


def read_smaps(pid: int, proc_root: str | Path = "/proc") -> list[MappingRow] | None:
    try:
        return parse_smaps((Path(proc_root) / str(pid) / "smaps").read_text())
    except (OSError, ProcessLookupError):
        return None


def is_alive(pid: int, proc_root: str | Path = "/proc") -> bool:
    """True while ``pid`` runs (a zombie has no memory left and counts as gone)."""
    try:
        text = (Path(proc_root) / str(pid) / "stat").read_text()
    except OSError:
        return False
    state = text[text.rindex(")") + 2 :].split(None, 1)[0]
    return state not in ("Z", "X", "x")
