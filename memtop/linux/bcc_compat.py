"""The one module that imports bcc (untyped). Everything BCC-shaped goes through here.

libbcc is not thread-safe: two ``BPF()`` compilations at once crash the process. Every program is
compiled through :func:`compile_text`, which holds one process-wide lock.

BCC puts the process's working directory first on clang's include path (``-I <cwd>``, before the
kernel's own directories), so any header name, quoted or angle, memtop's or one the kernel headers
include, would be read from wherever memtop was started (``/tmp``, a user's directory). A compile
therefore runs with the working directory set to the kernel header tree it compiles against
(checked by :mod:`memtop.linux.headers`; BCC itself changes into it for the compile), and restored
through a directory fd afterwards.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import operator
import os
import platform
import re
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memtop.core.errors import NoBcc, NoHeaders, NoPrivilege

COMPILE_LOCK = threading.Lock()
if TYPE_CHECKING:  # imported when the headers are looked for, after the first frame
    from memtop.linux import headers

_header_info: headers.HeaderInfo | None = None


def bcc_module() -> Any:
    try:
        import bcc
    except ImportError as exc:
        raise NoBcc(
            f"BCC's Python bindings are not importable ({exc})",
            "apt-get install python3-bpfcc, and run memtop from a venv made with "
            "--system-site-packages (make run does this)",
        ) from exc
    return bcc


def bcc_version() -> str:
    """BCC's version, "" when its bindings are not installed: read from the package's
    version.py, not by importing it. Importing bcc loads libbcc and with it LLVM (~14 MiB of
    RssAnon for its relocations, ~90 MiB mapped), which `memtop export --no-bpf` and `memtop
    doctor` would otherwise carry for their whole run for one version string."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("bcc")
    except (ImportError, ValueError):
        return ""
    if spec is None or not spec.submodule_search_locations:
        return ""
    for where in spec.submodule_search_locations:
        try:
            text = Path(where, "version.py").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        m = re.search(r"""__version__\s*=\s*['"]([^'"]{1,40})['"]""", text)
        if m:
            return m.group(1)
    return "unknown"


def have_privilege() -> bool:
    if os.geteuid() == 0:
        return True
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("CapEff:"):
            caps = int(line.split()[1], 16)
            cap_bpf, cap_perfmon, cap_sys_admin = 39, 38, 21
            if caps & (1 << cap_sys_admin):
                return True
            return bool(caps & (1 << cap_bpf)) and bool(caps & (1 << cap_perfmon))
    return False


def ensure_headers() -> headers.HeaderInfo:
    """Find headers once per process and point BCC at them."""
    global _header_info
    from memtop.linux import headers

    if _header_info is None:
        try:
            info = headers.find_headers()
        except OSError as exc:  # neither the cache nor a private directory could hold the tree
            raise NoHeaders(
                f"cannot build the stand-in header tree: {exc}",
                "check the space and permissions of /var/cache/memtop and $TMPDIR; see `memtop doctor`",
            ) from exc
        if info.kind == "missing":
            raise NoHeaders(f"no kernel headers for {info.release}", info.hint)
        _header_info = info
    headers.apply(_header_info)  # every time: nothing else may have repointed BCC meanwhile
    return _header_info


def header_info() -> headers.HeaderInfo | None:
    return _header_info


def check_can_load() -> None:
    """Raise the user-facing reason why BPF cannot load at all, if there is one."""
    if not have_privilege():
        raise NoPrivilege(
            "not running as root (BPF needs root or CAP_BPF+CAP_PERFMON)",
            "run: sudo memtop  (showing the /proc view meanwhile)",
        )
    if not bcc_available():
        bcc_module()  # raises NoBcc with the reason
    ensure_headers()


def bcc_available() -> bool:
    """BCC's bindings are installed (found, not imported: importing loads LLVM)."""
    import importlib.util

    try:
        return importlib.util.find_spec("bcc") is not None
    except (ImportError, ValueError):
        return False


def in_process() -> bool:
    """Compile in this process (MEMTOP_BPF_IN_PROCESS=1) rather than in
    memtop.linux.bpfchild's: for debugging BCC itself."""
    return os.environ.get("MEMTOP_BPF_IN_PROCESS", "") == "1"


