"""memtop's programs compiled in a process of their own; their maps read here without libbcc.

:mod:`memtop.linux.bpfchild` compiles and loads in a fresh interpreter and sends back the fds of
the programs and maps; this module turns them into a :class:`Compiled`, which offers what memtop
uses of BCC's ``BPF`` object (tables by name, programs by name and type, ring buffers, uprobe
bookkeeping) through libbcc_bpf, BCC's own library of map and attach calls, which links neither
clang nor LLVM. The process that runs for hours thus never maps libbcc: ~14 MiB less RssAnon for
LLVM's relocated data, and no compiler heap left behind (see docs/performance.md).

Tables follow BCC's semantics (bcc/table.py), for the map types memtop's programs declare: hash
and LRU hash (keys walked with get_next_key, each looked up), array and per-CPU array (every
index; deleting zeroes), stack traces (``walk``) and ring buffers (``open_ring_buffer``).
"""

from __future__ import annotations

import ctypes
import os
import re
import socket
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from memtop.linux import bpfchild

# BPF program types (include/uapi/linux/bpf.h), as BCC numbers them
KPROBE, TRACEPOINT, PERF_EVENT, RAW_TRACEPOINT = 2, 5, 7, 17
# map types
HASH, ARRAY, PERCPU_HASH, PERCPU_ARRAY, STACK_TRACE, LRU_HASH, LRU_PERCPU_HASH, RINGBUF = (
    1,
    2,
    5,
    6,
    7,
    9,
    10,
    27,
)
STACK_BUILD_ID = 1 << 5
MAX_STACK_DEPTH = 127

RingbufCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)

_lib: Any = None
_lib_lock = threading.Lock()


def lib() -> Any:
    """libbcc_bpf (BCC's map, attach and ring-buffer calls; no compiler), its calls declared."""
    global _lib
    with _lib_lock:
        if _lib is None:
            cdll = ctypes.CDLL("libbcc_bpf.so.0", use_errno=True)
            c = ctypes
            # map fd, in and out batch tokens, keys, values, count
            batch = [
                c.c_int,
                c.POINTER(c.c_uint32),
                c.POINTER(c.c_uint32),
                c.c_void_p,
                c.c_void_p,
                c.c_void_p,
            ]
            for name, res, args in (
                ("bpf_lookup_elem", c.c_int, [c.c_int, c.c_void_p, c.c_void_p]),
                ("bpf_update_elem", c.c_int, [c.c_int, c.c_void_p, c.c_void_p, c.c_ulonglong]),
                ("bpf_delete_elem", c.c_int, [c.c_int, c.c_void_p]),
                ("bpf_get_first_key", c.c_int, [c.c_int, c.c_void_p, c.c_uint]),
                ("bpf_get_next_key", c.c_int, [c.c_int, c.c_void_p, c.c_void_p]),
                ("bpf_lookup_batch", c.c_int, batch),
                ("bpf_lookup_and_delete_batch", c.c_int, batch),
                ("bpf_attach_tracepoint", c.c_int, [c.c_int, c.c_char_p, c.c_char_p]),
                ("bpf_attach_raw_tracepoint", c.c_int, [c.c_int, c.c_char_p]),
                (
                    "bpf_attach_perf_event",
                    c.c_int,
                    [c.c_int, c.c_uint, c.c_uint, c.c_ulonglong, c.c_ulonglong, c.c_int, c.c_int, c.c_int],
                ),
                ("bpf_close_perf_event_fd", c.c_int, [c.c_int]),
                (
                    "bpf_attach_uprobe",
                    c.c_int,
                    [c.c_int, c.c_int, c.c_char_p, c.c_char_p, c.c_ulonglong, c.c_int, c.c_uint32],
                ),
                ("bpf_detach_uprobe", c.c_int, [c.c_char_p]),
                ("bpf_new_ringbuf", c.c_void_p, [c.c_int, RingbufCallback, c.c_void_p]),
                ("bpf_add_ringbuf", c.c_int, [c.c_void_p, c.c_int, RingbufCallback, c.c_void_p]),
                ("bpf_consume_ringbuf", c.c_int, [c.c_void_p]),
                ("bpf_free_ringbuf", None, [c.c_void_p]),
            ):
                fn = getattr(cdll, name)
                fn.restype = res
                fn.argtypes = args
            _lib = cdll
        return _lib


