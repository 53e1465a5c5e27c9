"""Recordings: the record stream of a session, kept for later (``memtop replay``).

A recording is gzip-compressed JSON lines:

* line 1, the header: ``{"magic": "memtop-recording", "schema": [major, minor], "memtop": version,
  "kernel": release, "hostname": ..., "start_wall_ns": ..., "start_wall": ISO 8601,
  "start_monotonic_ns": ..., "interval_s": ..., "mode": "bpf"|"procfs",
  "probes": {"attached": [...], "failed": [{"probe", "message", "hint"}], "other": [...]}}``
* then one line per :class:`~memtop.records.Batch`: ``{"ts_ns": int, "records": [to_json(r), ...]}``
* last, when the recorder closed cleanly: ``{"end": {"batches": n, "records": n, "reason": ...}}``

Rendered screens are not recorded: replay feeds the records through the same state and views as a
live session. Readers ignore fields and line types they do not know (minor versions add them) and
refuse a newer *major* version.

Writing is streamed: each batch is compressed and flushed to the file as it arrives (memory stays
bounded whatever the length), into a temporary file next to the target that is renamed into place
when the recorder closes (on the end of ``--duration``, Ctrl-C, SIGTERM or ``R`` in the TUI).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import socket
import time
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from memtop import __version__
from memtop.core.errors import UnsafePath, WriteFailed
from memtop.linux import files
from memtop.records import Batch, ProbeStatus, Record, to_json

MAGIC = "memtop-recording"
#: (major, minor). A reader refuses a newer major; a newer minor only adds fields or line types.
SCHEMA = (1, 0)
#: fsync the temporary file at most this often (flushes to the kernel happen every batch)
FSYNC_EVERY_S = 10.0


def probe_summary(statuses: Iterable[ProbeStatus]) -> dict[str, Any]:
    """Which probes ran and which could not (and why), for the header."""
    attached: list[str] = []
    failed: list[dict[str, str]] = []
    other: list[dict[str, str]] = []
    for st in statuses:
        if st.state == "attached":
            attached.append(st.probe)
        elif st.state == "failed":
            failed.append({"probe": st.probe, "message": st.message, "hint": st.hint})
        else:
            other.append({"probe": st.probe, "state": st.state})
    return {"attached": attached, "failed": failed, "other": other}


def make_header(
    statuses: Iterable[ProbeStatus] = (),
    *,
    interval_s: float = 1.0,
    mode: str = "",
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    wall_ns = time.time_ns()
    header: dict[str, Any] = {
        "magic": MAGIC,
        "schema": list(SCHEMA),
        "memtop": __version__,
        "kernel": os.uname().release,
        "hostname": socket.gethostname(),
        "start_wall_ns": wall_ns,
        "start_wall": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(wall_ns / 1e9)),
        "start_monotonic_ns": time.clock_gettime_ns(time.CLOCK_MONOTONIC),
        "interval_s": interval_s,
        "mode": mode,
        "probes": probe_summary(statuses),
    }
    if extra:
        header.update(extra)
    return header


def default_name(directory: str | Path = ".") -> Path:
    """``memtop-YYYYmmdd-HHMMSS.jsonl.gz`` in ``directory`` (what ``R`` in the TUI writes)."""
    return Path(directory) / time.strftime("memtop-%Y%m%d-%H%M%S.jsonl.gz")


def _line(obj: Any) -> bytes:
    return (json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


class Recorder:
    """Streams batches into ``path``. Subscribe it to a source: ``source.subscribe(recorder)``.

    The target is checked (no symlink, no overwrite without ``force``, writable directory) when the
    recorder opens; data goes to a temporary file in the same directory, flushed after every batch;
    :meth:`close` renames it into place. A closed recorder ignores further batches, so it may stay
    subscribed.
    """

    def __init__(
        self,
        path: str | Path,
        header: Mapping[str, Any],
        *,
        force: bool = False,
        prelude: Iterable[Record] = (),
    ) -> None:
        self._writer = files.AtomicWriter(path, force)
        self.path = self._writer.path
        self.force = force
        self.tmp_path = self._writer.tmp
        #: records put in front of the first batch, so a recording started mid-session knows the
        #: probes' states (a live state already saw those records before the recorder existed)
        self._prelude: tuple[Record, ...] = tuple(prelude)
        self.batches = 0
        self.records = 0
        self.first_ts_ns = 0
        self.last_ts_ns = 0
        self.closed = False
        #: bytes of the file that end on a sync flush: what a salvage reads in full
        self._whole_bytes = 0
        self._last_sync = time.monotonic()
        try:
            # mtime=0: the gzip header carries no timestamp (the JSON header has the real one)
            self._gz = gzip.GzipFile(fileobj=self._writer.file, mode="wb", compresslevel=6, mtime=0)
            self._write(_line(dict(header)))
        except BaseException as exc:  # disk full already, Ctrl-C: nothing worth keeping
            self.closed = True
            self._writer.abort()
            if isinstance(exc, OSError):
                raise files.failure(self.path, exc) from exc
            raise

    @property
    def duration_s(self) -> float:
        return (self.last_ts_ns - self.first_ts_ns) / 1e9 if self.batches else 0.0

    def _write(self, data: bytes) -> None:
        self._gz.write(data)
        # a sync flush ends the deflate block, so everything so far decompresses even if the
        # process dies before close (the file then lacks only the gzip trailer)
        self._gz.flush(zlib.Z_SYNC_FLUSH)
        self._writer.file.flush()
        self._whole_bytes = self._writer.file.tell()

    def __call__(self, batch: Batch) -> None:
        self.write(batch)

    def write(self, batch: Batch) -> None:
        """Append ``batch``. A failed write (disk full, I/O error) stops the recording: the samples
        written so far become the file at the target, cut short (:meth:`_keep_partial`), and
        :class:`~memtop.core.errors.WriteFailed` says so."""
        if self.closed:
            return
        records = batch.records
        if self._prelude:
            records, self._prelude = self._prelude + records, ()
        try:
            self._write(_line({"ts_ns": batch.ts_ns, "records": [to_json(r) for r in records]}))
            now = time.monotonic()
            if now - self._last_sync >= FSYNC_EVERY_S:
                os.fsync(self._writer.file.fileno())
                self._last_sync = now
        except OSError as exc:
            raise self._keep_partial(exc, "stopped") from exc
        if not self.batches:
            self.first_ts_ns = batch.ts_ns
        self.batches += 1
        self.records += len(records)
        self.last_ts_ns = batch.ts_ns

    def close(self, reason: str = "stopped") -> Path:
        """Write the end line, finish the gzip stream and move the file into place (idempotent).

        Without ``force`` the final link is made with ``link()``, which never replaces a file that
        appeared meanwhile; if the target cannot be taken the data stays in the temporary file and
        the error says where."""
        if self.closed:
            return self.path
        try:
            end = {
                "batches": self.batches,
                "records": self.records,
                "last_ts_ns": self.last_ts_ns,
                "reason": reason,
            }
            self._gz.write(_line({"end": end}))
            self._gz.close()
            f = self._writer.file
            f.flush()
            os.fsync(f.fileno())
            f.close()
        except OSError as exc:
            raise self._keep_partial(exc, "could not be finished") from exc
        except BaseException:
            self.abort()
            raise
        self.closed = True
        self._writer.done = True
        try:
            files.check_target(self.path, self.force)
            files.publish(self.tmp_path, self.path, self.force)
        except (OSError, UnsafePath) as exc:
            msg = exc.message if isinstance(exc, UnsafePath) else f"cannot create {self.path}: {exc.strerror}"
            raise UnsafePath(msg, f"the recording is kept in {self.tmp_path}") from exc
        return self.path

    def _keep_partial(self, exc: OSError, what: str) -> WriteFailed:
        """After a failed write: keep the whole samples written so far at the target (the file is
        cut after the last one, as a killed recorder leaves it: ``--salvage`` replays it) and
        remove the temporary file. The error to raise says what happened and where the data is."""
        self.closed = True
        self._writer.done = True
        why = exc.strerror or str(exc)
        with contextlib.suppress(OSError):
            self._writer.file.close()  # flushing the rest fails again on a full disk: the cut drops it
        if self.batches:
            try:
                os.truncate(self.tmp_path, self._whole_bytes)  # also frees the space of a torn block
                files.check_target(self.path, self.force)
                files.publish(self.tmp_path, self.path, self.force)
            except (OSError, UnsafePath):
                pass
            else:
                return WriteFailed(
                    f"recording to {self.path} {what} after {self.batches} samples "
                    f"({self.duration_s:.1f} s): {why}; the file holds those samples, cut short "
                    f"(replay it with --salvage)"
                )
        self.tmp_path.unlink(missing_ok=True)
        return WriteFailed(f"recording to {self.path} failed: {why}; nothing was kept")

    def abort(self) -> None:
        """Drop the recording (nothing appears at the target)."""
        if not self.closed:
            self.closed = True
            try:
                self._gz.close()
            except OSError:
                pass
            self._writer.abort()


def open_recorder(
    path: str | Path,
    statuses: Iterable[ProbeStatus] = (),
    *,
    force: bool = False,
    interval_s: float = 1.0,
    mode: str = "",
    prelude: Iterable[Record] = (),
    extra: Mapping[str, Any] | None = None,
) -> Recorder:
    statuses = list(statuses)
    header = make_header(statuses, interval_s=interval_s, mode=mode, extra=extra)
    return Recorder(path, header, force=force, prelude=prelude)