def compile_text(text: str, cflags: list[str] | None = None) -> Any:
    """Compile and load ``text`` in a process of its own (memtop.linux.bpfout: this one never
    maps libbcc and LLVM), or here with MEMTOP_BPF_IN_PROCESS=1 (:func:`compile_text_here`).
    Either way a failure raises as BCC does, with clang's errors in the message and on fd 2."""
    if in_process():
        return compile_text_here(text, cflags)
    from memtop.linux import bpfout

    check_can_load()
    with COMPILE_LOCK:
        return bpfout.compile_elsewhere(text, list(cflags or []))


def compile_text_here(text: str, cflags: list[str] | None = None) -> Any:
    """Compile ``text`` (one or more bpf/*.bpf.c programs, see memtop.probes.unit) under the
    global compile lock. Nothing is attached: its TRACEPOINT_PROBEs carry no ``tracepoint__``
    names for BCC to auto-attach; each program attaches its own hooks.

    clang and libbcc print on fd 2, which under the TUI is the log file (memtop.ui.term_compat):
    what they print while compiling is caught, passed on to fd 2 afterwards, and on failure
    clang's errors are the exception's message, so the pane's status line says what is wrong."""
    check_can_load()
    bcc = bcc_module()
    info = ensure_headers()
    with COMPILE_LOCK, _working_dir(info.path or "/"):
        with _fd2_captured() as said:
            try:
                return bcc.BPF(text=text.encode(), cflags=list(cflags or []))
            except Exception as exc:
                failure = exc
        # a plain Exception, as BCC raises: memtop.probes.base.bcc_errors names the program
        raise Exception(_errors(said) or str(failure)) from failure


def _errors(diagnostics: bytearray) -> str:
    """clang's first few ``error:`` lines, printable."""
    from memtop.core.text import clean

    lines = [ln.strip() for ln in diagnostics.decode("utf-8", "replace").splitlines() if "error:" in ln]
    return "; ".join(clean(ln, 300) for ln in lines[:3])


@contextlib.contextmanager
def _fd2_captured(limit: int = 1 << 20) -> Iterator[bytearray]:
    """fd 2 into a memory file for the duration; what was written is yielded (filled in on the
    way out) and then written to fd 2 as it was."""
    said = bytearray()
    try:
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass
    try:
        saved = os.dup(2)
    except OSError:  # fd 2 closed: LLVM aborts on a failed write there (rc 134), so it gets ours
        saved = -1
    tmp = os.memfd_create("memtop-clang", os.MFD_CLOEXEC)
    os.dup2(tmp, 2)
    try:
        yield said
    finally:
        size = os.lseek(tmp, 0, os.SEEK_END)
        said += os.pread(tmp, min(size, limit), 0)
        if saved >= 0:
            os.dup2(saved, 2)
            os.close(saved)
        else:  # closed it was (and tmp may be fd 2 itself)
            os.close(2)
        if tmp != 2:
            os.close(tmp)
        out = memoryview(bytes(said) if saved >= 0 else b"")
        while out:
            try:
                out = out[os.write(2, out) :]
            except OSError:
                break


@contextmanager
def _working_dir(path: str) -> Iterator[None]:
    """Run with ``path`` as the working directory, then go back to the one we had, by its fd
    (the path we came from may have been renamed or replaced meanwhile)."""
    try:
        back: int | None = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        back = None
    try:
        there = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fchdir(there)
        finally:
            os.close(there)
        yield
    finally:
        if back is None:
            os.chdir("/")
        else:
            os.fchdir(back)
            os.close(back)


def function_names(bpf: Any) -> list[str]:
    """Every function compiled into the module (loaded or not)."""
    if getattr(bpf, "module", None) is None:  # compiled elsewhere: it sent the list
        return list(bpf.function_list)
    bcc = bcc_module()
    lib = bcc.libbcc.lib
    with COMPILE_LOCK:
        names = [lib.bpf_function_name(bpf.module, i) for i in range(lib.bpf_num_functions(bpf.module))]
    return [n.decode() if isinstance(n, bytes) else str(n) for n in names]


