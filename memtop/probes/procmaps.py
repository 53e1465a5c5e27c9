"""Reading a process's mappings: /proc/PID/maps (for resolving addresses), /proc/PID/smaps (the
pmap -x view) and /proc/PID/smaps_rollup (the kernel's sum over every mapping). Pure parsing; no
BPF."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from pathlib import Path

from memtop.core.text import clean
from memtop.records.process import HUGETLB_LABEL, MappingRow

#: mappings of a file whose pages live in shmem (tmpfs, memfd, SysV segments): their pages go to
#: swap, not back to a file, so a major fault there is a swap-in
SHMEM_PATHS = ("/dev/zero", "/memfd:", "/SYSV", "/dev/shm/", "/dev/shm ")


@dataclass(frozen=True, slots=True)
class MapEntry:
    """One line of /proc/PID/maps."""

    start: int
    end: int
    perms: str
    offset: int
    inode: int  # 0 for anonymous memory (and [heap], [stack]...)
    path: str  # "" for anonymous; "[heap]", "[stack]", a file path…

    @property
    def label(self) -> str:
        """How faults in this mapping are grouped: the file, the special name, or [anon]."""
        if self.path.startswith("/anon_hugepage"):
            return HUGETLB_LABEL
        return self.path or "[anon]"

    @property
    def file_backed(self) -> bool:
        """Whether the pages come from a file's page cache (not anonymous memory, not shmem)."""
        return self.inode != 0 and not self.path.startswith((*SHMEM_PATHS, "/anon_hugepage"))


def parse_maps(text: str) -> list[MapEntry]:
    """The mappings of a /proc/PID/maps text, sorted by start (paths made printable)."""
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
                    int(parts[4]),
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
        # a path is any bytes: one that is not UTF-8 must not make the process look gone
        # (surrogate-escaped: each such byte is shown as \xff, as in every other name)
        return parse_maps((Path(proc_root) / str(pid) / "maps").read_text(errors="surrogateescape"))
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
    nums: list[int] | None = None  # the current entry's start, end, size, rss, pss, dirty, swap
    mode = name = ""

    def flush() -> None:
        if nums is not None:
            start, end, size, rss, pss, dirty, swap = nums
            rows.append((start, end, size, rss, pss, dirty, swap, mode, name))

    for line in text.splitlines():
        first = line.split(None, 1)[0] if line else ""
        if "-" in first and not first.endswith(":"):
            flush()
            parts = line.split(None, 5)
            lo, _, hi = parts[0].partition("-")
            mode = parts[1]
            name = clean(parts[5].strip()) if len(parts) > 5 else ""
            nums = [int(lo, 16), int(hi, 16), 0, 0, 0, 0, 0]
            continue
        if nums is None or not first.endswith(":"):
            continue
        key = first[:-1]
        if key in _SMAPS_FIELDS or key in ("Shared_Dirty", "Private_Dirty"):
            try:
                value = int(line.split()[1]) * 1024
            except (IndexError, ValueError):
                continue
            if key in _SMAPS_FIELDS:
                nums[_SMAPS_FIELDS[key]] = value
            else:
                nums[5] += value
    flush()
    return rows


# One smaps entry, the fields the row needs, in the order every kernel prints them (Size first,
# Rss and Pss together, the dirty counts, then Swap; field lines between them skipped, never an
# entry's first line, so no match runs into the next entry). A kernel that
# printed them otherwise matches fewer entries than it has, and SmapsParser falls back to the
# line parser for that part. Matching whole entries in C is much faster than a Python loop over
# the ~25 lines of each (docs/performance.md).
_SMAPS_ENTRY = re.compile(
    rb"^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+ *([^\n]*)\n"
    rb"Size: +(\d+) kB\n"
    rb"(?:[A-Z][^\n]*\n)*?Rss: +(\d+) kB\n"
    rb"Pss: +(\d+) kB\n"
    rb"(?:[A-Z][^\n]*\n)*?Shared_Dirty: +(\d+) kB\n"
    rb"(?:[A-Z][^\n]*\n)*?Private_Dirty: +(\d+) kB\n"
    rb"(?:[A-Z][^\n]*\n)*?Swap: +(\d+) kB\n",
    re.M,
)
# where an entry starts: a line "start-end perms …" (no field name starts with a hex digit)
_ENTRY_START = re.compile(rb"\n(?=[0-9a-f]+-[0-9a-f]+ )")
#: how far from the end of the text read so far the last entry's start is looked for (an entry is
#: ~1 KiB of fields plus a path of at most 4 KiB)
_TAIL_BYTES = 64 * 1024


