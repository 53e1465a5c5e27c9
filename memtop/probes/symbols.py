"""User-space symbols of traced processes: ``function+0xoff [module] file:line``, and the file
offsets of functions to attach uprobes to.

The files this reads belong to the traced processes, so any local user can craft them: a binary
whose ``.gnu_debuglink`` names a FIFO hung BCC's symbolizer in ``open()`` while memtop held its
lock, and with it the UI and every exit path (issue 19, item 4). So:

- memtop reads symbols itself (memtop.probes.elfsyms): only regular files are opened, through
  O_NONBLOCK, and every size read is bounded; BCC's symbolizer is not used.
- The reading runs in a helper process (``python -m memtop.probes.symbols --serve``), one per
  memtop, and every request is bounded in time (:data:`LOOKUP_TIMEOUT_S`): a helper that does not
  answer in time is killed with its process group (addr2line included), the process asked about
  shows raw addresses from then on, and the next request starts a fresh helper. No lock of the
  BPF side is held meanwhile, and :func:`shutdown` (every exit path) kills the helper at once, so
  a stuck lookup can delay neither the UI nor exit.
- Source lines come from ``addr2line`` run by the helper on the file already opened and checked
  (``/proc/self/fd/N``), only when that file carries its line tables (so addr2line looks for no
  other file), with no debuginfod.

Results are cached per address; all text is cleaned here (symbol names and paths are untrusted).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memtop.core.text import clean
from memtop.probes.procmaps import AddressMap, read_maps

#: the longest one request to the helper may take before the helper is killed
LOOKUP_TIMEOUT_S = 3.0
#: addr2line's own bound inside the helper
ADDR2LINE_TIMEOUT_S = 2.0
#: bytes of code returned around a function's entry (the leaks probe places its probes with them)
CODE_BEFORE, CODE_AFTER = 128, 4096
#: modules kept parsed in the helper (each holds one or two open fds)
MAX_MODULES = 128


class SymbolError(Exception):
    """The helper did not answer: timed out (then killed), exited, or shut down."""


# -- the client (in memtop) ---------------------------------------------------------------------------


class SymbolHelper:
    """The symbol helper process, started on first use and restarted after it is killed. One
    request at a time; each bounded by its timeout."""

    def __init__(self, command: list[str] | None = None) -> None:
        #: the helper's command line (memtop's own, unless a test gives another)
        self.command = command or [sys.executable, "-I", "-m", "memtop.probes.symbols", "--serve"]
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._buf = b""
        self._seq = 0
        #: bumped by shutdown(): a request under way when it was bumped fails at once
        self._gen = 0
        self._proc_gen = 0

    def call(self, op: str, timeout_s: float = LOOKUP_TIMEOUT_S, **args: Any) -> Any:
        deadline = time.monotonic() + timeout_s
        gen = self._gen
        if not self._lock.acquire(timeout=timeout_s):
            raise SymbolError("symbol helper busy")
        try:
            proc = self._proc
            if proc is None or self._proc_gen != self._gen or proc.poll() is not None:
                self._kill()  # shut down (or died) since: a fresh one
                proc = self._spawn()
            self._seq += 1
            self._send(proc, json.dumps({"id": self._seq, "op": op, **args}).encode() + b"\n", deadline, gen)
            while True:
                nl = self._buf.find(b"\n")
                if nl >= 0:
                    msg = json.loads(self._buf[:nl])
                    self._buf = self._buf[nl + 1 :]
                    if msg.get("id") != self._seq:
                        continue
                    if "error" in msg:
                        raise SymbolError(str(msg["error"]))
                    return msg["ok"]
                self._wait(proc, deadline, gen, readable=True)
                assert proc.stdout is not None
                chunk = os.read(proc.stdout.fileno(), 1 << 16)
                if not chunk:
                    self._kill()
                    raise SymbolError("symbol helper exited" if gen == self._gen else "stopped")
                self._buf += chunk
        finally:
            self._lock.release()

    def _spawn(self) -> subprocess.Popen[bytes]:
        # its own session: killing its process group ends addr2line with it, and a terminal
        # hangup does not reach it; stderr is memtop's (the log file under the TUI)
        proc = subprocess.Popen(
            [*self.command, str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
            cwd="/",
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"},
        )
        assert proc.stdin is not None
        os.set_blocking(proc.stdin.fileno(), False)
        self._proc, self._buf, self._proc_gen = proc, b"", self._gen
        return proc

    def _send(self, proc: subprocess.Popen[bytes], data: bytes, deadline: float, gen: int) -> None:
        assert proc.stdin is not None
        fd = proc.stdin.fileno()
        while data:
            self._wait(proc, deadline, gen, readable=False)
            try:
                data = data[os.write(fd, data) :]
            except BlockingIOError:
                continue
            except OSError as exc:
                self._kill()
                raise SymbolError(f"symbol helper gone ({exc.strerror})") from None

    def _wait(self, proc: subprocess.Popen[bytes], deadline: float, gen: int, readable: bool) -> None:
        assert proc.stdout is not None and proc.stdin is not None
        fd = proc.stdout.fileno() if readable else proc.stdin.fileno()
        # poll, not select: a probe tracing many threads holds thousands of fds, and select()
        # refuses any fd above 1023
        poller = select.poll()
        poller.register(fd, select.POLLIN if readable else select.POLLOUT)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or gen != self._gen:
                self._kill()
                raise SymbolError("symbol lookup timed out" if gen == self._gen else "stopped")
            if poller.poll(int(min(left, 0.25) * 1000) + 1):
                return  # ready, or hung up / in error: the read or write that follows says which

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        for f in (proc.stdin, proc.stdout):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass

    def forget(self, pid: int) -> None:
        """Drop what the helper keeps for ``pid``; nothing to do (and no helper started) when it
        is not running."""
        proc = self._proc
        if proc is None or self._proc_gen != self._gen or proc.poll() is not None:
            return
        try:
            self.call("forget", timeout_s=0.5, pid=pid)
        except SymbolError:
            pass

    def shutdown(self) -> None:
        """Kill the helper now (exit paths): a request under way fails within 0.25 s. A later
        request starts a new helper."""
        self._gen += 1
        proc = self._proc
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass


HELPER = SymbolHelper()


def shutdown() -> None:
    """Cut short every symbol lookup under way (memtop is stopping)."""
    HELPER.shutdown()


def resolve_functions(
    pid: int, module: str, names: list[str]
) -> dict[str, tuple[str, int, bytes, int] | str]:
    """For each function name in ``module`` (a path as ``pid`` maps it): (path to attach a uprobe
    to, file offset, the code around it, the offset of the function in that code), or why not."""
    res = HELPER.call("resolve", pid=pid, module=module, names=names)
    out: dict[str, tuple[str, int, bytes, int] | str] = {}
    for name, v in res.items():
        out[name] = v if isinstance(v, str) else (v[0], int(v[1]), bytes.fromhex(v[2]), int(v[3]))
    return out


def dynamic(pid: int, module: str) -> tuple[list[str], str] | None:
    """(the libraries ``module`` needs, its DT_NEEDED entries in order; its DT_SONAME) for a path
    as ``pid`` maps it; None when it cannot be read."""
    res = HELPER.call("dynamic", pid=pid, module=module)
    return None if res is None else ([str(n) for n in res[0]], str(res[1]))


#: object files of a process named with their build ids, at most (a real program maps tens)
MAX_MAPPINGS = 512


def mappings(pid: int) -> list[tuple[str, str, int, int, int]]:
    """The files ``pid`` maps, one row each: (path as shown, build id in hex or "", lowest start,
    highest end, file offset of the lowest mapping); what a pprof profile names its mappings
    with. Empty when the process cannot be read."""
    res = HELPER.call("mappings", pid=pid)
    if not isinstance(res, list):
        return []
    return [(str(r[0]), str(r[1]), int(r[2]), int(r[3]), int(r[4])) for r in res[:MAX_MAPPINGS]]


class Symbolizer:
    """Frames of one process, through the helper, cached per address."""

    def __init__(self, pid: int, proc_root: str = "/proc", lines: bool = True) -> None:
        self.pid = pid
        self.proc_root = proc_root
        self.lines = lines
        self._cache: dict[int, str] = {}
        self._amap: AddressMap | None = None
        #: why this process's frames are raw addresses from now on (a lookup timed out), or ""
        self.broken = ""
        #: frames by BPF stack id, once symbolized (or failed: a negative id), for stack_frames_of
        self._stacks: dict[int, tuple[str, ...]] = {}

    def stack_frames(self, stacks: Any, sid: int, alive: bool) -> tuple[str, ...]:
        """Frames of stack ``sid`` in a BPF stack-trace map: symbolized while the process lives,
        raw addresses after; a failed or evicted stack says why."""
        if sid < 0:
            err = -sid
            why = {17: "hash collision", 14: "no user stack"}.get(err, f"errno {err}")
            return (f"[stack not taken: {why}]",)
        try:
            addrs = [int(a) for a in stacks.walk(sid)]
        except KeyError:
            return ("[stack evicted]",)
        if not alive:
            return tuple(f"0x{a:x}" for a in addrs)
        return self.frames(addrs)

    def stack_frames_of(self, stacks: Any, sid: int, alive: bool) -> tuple[str, ...]:
        """:meth:`stack_frames`, remembered by stack id: a stack id names one stack for as long
        as the program is loaded. Raw addresses (the process gone) are not remembered."""
        frames = self._stacks.get(sid)
        if frames is None:
            frames = self.stack_frames(stacks, sid, alive)
            if alive or sid < 0:
                self._stacks[sid] = frames
        return frames

    def frames(self, addrs: list[int]) -> tuple[str, ...]:
        """Symbolize a stack (innermost first). Return addresses (all but the first) are looked up
        at addr-1 for their line, so the call site shows rather than the line after it."""
        todo = [a for a in dict.fromkeys(addrs) if a not in self._cache]
        if todo:
            rows: list[Any] | None = None
            if not self.broken:
                try:
                    rows = HELPER.call(
                        "frames",
                        pid=self.pid,
                        addrs=todo,
                        exact=addrs[:1],
                        lines=self.lines,
                        proc_root=self.proc_root,
                    )
                except SymbolError as exc:
                    self.broken = str(exc)
            for i, a in enumerate(todo):
                if rows is not None and i < len(rows):
                    name, offset, module, line = rows[i]
                    self._cache[a] = self._text(a, name, int(offset), module, line)
                else:  # raw, but still naming the file it is in
                    self._cache[a] = self._text(a, None, 0, self._module_of(a), "")
        return tuple(self._cache[a] for a in addrs)

    @staticmethod
    def _text(addr: int, name: str | None, offset: int, module: str | None, line: str) -> str:
        text = f"{clean(name, 256)}+0x{offset:x}" if name else f"0x{addr:x}"
        if module:
            text += f" [{clean(os.path.basename(module), 256)}]"
        if line:
            text += f" {clean(line, 256)}"
        return text

    def _module_of(self, addr: int) -> str | None:
        if self._amap is None or self._amap.find(addr) is None:
            entries = read_maps(self.pid, self.proc_root)
            if entries is None:
                return None
            self._amap = AddressMap(entries)
        m = self._amap.find(addr)
        return m.path if m is not None and m.path else None

    def close(self) -> None:
        if not self.broken:
            HELPER.forget(self.pid)


# -- the helper process --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Map:
    start: int
    end: int
    offset: int
    dev: tuple[int, int]
    inode: int
    path: str


def _read_maps_raw(proc_root: str, pid: int) -> list[_Map]:
    """/proc/PID/maps with the paths as the process sees them (not cleaned: they are opened)."""
    out: list[_Map] = []
    with open(f"{proc_root}/{pid}/maps", "rb") as f:
        for raw in f.read().decode("utf-8", "surrogateescape").splitlines():
            parts = raw.split(None, 5)
            if len(parts) < 5:
                continue
            try:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                major, minor = (int(x, 16) for x in parts[3].split(":"))
                path = parts[5] if len(parts) > 5 else ""
                if path.endswith(" (deleted)"):
                    path = path[: -len(" (deleted)")]
                out.append(_Map(lo, hi, int(parts[2], 16), (major, minor), int(parts[4]), path))
            except ValueError:
                continue
    out.sort(key=lambda m: m.start)
    return out


def _demangler() -> Any:
    """C++ names demangled by libstdc++'s __cxa_demangle (in the helper only: crafted names
    cannot take memtop down), or left as they are without libstdc++."""
    import ctypes

    try:
        cxx = ctypes.CDLL("libstdc++.so.6")
        libc = ctypes.CDLL(None)
    except OSError:
        return lambda name: name
    fn = cxx.__cxa_demangle
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    libc.free.argtypes = [ctypes.c_void_p]

    def demangle(name: str) -> str:
        if not name.startswith("_Z"):
            return name
        status = ctypes.c_int(-1)
        out = fn(name.encode("utf-8", "replace"), None, None, ctypes.byref(status))
        if not out:
            return name
        try:
            return ctypes.string_at(out).decode("utf-8", "replace") if status.value == 0 else name
        finally:
            libc.free(out)

    return demangle


class _Server:
    def __init__(self) -> None:
        from memtop.probes import elfsyms

        self.elf = elfsyms
        self.demangle = _demangler()
        self.maps: dict[int, list[_Map]] = {}
        self.modules: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self.perf_maps: dict[int, Any] = {}

    def handle(self, req: dict[str, Any]) -> Any:
        op = req.get("op")
        pid = int(req["pid"])
        proc_root = str(req.get("proc_root", "/proc"))
        if op == "frames":
            return self.frames(
                proc_root,
                pid,
                [int(a) for a in req["addrs"]],
                set(req.get("exact", ())),
                bool(req.get("lines")),
            )
        if op == "resolve":
            return self.resolve(proc_root, pid, str(req["module"]), [str(n) for n in req["names"]])
        if op == "dynamic":
            return self.dynamic(proc_root, pid, str(req["module"]))
        if op == "mappings":
            return self.mappings(proc_root, pid)
        if op == "forget":
            self.maps.pop(pid, None)
            self.perf_maps.pop(pid, None)
            return None
        raise ValueError(f"unknown request {op!r}")

    def _find(self, proc_root: str, pid: int, addr: int) -> _Map | None:
        for fresh in (False, True):
            if fresh or pid not in self.maps:
                self.maps[pid] = _read_maps_raw(proc_root, pid)
            for m in self.maps[pid]:
                if m.start <= addr < m.end:
                    return m
        return None

    def _open_mapped(self, proc_root: str, pid: int, m: _Map) -> Any:
        """(fd, ELF headers) of the file of mapping ``m``, or None: the mapped file itself,
        whatever has become of its path since; else the path, if it is still that file."""
        opened = self.elf.open_elf(f"{proc_root}/{pid}/map_files/{m.start:x}-{m.end:x}")
        if opened is None:
            opened = self.elf.open_elf(f"{proc_root}/{pid}/root{m.path}")
            if opened is not None:
                st = os.fstat(opened[0])
                if st.st_ino != m.inode or (os.major(st.st_dev), os.minor(st.st_dev)) != m.dev:
                    os.close(opened[0])
                    opened = None
        return opened

    def _module(self, proc_root: str, pid: int, m: _Map) -> Any:
        """The parsed file of mapping ``m`` (cached by file identity and root), or None."""
        root = f"{proc_root}/{pid}/root"
        try:
            rst = os.stat(root)
        except OSError:
            return None
        key = (m.dev, m.inode, m.path, rst.st_dev, rst.st_ino)
        if key in self.modules:
            self.modules.move_to_end(key)
            return self.modules[key]
        opened = self._open_mapped(proc_root, pid, m)
        mod = self.elf.load_module(opened[0], opened[1], m.path, root) if opened is not None else None
        self.modules[key] = mod
        while len(self.modules) > MAX_MODULES:
            _k, old = self.modules.popitem(last=False)
            if old is not None:
                old.close()
        return mod

    def _perf_map(self, proc_root: str, pid: int) -> Any:
        if pid not in self.perf_maps:
            nstgid = pid
            try:
                for line in (
                    Path(f"{proc_root}/{pid}/status").read_text("utf-8", "surrogateescape").splitlines()
                ):
                    if line.startswith("NStgid:"):
                        nstgid = int(line.split()[-1])
            except (OSError, ValueError):
                pass
            path = f"{proc_root}/{pid}/root/tmp/perf-{nstgid}.map"
            self.perf_maps[pid] = (self.elf.load_perf_map(path), f"/tmp/perf-{nstgid}.map")
        return self.perf_maps[pid]

    def frames(
        self, proc_root: str, pid: int, addrs: list[int], exact: set[int], lines: bool
    ) -> list[list[Any]]:
        out: list[list[Any]] = []
        want_lines: dict[int, list[tuple[int, int]]] = {}
        for i, a in enumerate(addrs):
            name: str | None = None
            offset = 0
            module: str | None = None
            m = self._find(proc_root, pid, a)
            if m is not None and m.path:
                module = m.path
                mod = self._module(proc_root, pid, m) if m.path.startswith("/") else None
                if mod is not None and mod.image is not None:
                    vaddr = mod.image.vaddr_of_file_offset(a - m.start + m.offset)
                    if vaddr is not None:
                        hit = mod.lookup(vaddr)
                        if hit is not None:
                            name, offset = self.demangle(hit[0]), hit[1]
                        if lines and mod.lines_fd is not None:
                            want_lines.setdefault(mod.lines_fd, []).append(
                                (i, vaddr if a in exact else max(0, vaddr - 1))
                            )
            if name is None and (m is None or not m.path.startswith("/")):  # JIT code: a perf map
                pmap, ppath = self._perf_map(proc_root, pid)
                hit = pmap.lookup(a) if pmap is not None else None
                if hit is not None:
                    (name, offset), module = hit, ppath
            # bytes that are not UTF-8 as \xNN, as memtop.core.text.clean shows them everywhere else
            # (the pipe carries UTF-8: no surrogate may cross it)
            shown = (
                module.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
                if module
                else None
            )
            out.append([name, offset, shown, ""])
        for fd, items in want_lines.items():
            for (i, _v), line in zip(items, _addr2line(fd, [v for _, v in items]), strict=True):
                out[i][3] = line
        return out

    def mappings(self, proc_root: str, pid: int) -> list[list[Any]]:
        """Each file ``pid`` maps (by path, its mappings merged) with the build id from its ELF
        notes, read from the mapped file itself (memtop.probes.symbols.mappings)."""
        try:
            maps = _read_maps_raw(proc_root, pid)
        except OSError:
            return []
        self.maps[pid] = maps
        first: dict[str, _Map] = {}
        end: dict[str, int] = {}
        for m in maps:
            if not m.path.startswith("/") or m.inode == 0:
                continue
            if m.path not in first:
                if len(first) >= MAX_MAPPINGS:
                    break
                first[m.path] = m
            end[m.path] = max(end.get(m.path, 0), m.end)
        out: list[list[Any]] = []
        for path, m in first.items():
            build_id = ""
            opened = self._open_mapped(proc_root, pid, m)
            if opened is not None:
                try:
                    build_id = opened[1].build_id() or ""
                finally:
                    os.close(opened[0])
            shown = path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            out.append([shown, build_id, m.start, end[path], m.offset])
        return out

    def dynamic(self, proc_root: str, pid: int, module: str) -> list[Any] | None:
        """[DT_NEEDED names, DT_SONAME] of ``module`` as ``pid`` maps it; None when it is not a
        readable ELF file mapped by ``pid``."""
        maps = _read_maps_raw(proc_root, pid)
        self.maps[pid] = maps
        m = next((m for m in maps if m.path == module), None)
        # the headers and the dynamic section only: no symbol table is loaded for this (a
        # process's every library is asked about, most of them never symbolized)
        opened = self._open_mapped(proc_root, pid, m) if m is not None else None
        if opened is None:
            return None
        try:
            needed, soname = opened[1].dynamic()
        finally:
            os.close(opened[0])
        return [needed, soname]

    def resolve(self, proc_root: str, pid: int, module: str, names: list[str]) -> dict[str, Any]:
        maps = _read_maps_raw(proc_root, pid)
        self.maps[pid] = maps
        m = next((m for m in maps if m.path == module), None)
        mod = self._module(proc_root, pid, m) if m is not None else None
        if m is None or mod is None or mod.image is None:
            return {n: f"{module} is not a readable ELF file mapped by {pid}" for n in names}
        # uprobes go on the file by its path in the process's root, when that is still the mapped
        # file (it names the event as BCC would); else on the mapped file itself
        path = f"/proc/{pid}/root{module}"
        try:
            st = os.stat(path)
            same = st.st_ino == m.inode and (os.major(st.st_dev), os.minor(st.st_dev)) == m.dev
        except OSError:
            same = False
        if not same:
            path = f"/proc/{pid}/map_files/{m.start:x}-{m.end:x}"
        out: dict[str, Any] = {}
        for name in names:
            vaddr = mod.image.find_function(name)
            off = mod.image.file_offset_of_vaddr(vaddr) if vaddr is not None else None
            if off is None:
                out[name] = f"no function {name} in {os.path.basename(module)}"
                continue
            start = max(0, off - CODE_BEFORE)
            code = mod.image.src.read(start, off - start + CODE_AFTER)
            out[name] = [path, off, code.hex(), off - start]
        return out


def _addr2line(fd: int, vaddrs: list[int]) -> list[str]:
    """``file:line`` per address from the line tables of the open file ``fd`` ("" if unknown)."""
    try:
        out = (
            subprocess.run(
                ["addr2line", "-e", f"/proc/self/fd/{fd}"] + [f"0x{v:x}" for v in vaddrs],
                pass_fds=(fd,),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=ADDR2LINE_TIMEOUT_S,
                check=False,
                env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
            )
            .stdout.decode("utf-8", "replace")
            .splitlines()
        )
    except (OSError, subprocess.SubprocessError):
        return [""] * len(vaddrs)
    res = []
    for i in range(len(vaddrs)):
        text = out[i].split(" (discriminator")[0].strip() if i < len(out) else ""
        if not text or text.startswith("??"):
            res.append("")
        else:
            file, _, line = text.rpartition(":")
            res.append(f"{os.path.basename(file)}:{line}" if line not in ("0", "?") else "")
    return res


def _orphan_watch(parent: int) -> None:
    """Kill this helper's process group (addr2line included) once memtop is gone, even while the
    main thread is stuck in a read."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os.killpg(0, signal.SIGKILL)


def serve(parent: int) -> int:
    if os.getppid() != parent:
        return 0
    threading.Thread(target=_orphan_watch, args=(parent,), daemon=True).start()
    server = _Server()
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        try:
            req = json.loads(line)
        except ValueError:
            continue
        try:
            resp = {"id": req.get("id"), "ok": server.handle(req)}
        except Exception as exc:  # noqa: BLE001 - reported to memtop, which shows raw addresses
            resp = {"id": req.get("id"), "error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(resp).encode() + b"\n")
        out.flush()
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        raise SystemExit(serve(int(sys.argv[2])))
    raise SystemExit("usage: python -m memtop.probes.symbols --serve PARENT_PID")