def attach_tracepoint_fd(bpf: Any, fn_name: str, tp: str) -> int:
    """Load ``fn_name`` and attach it to ``tp`` ("category:event"); return the perf event fd that
    holds the attachment (close it with :func:`close_perf_event_fd`). Unlike
    BPF.attach_tracepoint, which keeps one fd per tracepoint name, two functions of one module
    may hook the same tracepoint."""
    from memtop.linux import bpfout

    category, _, event = tp.partition(":")
    with COMPILE_LOCK:
        fn = bpf.load_func(fn_name.encode(), bpfout.TRACEPOINT)
        fd = int(bpfout.lib().bpf_attach_tracepoint(fn.fd, category.encode(), event.encode()))
    if fd < 0:
        raise OSError(-fd if fd < -1 else 0, f"cannot attach {fn_name} to tracepoint {tp}")
    return fd


def attach_raw_tracepoint_fd(bpf: Any, fn_name: str, event: str) -> int:
    """Load ``fn_name`` as a raw tracepoint program and attach it to ``event``; return the fd that
    holds the attachment (closing it detaches)."""
    from memtop.linux import bpfout

    with COMPILE_LOCK:
        fn = bpf.load_func(fn_name.encode(), bpfout.RAW_TRACEPOINT)
        fd = int(bpfout.lib().bpf_attach_raw_tracepoint(fn.fd, event.encode()))
    if fd < 0:
        raise OSError(-fd if fd < -1 else 0, f"cannot attach {fn_name} to raw tracepoint {event}")
    return fd


def online_cpus() -> list[int]:
    from memtop.linux import bpfout

    return bpfout.cpu_list("online")


def cleanup(bpf: Any) -> None:
    """Detach everything and close the program's fds (idempotent)."""
    with COMPILE_LOCK:
        try:
            bpf.cleanup()
        except Exception:  # noqa: BLE001 - best-effort on every exit path
            pass


# -- per-thread perf events (process drill-in) ---------------------------------------------------------


def perf_sw_fault_ids() -> tuple[int, int, int]:
    """(PerfType.SOFTWARE, PAGE_FAULT_MIN, PAGE_FAULT_MAJ)."""
    # include/uapi/linux/perf_event.h: PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN/MAJ
    return 1, 5, 6


def attach_perf_event_fd(
    bpf: Any, fn_name: str, ev_type: int, ev_config: int, sample_period: int, pid: int, cpu: int = -1
) -> int:
    """Open one perf event for (pid, cpu) running ``fn_name``; return its fd (close with
    :func:`close_perf_event_fd`). Unlike BPF.attach_perf_event, cpu=-1 means "any cpu" (one event
    following the thread), not one event per cpu, and many threads can share one program."""
    from memtop.linux import bpfout

    with COMPILE_LOCK:
        fn = bpf.load_func(fn_name.encode(), bpfout.PERF_EVENT)
        fd = int(
            bpfout.lib().bpf_attach_perf_event(fn.fd, ev_type, ev_config, sample_period, 0, pid, cpu, -1)
        )
    return fd


def perf_prog_fd(bpf: Any, fn_name: str) -> int:
    """The fd of ``fn_name`` loaded as a perf-event program (loaded once, then cached by BCC)."""
    from memtop.linux import bpfout

    with COMPILE_LOCK:
        return int(bpf.load_func(fn_name.encode(), bpfout.PERF_EVENT).fd)


# perf_event_open(2) numbers by machine (the syscall has no libc wrapper)
_PERF_EVENT_OPEN_NR = {
    "x86_64": 298,
    "aarch64": 241,
    "riscv64": 241,
    "loongarch64": 241,
    "ppc64le": 319,
    "ppc64": 319,
    "s390x": 331,
    "i686": 336,
    "armv7l": 364,
}
_PERF_FLAG_FD_CLOEXEC = 8
_PERF_EVENT_IOC_ENABLE = 0x2400  # _IO('$', 0)
_PERF_EVENT_IOC_SET_BPF = 0x40042408  # _IOW('$', 8, __u32)
_ATTR_DISABLED = 1  # bit 0 of the flags word: opened stopped, enabled once the program is set


