"""Which allocator a process uses, and how memtop's leaks probe traces it (its "lane").

The dynamic linker binds ``malloc`` to the first object in the global lookup scope that defines
it: the executable, then LD_PRELOAD's libraries, then the libraries they need, breadth first in
DT_NEEDED order (libc last). So the allocator is the first of these that defines both ``malloc``
and ``free``: a statically linked executable's own, a preloaded jemalloc or tcmalloc, one linked
in, else libc (glibc or musl). A library mapped but outside that scope (``dlopen`` with
RTLD_LOCAL, as a plugin that brings its own tcmalloc) serves only calls made through it: it is
never taken for the program's allocator. Only when the executable's DT_NEEDED cannot be read are
mapped allocator libraries tried before libc. A program whose heap is not malloc's (Go's runtime)
is named and refused, never "traced" with the libc probes that would see nothing.

Objects are looked up through the symbol helper (memtop.probes.symbols), which reads them through
``/proc/PID/root`` or ``/proc/PID/map_files``: a process in a container or a chroot resolves to the
files it maps.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from memtop.core.text import clean
from memtop.probes import symbols

_LIBC = re.compile(r"^libc(\.so(\.\d+)*|-[\d.]+\.so|\.musl-[^/]*\.so(\.\d+)*)$|^ld-musl-[^/]*\.so(\.\d+)*$")
#: allocator libraries by family (a library of another name that defines malloc is "other")
FAMILIES = (
    ("jemalloc", re.compile(r"^libjemalloc")),
    ("tcmalloc", re.compile(r"^libtcmalloc")),
    ("mimalloc", re.compile(r"^libmimalloc")),
)
#: what tells glibc from musl (a static glibc keeps _int_malloc in its symbol table), and a Go program
GLIBC_MARKS, GO_MARK = ("gnu_get_libc_version", "_int_malloc"), "runtime.mallocgc"
MAX_ENVIRON = 1 << 20


@dataclass(frozen=True)
class Allocator:
    """The object whose malloc/free the process calls, and how it is traced.

    ``lane``: glibc | musl | jemalloc | tcmalloc | mimalloc | other | glibc-static | static | go
    | none. ``path``, ``lo``-``hi``: the object as the process maps it and its executable
    mapping (mmap calls from inside it are the allocator's own). ``traceable`` False: ``why``."""

    lane: str
    path: str = ""
    lo: int = 0
    hi: int = 0
    traceable: bool = True
    why: str = ""
    #: with a prefix (jemalloc built with --with-jemalloc-prefix=je_): "je_"
    prefix: str = ""
    #: what the figures mean for this program, when it is not plain malloc (CPython's pymalloc)
    note: str = ""

    @property
    def static(self) -> bool:
        return self.lane in ("glibc-static", "static")

    @property
    def header_sizes(self) -> bool:
        """glibc's chunk headers hold the usable size: a return probe is enough."""
        return self.lane in ("glibc", "glibc-static")

    def describe(self) -> str:
        return f"{self.lane} ({os.path.basename(self.path)})" if self.path else self.lane


@dataclass(frozen=True)
class Mapped:
    path: str
    lo: int
    hi: int


def executable_mappings(pid: int, proc_root: str = "/proc") -> list[Mapped]:
    """The file-backed executable mappings of ``pid``, one per file (its first), in address order."""
    try:
        lines = Path(proc_root, str(pid), "maps").read_text("utf-8", "surrogateescape").splitlines()
    except OSError:
        return []
    out: dict[str, Mapped] = {}
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) < 6 or "x" not in parts[1]:
            continue
        path = parts[5].strip()
        if not path.startswith("/") or path.endswith(" (deleted)") or path in out:
            continue
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        out[path] = Mapped(path, lo, hi)
    return list(out.values())


def preloads(pid: int, proc_root: str = "/proc") -> list[str]:
    """The basenames in the process's LD_PRELOAD (as it started), in order."""
    try:
        with open(os.path.join(proc_root, str(pid), "environ"), "rb") as f:
            env = f.read(MAX_ENVIRON)
    except OSError:
        return []
    for item in env.split(b"\0"):
        if item.startswith(b"LD_PRELOAD="):
            text = item[len(b"LD_PRELOAD=") :].decode("utf-8", "replace")
            return [os.path.basename(p) for p in re.split(r"[ :]", text) if p]
    return []


def _exe_path(pid: int, proc_root: str) -> str:
    try:
        return os.readlink(os.path.join(proc_root, str(pid), "exe"))
    except OSError:
        return ""


def _runtime_note(maps: list[Mapped]) -> str:
    """What a language runtime does with malloc, when the process is one memtop knows."""
    if any(re.match(r"^(libpython3|python3)", os.path.basename(m.path)) for m in maps):
        return (
            "CPython: objects up to 512 B come from pymalloc's 256 KiB arenas (seen as the mmap "
            "that made each arena), larger ones from malloc"
        )
    return ""