class SmapsParser:
    """/proc/PID/smaps parsed as it is read: ``feed`` the bytes of each read, get the rows of the
    entries completed so far. Only the unfinished last entry is kept between reads, never the
    text; names and modes are shared between rows (60,000 mappings often name a few files)."""

    def __init__(self) -> None:
        self._carry = b""
        self._names: dict[bytes, str] = {}
        self._modes: dict[bytes, str] = {}

    def feed(self, data: bytes) -> list[MappingRow]:
        buf = self._carry + data if self._carry else data
        split = -1
        for m in _ENTRY_START.finditer(buf, max(0, len(buf) - _TAIL_BYTES)):
            split = m.start()
        if split < 0:
            self._carry = buf
            return []
        self._carry = buf[split + 1 :]
        return self._parse(buf[: split + 1])

    def finish(self) -> list[MappingRow]:
        buf, self._carry = self._carry, b""
        return self._parse(buf) if buf.strip() else []

    def _parse(self, part: bytes) -> list[MappingRow]:
        found = _SMAPS_ENTRY.findall(part)
        if len(found) != part.count(b"\nSize:"):
            return parse_smaps(part.decode("utf-8", errors="surrogateescape"))  # a format this does not know
        names, modes = self._names, self._modes
        rows: list[MappingRow] = []
        for lo, hi, mode, name, size, rss, pss, sdirty, pdirty, swap in found:
            n = names.get(name)
            if n is None:
                n = names[name] = clean(name.rstrip())
            md = modes.get(mode)
            if md is None:
                md = modes[mode] = clean(mode)
            rows.append(
                (
                    int(lo, 16),
                    int(hi, 16),
                    int(size) << 10,
                    int(rss) << 10,
                    int(pss) << 10,
                    (int(sdirty) + int(pdirty)) << 10,
                    int(swap) << 10,
                    md,
                    n,
                )
            )
        return rows


@dataclass(frozen=True, slots=True)
class Rollup:
    """/proc/PID/smaps_rollup: the kernel's sums over every mapping, in bytes."""

    rss_bytes: int
    pss_bytes: int
    dirty_bytes: int  # Shared_Dirty + Private_Dirty
    swap_bytes: int


def parse_rollup(text: str) -> Rollup | None:
    fields: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
            fields[key] = int(parts[0]) * 1024
    if "Rss" not in fields:
        return None
    return Rollup(
        fields["Rss"],
        fields.get("Pss", 0),
        fields.get("Shared_Dirty", 0) + fields.get("Private_Dirty", 0),
        fields.get("Swap", 0),
    )


def read_rollup(pid: int, proc_root: str | Path = "/proc") -> Rollup | None:
    """One read of /proc/PID/smaps_rollup; None when the process is gone (or the kernel, older
    than 4.14, has no such file)."""
    try:
        return parse_rollup(
            (Path(proc_root) / str(pid) / "smaps_rollup").read_text("utf-8", "surrogateescape")
        )
    except (OSError, ProcessLookupError):
        return None


def is_alive(pid: int, proc_root: str | Path = "/proc") -> bool:
    """True while ``pid`` runs (a zombie has no memory left and counts as gone)."""
    try:
        text = (Path(proc_root) / str(pid) / "stat").read_text("utf-8", "surrogateescape")
    except OSError:
        return False
    state = text[text.rindex(")") + 2 :].split(None, 1)[0]
    return state not in ("Z", "X", "x")