class _PerfEventAttr(ctypes.Structure):
    """struct perf_event_attr up to config2 (PERF_ATTR_SIZE_VER1, 72 bytes); the kernel takes the
    size it is given and zero for every later field."""

    _fields_ = [
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64),
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
        ("wakeup_events", ctypes.c_uint32),
        ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64),
        ("config2", ctypes.c_uint64),
    ]


_syscall: Any = None


def _perf_event_open(attr: _PerfEventAttr, pid: int, cpu: int) -> int:
    global _syscall
    nr = _PERF_EVENT_OPEN_NR.get(platform.machine())
    if nr is None:
        raise OSError(0, f"perf_event_open: unknown syscall number on {platform.machine()}")
    if _syscall is None:
        fn = ctypes.CDLL(None, use_errno=True).syscall
        fn.restype = ctypes.c_long
        fn.argtypes = [
            ctypes.c_long,
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_ulong,
        ]
        _syscall = fn
    fd = int(_syscall(nr, ctypes.byref(attr), pid, cpu, -1, _PERF_FLAG_FD_CLOEXEC))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return fd


def attach_thread_perf_event(prog_fd: int, ev_type: int, ev_config: int, tid: int) -> int:
    """Open a counting perf event on thread ``tid`` (any cpu, every event sampled) running the
    program ``prog_fd`` (from :func:`perf_prog_fd`); return its fd (close it with
    :func:`close_perf_event_fd`). A failure raises OSError with the errno (EMFILE at the fd
    limit, ESRCH when the thread is gone) and prints nothing: libbcc's bpf_attach_perf_event
    writes a line on stderr for every failed open, over the TUI. The event is not inherited
    (libbcc sets attr.inherit for a pid): a thread the target starts is picked up by the probe's
    rescan, and an inherited event beside that one would count its faults twice."""
    attr = _PerfEventAttr()
    attr.type = ev_type
    attr.size = ctypes.sizeof(_PerfEventAttr)
    attr.config = ev_config
    attr.sample_period = 1
    attr.flags = _ATTR_DISABLED
    fd = _perf_event_open(attr, tid, -1)
    try:
        fcntl.ioctl(fd, _PERF_EVENT_IOC_SET_BPF, prog_fd)
        fcntl.ioctl(fd, _PERF_EVENT_IOC_ENABLE, 0)
    except OSError:
        os.close(fd)
        raise
    return fd


def close_perf_event_fd(fd: int) -> None:
    from memtop.linux import bpfout

    with COMPILE_LOCK:
        bpfout.lib().bpf_close_perf_event_fd(fd)


# -- per-pid uprobes at chosen offsets and raw map dumps (leaks) ---------------------------------


#: held while a uprobe is attached; :func:`stop_attaching_uprobes` closes the gate for good
_UPROBE_GATE = threading.Lock()
_uprobes_stopped = False


def stop_attaching_uprobes(timeout_s: float = 1.0) -> None:
    """No uprobe is attached from now on (memtop is exiting). A uprobe's perf event closed by the
    kernel as the process dies (the fd still open at exit) fails to take its breakpoint out of
    the target ("failed to unregister, leaking uprobe"): every uprobe must be closed while the
    process lives, so none may appear once its perf events are being released."""
    global _uprobes_stopped
    got = _UPROBE_GATE.acquire(timeout=timeout_s)  # an attach under way finishes first
    _uprobes_stopped = True
    if got:
        _UPROBE_GATE.release()


def load_uprobe_programs(bpf: Any, names: Sequence[str]) -> None:
    """Load (verify) the uprobe programs ``names`` now, so that attaching them later is quick."""
    from memtop.linux import bpfout

    with COMPILE_LOCK:
        for name in names:
            bpf.load_func(name.encode(), bpfout.KPROBE)