#: objects of the global scope looked at, at most (the breadth-first walk of DT_NEEDED)
MAX_SCOPE = 256


def global_scope(pid: int, exe: str, maps: list[Mapped], preloaded: list[str]) -> list[Mapped] | None:
    """The mapped objects of the process's global lookup scope, in the dynamic linker's order:
    the executable, LD_PRELOAD's libraries, then breadth first what each needs (DT_NEEDED). A
    needed name is matched to a mapping by its path, its DT_SONAME (the file mapped is often the
    one the soname's symlink names: libtcmalloc.so.4 -> libtcmalloc.so.4.5.10) or its base
    name. None when the executable's DT_NEEDED cannot be read."""
    dyn: dict[str, tuple[list[str], str] | None] = {}
    for m in maps:
        try:
            dyn[m.path] = symbols.dynamic(pid, m.path)
        except symbols.SymbolError:
            dyn[m.path] = None
    by_name: dict[str, Mapped] = {}
    for m in maps:
        d = dyn[m.path]
        if d is not None and d[1]:
            by_name.setdefault(d[1], m)
    for m in maps:
        by_name.setdefault(os.path.basename(m.path), m)
    by_path = {m.path: m for m in maps}
    first = [m for m in maps if m.path == exe]
    first += [by_name[b] for b in preloaded if b in by_name and by_name[b] not in first]
    if not first or dyn[first[0].path] is None:
        return None
    scope: list[Mapped] = []
    queue = list(first)
    while queue and len(scope) < MAX_SCOPE:
        m = queue.pop(0)
        if m in scope:
            continue
        scope.append(m)
        for name in (dyn[m.path] or ([], ""))[0]:
            dep = by_path.get(name) if "/" in name else by_name.get(name)
            if dep is not None and dep not in scope and dep not in queue:
                queue.append(dep)
    return scope


def find_allocator(pid: int, proc_root: str = "/proc") -> Allocator:
    maps = executable_mappings(pid, proc_root)
    if not maps:
        return Allocator("none", traceable=False, why="process gone, or its maps cannot be read")
    exe = _exe_path(pid, proc_root)
    by_base = {os.path.basename(m.path): m for m in maps}
    preloaded = preloads(pid, proc_root)
    scope = global_scope(pid, exe, maps, preloaded)
    if scope is not None:
        # musl's libc is its loader, needed as "libc.so" but mapped as ld-musl-*.so.1: a libc is
        # in every dynamic program's global scope whatever it was needed as
        order: list[Mapped] = scope + [
            m for m in maps if m not in scope and _LIBC.match(os.path.basename(m.path))
        ]
    else:  # DT_NEEDED unreadable: any mapped allocator library, then libc, as a best guess
        order = [m for m in maps if m.path == exe]
        order += [by_base[b] for b in preloaded if b in by_base and by_base[b] not in order]
        order += [
            m for m in maps if m not in order and any(p.match(os.path.basename(m.path)) for _, p in FAMILIES)
        ]
        order += [m for m in maps if m not in order and _LIBC.match(os.path.basename(m.path))]
    found_lib: list[str] = []
    for m in order:
        base = os.path.basename(m.path)
        try:
            got = symbols.resolve_functions(
                pid, m.path, ["malloc", "free", "je_malloc", "je_free", *GLIBC_MARKS, GO_MARK]
            )
        except symbols.SymbolError as exc:
            found_lib.append(f"{clean(base, 80)}: {exc}")
            continue

        defined = {name for name, v in got.items() if isinstance(v, tuple)}
        has = defined.__contains__
        family = next((f for f, p in FAMILIES if p.match(base)), "")
        if m.path == exe and has(GO_MARK):
            return Allocator(
                "go",
                m.path,
                m.lo,
                m.hi,
                traceable=False,
                why="a Go program allocates with runtime.mallocgc on a garbage-collected heap: "
                "malloc/free probes would see none of it",
            )
        if has("malloc") and has("free"):
            if m.path == exe:
                lane = "glibc-static" if any(has(g) for g in GLIBC_MARKS) else "static"
            elif family:
                lane = family
            elif _LIBC.match(base):
                lane = "glibc" if any(has(g) for g in GLIBC_MARKS) else "musl"
            else:
                lane = "other"
            return Allocator(lane, m.path, m.lo, m.hi, note=_runtime_note(maps))
        if family and has("je_malloc") and has("je_free"):
            return Allocator(family, m.path, m.lo, m.hi, prefix="je_")
        if family:
            found_lib.append(f"{base} defines no malloc/free (nor je_malloc/je_free)")
    if exe and not any(_LIBC.match(os.path.basename(m.path)) for m in maps):
        return Allocator(
            "none",
            exe,
            traceable=False,
            why="a static binary without malloc symbols (stripped?): no allocator to probe",
        )
    why = "; ".join(found_lib) or "no mapped object defines malloc and free"
    return Allocator("none", traceable=False, why=why)