# -- the compiler's process ---------------------------------------------------------------------

#: a function's context type names the program type it is loaded as
_CTX = re.compile(r"\b([A-Za-z_]\w*)\s*\(\s*struct\s+(bpf_perf_event_data|pt_regs)\s*\*")
_CTX_TYPES = {"bpf_perf_event_data": PERF_EVENT, "pt_regs": KPROBE}


def program_types(text: str) -> dict[str, int]:
    """The type of each function written with a perf-event or pt_regs context in ``text``
    (tracepoint programs are told by their names: :func:`type_of`)."""
    return {name: _CTX_TYPES[ctx] for name, ctx in _CTX.findall(text)}


def type_of(name: str, by_ctx: dict[str, int]) -> int:
    if "__tp__" in name or name.startswith("tracepoint__"):
        return TRACEPOINT
    if "__raw__" in name or name.startswith("raw_tracepoint__"):
        return RAW_TRACEPOINT
    return by_ctx.get(name, KPROBE)


def _child_command(fd: int) -> list[str]:
    """A fresh interpreter, isolated (-I: neither the working directory nor PYTHON* variables on
    its path: memtop runs as root from anywhere), that finds memtop where this one did."""
    root = str(Path(__file__).resolve().parents[2])
    code = (
        "import sys, os; sys.path.insert(0, sys.argv[1]); "
        "from memtop.linux import bpfchild; os._exit(bpfchild.main(int(sys.argv[2])))"
    )
    return [sys.executable, "-I", "-c", code, root, str(fd)]


def _receive(sock: socket.socket, count: int) -> list[int]:
    fds: list[int] = []
    while len(fds) < count:
        _msg, got, _flags, _addr = socket.recv_fds(sock, 16, bpfchild.FDS_PER_MESSAGE)
        if not got:
            raise EOFError("the compiler's process sent fewer fds than it announced")
        fds += got
    return fds


def compile_elsewhere(text: str, cflags: Sequence[str]) -> Compiled:
    """Compile and load ``text`` in :mod:`memtop.linux.bpfchild`; raise as BCC would (a plain
    Exception with clang's errors; memtop's own errors by their class) when it cannot."""
    from memtop.core import errors

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    fds: list[int] = []
    try:
        with ours:
            try:
                proc = subprocess.Popen(
                    _child_command(theirs.fileno()),
                    pass_fds=(theirs.fileno(),),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    cwd="/",
                )
            finally:
                theirs.close()
            try:
                types = program_types(text)
                bpfchild.send_doc(ours, {"text": text, "cflags": list(cflags), "types": types})
                reply = bpfchild.recv_doc(ours)
                if reply.get("ok"):
                    fds = _receive(
                        ours, sum("fd_index" in p for p in reply["programs"]) + len(reply["tables"])
                    )
            finally:
                proc.wait()
    except (OSError, EOFError, ValueError) as exc:
        for fd in fds:
            os.close(fd)
        raise Exception(f"the compiler's process failed: {exc}") from exc
    if not reply.get("ok"):
        cls = getattr(errors, str(reply.get("class", "")), None)
        if isinstance(cls, type) and issubclass(cls, errors.MemtopError):
            raise cls(str(reply.get("error", "")), str(reply.get("hint", "")))
        raise Exception(str(reply.get("error", "compiling failed")))
    return Compiled(reply, fds)


# -- the compiled module, as memtop uses BCC's BPF object ----------------------------------------


class Function:
    def __init__(self, name: bytes, fd: int) -> None:
        self.name = name
        self.fd = fd