def attach_uprobe_at(bpf: Any, fn_name: str, path: str, offset: int, pid: int, retprobe: bool) -> str:
    """Attach ``fn_name`` as a uprobe (or uretprobe) at file ``offset`` of ``path`` for ``pid``
    only; return the event name for :func:`detach_uprobe_event` (``cleanup`` detaches it too)."""
    from memtop.linux import bpfout

    with _UPROBE_GATE, COMPILE_LOCK:
        if _uprobes_stopped:
            raise OSError("memtop is exiting: no more uprobes")
        fn = bpf.load_func(fn_name.encode(), bpfout.KPROBE)
        ev_name = bpf._get_uprobe_evname(b"r" if retprobe else b"p", path.encode(), offset, pid)
        # ref_ctr_offset (the 7th argument) is 0 said out loud: BCC's Python declares six, so its
        # own calls left whatever the stack held there, and the kernel refuses (EINVAL,
        # "ref_ctr_offset mismatch" in dmesg) a probe at an address another tracer probes with
        # another reference counter: a second memtop, bpftrace or libbpf (which all pass 0)
        fd = bpfout.lib().bpf_attach_uprobe(
            fn.fd, 1 if retprobe else 0, ev_name, path.encode(), offset, pid, 0
        )
        if fd < 0:
            raise OSError(f"attaching {'uretprobe' if retprobe else 'uprobe'} failed (fd {fd})")
        bpf._add_uprobe_fd(ev_name, fd)
    return str(ev_name.decode())


def detach_uprobe_event(bpf: Any, ev_name: str) -> None:
    with COMPILE_LOCK:
        try:
            bpf.detach_uprobe_event(ev_name.encode())
        except Exception:  # noqa: BLE001 - already gone: detaching is idempotent
            pass


def _batch_read(fn: Any, what: str, t: Any, keys: Any, values: Any) -> int:
    """Fill ``keys``/``values`` from map ``t`` with a batch call (``fn``: libbcc's
    bpf_lookup_batch or bpf_lookup_and_delete_batch), a few syscalls however many entries;
    returns how many entries were read."""
    import ctypes as ct
    import errno

    ksz, vsz = ct.sizeof(t.Key), ct.sizeof(t.Leaf)
    cap = int(t.max_entries)
    in_batch, out_batch, cnt = ct.c_uint32(0), ct.c_uint32(0), ct.c_uint32(0)
    total = 0
    while total < cap:
        cnt.value = cap - total
        res = fn(
            t.map_fd,
            ct.byref(in_batch) if total else None,
            ct.byref(out_batch),
            ct.byref(keys, ksz * total),
            ct.byref(values, vsz * total),
            ct.byref(cnt),
        )
        err = ct.get_errno()
        total += cnt.value
        if res != 0:
            if err not in (errno.ENOENT, 0):
                raise OSError(err, f"{what}: {os.strerror(err)}")
            break
        if cnt.value == 0:
            break
        in_batch.value = out_batch.value
    return total


def map_dump(bpf: Any, table: str) -> tuple[bytes, bytes, int, int, int]:
    """All entries of a hash map in a few BPF_MAP_LOOKUP_BATCH calls (no per-entry syscalls):
    (keys, values, count, key_size, value_size) as raw bytes."""
    import ctypes as ct

    from memtop.linux import bpfout

    t = bpf[table]
    ksz, vsz = ct.sizeof(t.Key), ct.sizeof(t.Leaf)
    keys = ct.create_string_buffer(ksz * int(t.max_entries))
    values = ct.create_string_buffer(vsz * int(t.max_entries))
    total = _batch_read(bpfout.lib().bpf_lookup_batch, f"BPF_MAP_LOOKUP_BATCH on {table}", t, keys, values)
    return keys.raw[: ksz * total], values.raw[: vsz * total], total, ksz, vsz


def percpu_sums(bpf: Any, table: str) -> list[int]:
    """Every slot of a per-CPU array of u64 counters, summed over the CPUs (a plain array of u64:
    its values), in one BPF_MAP_LOOKUP_BATCH call (bcc's getvalue is a syscall and a ctypes array
    per slot: a reclaim histogram of 128 slots read slot by slot was most of the vmscan probe's
    poll). Index i of the list is slot i. OSError where the kernel cannot batch (before 5.6)."""
    (sums,), got, n = _percpu_columns(bpf, table, 1)
    return _by_slot(sums, got, n, 0)


