"""smaps: the mappings of one process (pmap -x) from /proc/PID/smaps (on demand, drill-in).

No BPF. The totals come first and cheaply, from one read of /proc/PID/smaps_rollup (the kernel's
own sum over every mapping, a few hundred bytes) on every poll, or less often for a target whose
rollup is slow to read (the kernel walks its page tables for it: a large target in a swap storm
takes milliseconds), so that reading it takes at most ROLLUP_DUTY of a core. The table comes from
/proc/PID/smaps, read by a thread of its own and parsed as it is read (SmapsParser keeps only the
unfinished last entry, never the text: a process with 60,000 mappings has 43 MB of it), so a big
target never holds up the other probes' polls. The first read reaches state in parts, as far as
it got at each poll, so the table fills while the user looks at it; later reads are sent whole,
and only when the table changed.

Reading smaps walks the page tables of every mapping under the target's mmap_lock (read side), so
a new read starts at most every RESCAN_MIN_S, and no more often than keeps reading below
RESCAN_DUTY of the time (a large target's read is long: docs/performance.md).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from memtop.core.errors import PidNotFound
from memtop.probes.base import Probe
from memtop.probes.procmaps import SmapsParser, is_alive, read_rollup
from memtop.records import Record
from memtop.records.process import MappingRow, Mappings, MappingTotals, TargetGone

READ_BYTES = 1 << 20  # parsed a megabyte at a time (the kernel hands out ~4 KiB a read() call)
RESCAN_MIN_S = 2.0
RESCAN_DUTY = 0.1
ROLLUP_DUTY = 0.0025
JOIN_TIMEOUT_S = 2.0
FIRST_WAIT_S = 0.2  # load() waits this long for the first read to finish


class _Scan:
    """One read of /proc/PID/smaps in a thread: rows appended as they are parsed."""

    def __init__(self, path: Path, stop: threading.Event) -> None:
        self.path = path
        self.stop = stop
        self.lock = threading.Lock()
        self.rows: list[MappingRow] = []
        self.done = False
        self.failed = False
        self.started = time.monotonic()
        self.took_s = 0.0
        self.thread = threading.Thread(target=self._run, name="memtop-smaps", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        parser = SmapsParser()
        try:
            with open(self.path, "rb", buffering=1 << 16) as f:
                while not self.stop.is_set():
                    data = f.read(READ_BYTES)
                    rows = parser.feed(data) if data else parser.finish()
                    with self.lock:
                        self.rows.extend(rows)
                    if not data:
                        break
                    time.sleep(0)  # let the UI thread have the interpreter between parts
        except OSError:  # the process exited (ESRCH) or the file went away
            self.failed = True
        finally:
            self.took_s = time.monotonic() - self.started
            with self.lock:
                self.done = True

    def take(self, start: int) -> tuple[list[MappingRow], bool]:
        """Rows parsed from index ``start`` on, and whether the read is over."""
        with self.lock:
            return self.rows[start:], self.done


class SmapsProbe(Probe):
    name = "smaps"
    needs_bpf = False
    cadence_s = 0.5  # every tick: the first read's rows reach the table as they come

    def __init__(self, pid: int = 0, proc_root: str = "/proc") -> None:
        self.pid = pid
        self.proc_root = proc_root
        self._path = Path(proc_root, str(pid), "smaps")
        self._gone = False
        self._stop = threading.Event()
        self._scan: _Scan | None = None
        self._sent = 0  # rows of the first read sent so far
        self._tables = 0  # reads completed
        self._last_hash: int | None = None
        self._next_scan = 0.0
        self._last_totals: MappingTotals | None = None
        #: the share of a core reading smaps_rollup may take (the next read waits for it)
        self.rollup_duty = ROLLUP_DUTY
        self._next_rollup = 0.0

    def load(self) -> None:
        if not self._path.exists():
            raise PidNotFound(f"pid {self.pid} is gone", "pick a running process")
        self._scan = _Scan(self._path, self._stop)
        # most processes' smaps is read in milliseconds: the first poll then has the whole table
        self._scan.thread.join(FIRST_WAIT_S)

    def note(self) -> str:
        return f"pid {self.pid}"

    def poll(self) -> list[Record]:
        if self._gone:
            return []
        out: list[Record] = []
        if not is_alive(self.pid, self.proc_root):
            return self._gone_now()
        # None on a kernel before 4.14 (no smaps_rollup): the totals are then the table's sums
        rollup = None
        now = time.monotonic()
        if now >= self._next_rollup:
            rollup = read_rollup(self.pid, self.proc_root)
            took = time.monotonic() - now
            self._next_rollup = now + took / self.rollup_duty
        if rollup is not None:
            totals = MappingTotals(
                self.pid, rollup.rss_bytes, rollup.pss_bytes, rollup.dirty_bytes, rollup.swap_bytes
            )
            if totals != self._last_totals:
                out.append(totals)
                self._last_totals = totals
        scan = self._scan
        if scan is not None:
            rows, done = scan.take(self._sent if self._tables == 0 else 0)
            if done and scan.failed:
                self._scan = None
                if not is_alive(self.pid, self.proc_root):
                    return out + self._gone_now()
                self._sent = 0  # a first read cut short starts again whole
                self._next_scan = time.monotonic() + RESCAN_MIN_S
            elif self._tables == 0:  # the first read: whatever is parsed so far, then the rest
                if rows or done:
                    out.append(Mappings(self.pid, tuple(rows), append=self._sent > 0, complete=done))
                    self._sent += len(rows)
            elif done:  # a later read: the whole table, if it changed
                table = tuple(rows)
                digest = hash(table)
                if digest != self._last_hash:
                    out.append(Mappings(self.pid, table))
                self._last_hash = digest
            if done:
                if self._tables == 0:
                    self._last_hash = hash(tuple(scan.rows))
                self._tables += 1
                self._scan = None
                self._next_scan = time.monotonic() + max(RESCAN_MIN_S, scan.took_s / RESCAN_DUTY)
        if self._scan is None and time.monotonic() >= self._next_scan and not self._stop.is_set():
            self._scan = _Scan(self._path, self._stop)
        return out

    def _gone_now(self) -> list[Record]:
        self._gone = True
        self._stop.set()
        return [TargetGone(self.pid, time.clock_gettime_ns(time.CLOCK_MONOTONIC))]

    def close(self) -> None:
        self._stop.set()
        scan, self._scan = self._scan, None
        if scan is not None and scan.thread is not threading.current_thread():
            scan.thread.join(JOIN_TIMEOUT_S)  # a read stops within one part (~10 ms)