class Compiled:
    """Programs and maps from the compiler's process. Closing (:meth:`cleanup`) detaches what was
    attached through it and closes every fd; the kernel frees a program or map with its last fd."""

    def __init__(self, reply: dict[str, Any], fds: list[int]) -> None:
        self.module = None  # no compiler here: memtop.linux.bcc_compat tells the two apart by it
        self.function_list: list[str] = list(reply["functions"])
        self._programs: dict[tuple[str, int], int] = {}
        self._failed: dict[tuple[str, int], str] = {}
        for p in reply["programs"]:
            if "error" in p:
                self._failed[(p["name"], int(p["type"]))] = str(p["error"])
            else:
                self._programs[(p["name"], int(p["type"]))] = fds[int(p["fd_index"])]
        self._table_info = {t["name"]: (t, fds[t["fd_index"]]) for t in reply["tables"]}
        self.tables: dict[str, Table] = {}
        self.funcs: dict[bytes, Function] = {}
        self.uprobe_fds: dict[bytes, int] = {}
        self._ringbuf_manager: int | None = None
        self._callbacks: list[Any] = []
        self._closed = False
        # every program is loaded when compiled (BCC loads on first use): a Compiled dropped
        # without cleanup() must not keep them all, so its fds go with it
        self._finalizer = weakref.finalize(self, _close_fds, list(fds))

    # programs
    def load_func(self, name: bytes | str, prog_type: int) -> Function:
        key = (name.decode() if isinstance(name, bytes) else name, int(prog_type))
        fd = self._programs.get(key)
        if fd is None:
            why = self._failed.get(key)
            if why:
                raise Exception(why)
            raise Exception(f"program {key[0]} was not loaded as type {key[1]} when it was compiled")
        fn = Function(key[0].encode(), fd)
        self.funcs[fn.name] = fn
        return fn

    # tables
    def __getitem__(self, name: bytes | str) -> Table:
        key = name.decode() if isinstance(name, bytes) else name
        t = self.tables.get(key)
        if t is None:
            found = self._table_info.get(key)
            if found is None:
                raise KeyError(key)
            t = make_table(self, key, found[0], found[1])
            self.tables[key] = t
        return t

    def get_table(self, name: bytes | str) -> Table:
        return self[name]

    # ring buffers
    def _open_ring_buffer(self, map_fd: int, fn: Any, ctx: Any = None) -> None:
        if not self._ringbuf_manager:
            self._ringbuf_manager = lib().bpf_new_ringbuf(map_fd, fn, ctx)
            if not self._ringbuf_manager:
                raise Exception("Could not open ring buffer")
        elif lib().bpf_add_ringbuf(self._ringbuf_manager, map_fd, fn, ctx) < 0:
            raise Exception("Could not open ring buffer")
        self._callbacks.append(fn)

    def ring_buffer_consume(self) -> None:
        if not self._ringbuf_manager:
            raise Exception("No ring buffers to poll")
        lib().bpf_consume_ringbuf(self._ringbuf_manager)

    # uprobes (the names BCC gives them, so that a leftover event reads the same)
    _probe_repl = re.compile(b"[^a-zA-Z0-9_]")

    def _get_uprobe_evname(self, prefix: bytes, path: bytes, addr: int, pid: int) -> bytes:
        base = b"%s_%s_0x%x" % (prefix, self._probe_repl.sub(b"_", path), addr)
        return base if pid == -1 else base + b"_%d" % pid

    def _add_uprobe_fd(self, name: bytes, fd: int) -> None:
        self.uprobe_fds[name] = fd

    def detach_uprobe_event(self, ev_name: bytes) -> None:
        if ev_name not in self.uprobe_fds:
            raise Exception(f"Uprobe {ev_name!r} is not attached")
        fd = self.uprobe_fds.pop(ev_name)
        if lib().bpf_close_perf_event_fd(fd) < 0:
            raise Exception("Failed to detach BPF from uprobe")
        if lib().bpf_detach_uprobe(ev_name) < 0:
            raise Exception("Failed to detach BPF from uprobe")

    def cleanup(self) -> None:
        if self._closed:
            return
        self._closed = True
        for ev in list(self.uprobe_fds):
            try:
                self.detach_uprobe_event(ev)
            except Exception:  # noqa: BLE001 - every exit path
                pass
        if self._ringbuf_manager:
            lib().bpf_free_ringbuf(self._ringbuf_manager)
            self._ringbuf_manager = None
        self._programs.clear()
        self.funcs.clear()
        self._finalizer()  # closes every fd received, once