def percpu_rows(bpf: Any, table: str, fields: int) -> list[tuple[int, ...]]:
    """Every slot of a per-CPU array of structs of ``fields`` u64 fields (the vmscan probe's
    origins: scanned, reclaimed, events), each field summed over the CPUs, in one
    BPF_MAP_LOOKUP_BATCH call, as :func:`percpu_sums` reads counters. Index i of the list is
    slot i. OSError where the kernel cannot batch."""
    columns, got, n = _percpu_columns(bpf, table, fields)
    return _by_slot(list(zip(*columns, strict=True)), got, n, (0,) * fields)


def _percpu_columns(bpf: Any, table: str, fields: int) -> tuple[list[list[int]], list[int], int]:
    """One batched lookup of a per-CPU array (a plain one: one CPU) whose slots are ``fields``
    u64s: each field's values summed over the CPUs, a list per field in the order the kernel
    handed the slots, those slots' indexes, and the array's size. The buffers are the table's
    own, kept from call to call (a table is read by one poll at a time), and are read as
    memoryviews: a ctypes array's elements one by one, and a Python sum per slot, were ~5x the
    cost of the lookup itself for a 384-slot histogram."""
    import ctypes as ct

    from memtop.linux import bpfout

    t = bpf[table]
    n = int(t.max_entries)
    width = 8 * fields
    ncpu = ct.sizeof(t.Leaf) // width  # bcc's per-CPU Leaf: a slot's struct per possible CPU
    if (
        ct.sizeof(t.Leaf) != width * ncpu
        or ct.sizeof(t.Key) != 4
        # a struct's size, for rows (bcc widens a per-CPU u32 counter's Leaf to u64s)
        or (fields > 1 and ct.sizeof(getattr(t, "sLeaf", t.Leaf)) != width)
    ):
        raise TypeError(f"{table} is not a per-CPU array of {fields} u64 fields")
    # kept on the table itself: BCC's own tables (in the compiler's process, and tests) are
    # mappings, which cannot key a dict
    bufs = getattr(t, PERCPU_BUFFERS, None)
    if bufs is None:
        bufs = ((ct.c_uint32 * n)(), (ct.c_uint64 * (n * ncpu * fields))())
        setattr(t, PERCPU_BUFFERS, bufs)
    keys, values = bufs
    total = _batch_read(bpfout.lib().bpf_lookup_batch, f"BPF_MAP_LOOKUP_BATCH on {table}", t, keys, values)
    # slot-major, then CPU, then field: field f of every (slot, CPU) is every fields-th value
    flat = memoryview(values).cast("B").cast("Q")[: total * ncpu * fields].tolist()
    columns = []
    for f in range(fields):
        col = flat[f::fields] if fields > 1 else flat
        sums = col[0::ncpu]
        for cpu in range(1, ncpu):
            sums = list(map(operator.add, sums, col[cpu::ncpu]))
        columns.append(sums)
    return columns, memoryview(keys).cast("B").cast("I")[:total].tolist(), n


def _by_slot(values: list[Any], got: list[int], n: int, zero: Any) -> list[Any]:
    """``values`` of the slots ``got`` placed at their indexes in a list of ``n`` (``zero`` for
    a slot not handed)."""
    if got == list(range(len(got))):  # an array hands its slots in order
        return values + [zero] * (n - len(got))
    out = [zero] * n
    for slot, value in zip(got, values, strict=True):
        out[slot] = value
    return out


#: the attribute of a table holding the key and value buffers the per-CPU readers read into
PERCPU_BUFFERS = "_memtop_percpu_buffers"


class PerCpuCounters:
    """A small per-CPU array of u64 counters read by a call whose map, key, buffers and library
    function are bound once: the read a poll makes first and, on an idle machine, only (a
    probe's generation, memtop.probes.base.Generation). A poll runs after its thread slept a
    second, when every line of Python and every cache is cold: there :func:`percpu_sums`'s
    checks and imports cost twice its lookup (~150 µs of thread CPU against ~60 for the bound
    batch, ~50 for one slot's lookup). TypeError for a table that is not such an array; the
    reads raise OSError where the kernel refuses them (a caller falls back to the generic
    readers)."""

    def __init__(self, bpf: Any, table: str) -> None:
        import ctypes as ct

        from memtop.linux import bpfout

        t = bpf[table]
        n = int(t.max_entries)
        ncpu = ct.sizeof(t.Leaf) // 8
        one = getattr(t, "sLeaf", None)  # bcc's per-CPU table: one CPU's value
        if (
            ct.sizeof(t.Leaf) != 8 * ncpu
            or ct.sizeof(t.Key) != 4
            or n < 1
            or (one is not None and ct.sizeof(one) != 8)
        ):
            raise TypeError(f"{table} is not a per-CPU array of u64 counters")
        self.table, self.n, self.ncpu = table, n, ncpu
        self._fd = int(t.map_fd)
        lib = bpfout.lib()
        self._lookup, self._batch = lib.bpf_lookup_elem, lib.bpf_lookup_batch
        self._get_errno = ct.get_errno
        self._key = ct.c_uint32(0)
        self._key_ref = ct.byref(self._key)
        self._value = (ct.c_uint64 * ncpu)()
        self._keys = (ct.c_uint32 * n)()
        self._values = (ct.c_uint64 * (n * ncpu))()
        self._flat = memoryview(self._values).cast("B").cast("Q")
        self._out = ct.c_uint32(0)
        self._out_ref = ct.byref(self._out)
        self._count = ct.c_uint32(0)
        self._count_ref = ct.byref(self._count)

    def slot(self, i: int) -> int:
        """Slot ``i`` summed over the CPUs: one BPF_MAP_LOOKUP_ELEM."""
        self._key.value = i
        if self._lookup(self._fd, self._key_ref, self._value) != 0:
            err = self._get_errno()
            raise OSError(err, f"BPF_MAP_LOOKUP_ELEM on {self.table}: {os.strerror(err)}")
        return sum(self._value)

    def slots(self) -> list[int]:
        """Every slot summed over the CPUs, in order: one BPF_MAP_LOOKUP_BATCH (an array hands
        all its slots, in order, to a call that asks for as many)."""
        import errno

        n, ncpu = self.n, self.ncpu
        self._count.value = n
        res = self._batch(self._fd, None, self._out_ref, self._keys, self._values, self._count_ref)
        if res != 0:
            err = self._get_errno()
            if err not in (errno.ENOENT, 0):
                raise OSError(err, f"BPF_MAP_LOOKUP_BATCH on {self.table}: {os.strerror(err)}")
        if self._count.value != n or self._keys[n - 1] != n - 1:
            raise OSError(errno.EIO, f"BPF_MAP_LOOKUP_BATCH on {self.table}: not every slot in order")
        flat = self._flat.tolist()
        if ncpu == 1:
            return flat
        return [sum(flat[i : i + ncpu]) for i in range(0, n * ncpu, ncpu)]


def map_drain(bpf: Any, table: str) -> list[tuple[Any, Any]]:
    """Look up and delete every entry of a hash map in a few BPF_MAP_LOOKUP_AND_DELETE_BATCH calls
    (each entry is copied and removed atomically, so no increment is lost between read and
    delete); returns (Key, Leaf) ctypes pairs."""
    from memtop.linux import bpfout

    t = bpf[table]
    keys = (t.Key * int(t.max_entries))()
    values = (t.Leaf * int(t.max_entries))()
    fn = bpfout.lib().bpf_lookup_and_delete_batch
    total = _batch_read(fn, f"BPF_MAP_LOOKUP_AND_DELETE_BATCH on {table}", t, keys, values)
    return [(keys[i], values[i]) for i in range(total)]


# -- uprobe_multi links (leaks on a budget) ------------------------------------------------------