def _close_fds(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


# -- tables ------------------------------------------------------------------------------------------

_CTYPES: dict[str, Any] = {
    "_Bool": ctypes.c_bool,
    "char": ctypes.c_char,
    "signed char": ctypes.c_byte,
    "wchar_t": ctypes.c_wchar,
    "unsigned char": ctypes.c_ubyte,
    "short": ctypes.c_short,
    "unsigned short": ctypes.c_ushort,
    "int": ctypes.c_int,
    "unsigned int": ctypes.c_uint,
    "long": ctypes.c_long,
    "unsigned long": ctypes.c_ulong,
    "long long": ctypes.c_longlong,
    "unsigned long long": ctypes.c_ulonglong,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
    "long double": ctypes.c_longdouble,
    "__int128": ctypes.c_int64 * 2,
    "unsigned __int128": ctypes.c_uint64 * 2,
}


def ctype_of(desc: Any) -> Any:
    """The ctypes type of a key or value as BCC describes it in JSON: a C type's name, or
    ``[name, [fields], "struct"|"struct_packed"|"union"]`` whose fields are ``[name, type]``,
    ``[name, type, [count]]`` (an array), ``[name, type, bits]`` (a bitfield) or a nested
    struct or union (anonymous when its name is empty)."""
    if isinstance(desc, str):
        return _CTYPES[desc]
    anon: list[str] = []
    fields: list[tuple[Any, ...]] = []
    for f in desc[1]:
        if len(f) == 2:
            fields.append((f[0], ctype_of(f[1])))
        elif len(f) == 3 and isinstance(f[2], list):
            fields.append((f[0], ctype_of(f[1]) * f[2][0]))
        elif len(f) == 3 and isinstance(f[2], int):
            fields.append((f[0], ctype_of(f[1]), f[2]))
        elif len(f) == 3 and f[2] in ("union", "struct", "struct_packed"):
            name = f[0] or f"__anon{len(anon)}"
            if not f[0]:
                anon.append(name)
            fields.append((name, ctype_of(f)))
        else:
            raise ValueError(f"cannot read the type {f!r}")
    kind = desc[2] if len(desc) > 2 else "struct"
    base = ctypes.Union if kind == "union" else ctypes.Structure
    body: dict[str, Any] = {"_anonymous_": anon, "_fields_": fields}
    if kind == "struct_packed":
        body["_pack_"] = 1
    return type(str(desc[0]) or "anon", (base,), body)


def cpu_list(kind: str) -> list[int]:
    """The CPUs of /sys/devices/system/cpu/``kind`` ("online", "possible"; written "0-3,5")."""
    text = Path("/sys/devices/system/cpu", kind).read_text().strip()
    cpus: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus += range(int(lo), int(hi or lo) + 1)
    return cpus


def possible_cpus() -> int:
    """How many CPUs a per-CPU map holds a value for."""
    return len(cpu_list("possible"))


class Table:
    """A hash map (BCC's HashTable): keys walked, each looked up; an entry gone between the two
    is skipped. What memtop uses of BCC's MutableMapping is here: get, pop, in."""

    def __init__(self, bpf: Compiled, name: str, info: dict[str, Any], fd: int) -> None:
        self.bpf = bpf
        self.name = name
        self.map_fd = fd
        self.ttype = int(info["type"])
        self.flags = int(info["flags"])
        self.max_entries = int(info["max_entries"])
        self.Key: Any = ctype_of(info["key"]) if info["key"] is not None else ctypes.c_int
        self.Leaf: Any = ctype_of(info["leaf"]) if info["leaf"] is not None else ctypes.c_int
        self._cbs: dict[int, Any] = {}

    def get_fd(self) -> int:
        return self.map_fd

    def _key(self, key: Any) -> Any:
        return key

    def __getitem__(self, key: Any) -> Any:
        key = self._key(key)
        leaf = self.Leaf()
        if lib().bpf_lookup_elem(self.map_fd, ctypes.byref(key), ctypes.byref(leaf)) < 0:
            raise KeyError
        return leaf

    def __setitem__(self, key: Any, leaf: Any) -> None:
        key = self._key(key)
        if lib().bpf_update_elem(self.map_fd, ctypes.byref(key), ctypes.byref(leaf), 0) < 0:
            raise Exception(f"Could not update table: {os.strerror(ctypes.get_errno())}")

    def __delitem__(self, key: Any) -> None:
        key = self._key(key)
        if lib().bpf_delete_elem(self.map_fd, ctypes.byref(key)) < 0:
            raise KeyError

    def __iter__(self) -> Iterator[Any]:
        key = None
        while True:
            nxt = self.Key()
            if key is None:
                res = lib().bpf_get_first_key(self.map_fd, ctypes.byref(nxt), ctypes.sizeof(self.Key))
            else:
                res = lib().bpf_get_next_key(self.map_fd, ctypes.byref(key), ctypes.byref(nxt))
            if res < 0:
                return
            yield nxt
            key = nxt

    def keys(self) -> Iterator[Any]:
        return iter(self)

    def itervalues(self) -> Iterator[Any]:
        for key in self:
            try:
                yield self[key]
            except KeyError:
                pass

    def iteritems(self) -> Iterator[tuple[Any, Any]]:
        for key in self:
            try:
                yield key, self[key]
            except KeyError:
                pass

    def items(self) -> list[tuple[Any, Any]]:
        return list(self.iteritems())

    def values(self) -> list[Any]:
        return list(self.itervalues())

    def clear(self) -> None:
        for k in list(self.keys()):
            try:
                del self[k]
            except KeyError:
                pass

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def get(self, key: Any, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def pop(self, key: Any, *default: Any) -> Any:
        try:
            value = self[key]
            del self[key]
        except KeyError:
            if default:
                return default[0]
            raise
        return value

    def __contains__(self, key: Any) -> bool:
        try:
            self[key]
        except KeyError:
            return False
        return True


class Array(Table):
    """An array (BCC's Array): every index exists; deleting zeroes."""

    def _key(self, key: Any) -> Any:
        if isinstance(key, int):
            if key < 0:
                key += self.max_entries
            key = self.Key(key)
        if not isinstance(key, ctypes._SimpleCData):
            raise IndexError("Array index must be an integer type")
        if key.value >= self.max_entries:
            raise IndexError("Array index out of range")
        return key

    def __len__(self) -> int:
        return self.max_entries

    def __iter__(self) -> Iterator[Any]:
        for i in range(self.max_entries):
            yield self.Key(i)

    def __delitem__(self, key: Any) -> None:
        self.clearitem(key)

    def clearitem(self, key: Any) -> None:
        key = self._key(key)
        leaf = self.Leaf()
        if lib().bpf_update_elem(self.map_fd, ctypes.byref(key), ctypes.byref(leaf), 0) < 0:
            raise Exception("Could not clear item")

    def clear(self) -> None:
        for k in self:
            self.clearitem(k)


class PerCpuArray(Array):
    """A per-CPU array (BCC's PerCpuArray): a value is an array of one element per possible CPU
    (elements of 4 bytes widened to 8, as the kernel copies them)."""

    def __init__(self, bpf: Compiled, name: str, info: dict[str, Any], fd: int) -> None:
        super().__init__(bpf, name, info, fd)
        self.sLeaf = self.Leaf
        self.total_cpu = possible_cpus()
        if ctypes.sizeof(self.sLeaf) % 8 == 0:
            self.Leaf = self.sLeaf * self.total_cpu
            self._widened = False
        elif self.sLeaf in (ctypes.c_uint, ctypes.c_int):
            self.Leaf = (ctypes.c_uint64 if self.sLeaf == ctypes.c_uint else ctypes.c_int64) * self.total_cpu
            self._widened = True
        else:
            raise IndexError("Leaf must be aligned to 8 bytes")

    def getvalue(self, key: Any) -> Any:
        raw = super().__getitem__(key)
        if not self._widened:
            return raw
        out = (self.sLeaf * self.total_cpu)()
        for i in range(self.total_cpu):
            out[i] = raw[i]
        return out

    def __getitem__(self, key: Any) -> Any:
        return self.getvalue(key)

    def sum(self, key: Any) -> Any:
        return self.sLeaf(sum(self.getvalue(key)))


class PerCpuHash(Table):
    """A per-CPU hash map (BCC's PerCpuHash): values as :class:`PerCpuArray`'s."""

    def __init__(self, bpf: Compiled, name: str, info: dict[str, Any], fd: int) -> None:
        super().__init__(bpf, name, info, fd)
        self.sLeaf = self.Leaf
        self.total_cpu = possible_cpus()
        if ctypes.sizeof(self.sLeaf) % 8:
            raise IndexError("Leaf must be aligned to 8 bytes")
        self.Leaf = self.sLeaf * self.total_cpu

    def sum(self, key: Any) -> Any:
        return self.sLeaf(sum(self[key]))


class StackTrace(Table):
    """A stack trace map (BCC's StackTrace): ``walk(id)`` gives a stack's addresses."""

    def walk(self, stack_id: int, resolve: Callable[[int], Any] | None = None) -> Iterator[Any]:
        stack = self[self.Key(stack_id)]
        for n in range(MAX_STACK_DEPTH):
            if self.flags & STACK_BUILD_ID:
                entry = stack.trace[n]
                if entry.status in (0, 2):
                    return
                addr = entry
            else:
                addr = stack.ip[n]
                if addr == 0:
                    return
            yield resolve(addr) if resolve else addr

    def clear(self) -> None:
        pass


def ring_callback(callback: Callable[[Any, Any, int], Any]) -> Callable[[Any, Any, int], int]:
    """``callback`` as libbpf calls it for each record of a ring buffer: what it returns as an int
    (0 when it returns nothing, or no int), as BCC does."""

    def ringbuf_cb(c: Any, data: Any, size: int) -> int:
        # as BCC: an exception is ctypes' to print (it cannot cross into C), the return 0
        ret = callback(c, data, size)
        if ret is None:
            # what the probes' callbacks return: int(None) raised and caught a TypeError for
            # each record, a third of a record's cost (process churn: hundreds a second)
            return 0
        try:
            return int(ret)
        except (TypeError, ValueError):
            return 0

    return ringbuf_cb


class RingBuf(Table):
    """A ring buffer (BCC's RingBuf): ``open_ring_buffer(callback)``, read by the module's
    ``ring_buffer_consume``."""

    def __len__(self) -> int:
        return 0

    def open_ring_buffer(self, callback: Callable[[Any, Any, int], Any], ctx: Any = None) -> None:
        fn = RingbufCallback(ring_callback(callback))
        self.bpf._open_ring_buffer(self.map_fd, fn, ctx)
        self._cbs[0] = fn


def make_table(bpf: Compiled, name: str, info: dict[str, Any], fd: int) -> Table:
    kind = int(info["type"])
    cls: type[Table] = {
        ARRAY: Array,
        PERCPU_ARRAY: PerCpuArray,
        PERCPU_HASH: PerCpuHash,
        LRU_PERCPU_HASH: PerCpuHash,
        STACK_TRACE: StackTrace,
        RINGBUF: RingBuf,
    }.get(kind, Table)
    return cls(bpf, name, info, fd)