#: BPF_TRACE_UPROBE_MULTI (include/uapi/linux/bpf.h's enum bpf_attach_type, Linux 6.6+): the
#: expected attach type a program needs to be attached through a uprobe_multi link
UPROBE_MULTI = 48
#: BPF_LINK_CREATE, BPF_F_UPROBE_MULTI_RETURN, and the bpf(2) syscall's number on x86-64
_BPF_LINK_CREATE = 28
_BPF_F_UPROBE_MULTI_RETURN = 1
_SYS_BPF = {"x86_64": 321, "aarch64": 280}
#: union bpf_attr is zero-padded to this size (the kernel checks that what it does not know is 0)
_ATTR_SIZE = 128
_libc: Any = None


def load_uprobe_multi(bpf: Any, name: str) -> int:
    """The fd of ``name`` loaded to be attached by :func:`attach_uprobe_multi` (its own copy of
    the program: one loaded for perf-event uprobes is refused by a uprobe_multi link). Raises
    when it could not be loaded (a kernel before 6.6, a compile without UPROBE_MULTI)."""
    if getattr(bpf, "module", None) is None:  # compiled in the compiler's process
        return int(bpf.load_func(name.encode(), UPROBE_MULTI_KEY).fd)
    with COMPILE_LOCK:
        key = name.encode()
        if key + b"#multi" in bpf.funcs:
            return int(bpf.funcs[key + b"#multi"].fd)
        have = bpf.funcs.pop(key, None)  # BCC keeps one program per name: this copy beside it
        try:
            fn = bpf.load_func(key, bcc_module().BPF.KPROBE, None, UPROBE_MULTI)
            multi = bpf.funcs.pop(key)
        finally:
            if have is not None:
                bpf.funcs[key] = have
        bpf.funcs[key + b"#multi"] = multi  # closed with the module
        return int(fn.fd)


#: the program type key under which the compiler's process reports a program's uprobe_multi
#: copy (memtop.linux.bpfout.Compiled.load_func): BPF_PROG_TYPE_KPROBE with the attach type
UPROBE_MULTI_KEY = 2 | UPROBE_MULTI << 8


def attach_uprobe_multi(prog_fd: int, path: str, offsets: Sequence[int], pid: int, retprobe: bool) -> int:
    """One uprobe_multi link (Linux 6.6+): the program at every file offset of ``path``, as
    uprobes or uretprobes, for ``pid`` only (the kernel writes breakpoints into its address space
    alone). Returns the link's fd: closing it takes every breakpoint out at once and waits for
    one grace period, where a perf-event uprobe each waits for its own under the kernel's
    event_mutex. Raises OSError when the kernel refuses."""
    global _libc
    nr = _SYS_BPF.get(platform.machine())
    if nr is None:
        raise OSError(f"uprobe_multi links: bpf(2) is not known on {platform.machine()}")
    with _UPROBE_GATE:
        if _uprobes_stopped:
            raise OSError("memtop is exiting: no more uprobes")
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
            _libc.syscall.restype = ctypes.c_long
        cpath = ctypes.create_string_buffer(os.fsencode(path))
        offs = (ctypes.c_uint64 * len(offsets))(*offsets)
        attr = ctypes.create_string_buffer(_ATTR_SIZE)
        # link_create: prog_fd, target_fd, attach_type, flags; then uprobe_multi's path,
        # offsets, ref_ctr_offsets, cookies (none), cnt, flags, pid
        struct_fields = (prog_fd, 0, UPROBE_MULTI, 0)
        ctypes.memmove(attr, (ctypes.c_uint32 * 4)(*struct_fields), 16)
        ctypes.memmove(
            ctypes.byref(attr, 16),
            (ctypes.c_uint64 * 4)(ctypes.addressof(cpath), ctypes.addressof(offs), 0, 0),
            32,
        )
        tail = (len(offsets), _BPF_F_UPROBE_MULTI_RETURN if retprobe else 0, pid)
        ctypes.memmove(ctypes.byref(attr, 48), (ctypes.c_uint32 * 3)(*tail), 12)
        fd = int(
            _libc.syscall(ctypes.c_long(nr), ctypes.c_long(_BPF_LINK_CREATE), attr, ctypes.c_long(_ATTR_SIZE))
        )
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"uprobe_multi link: {os.strerror(err)}")
        return fd
