"""Several probes' programs compiled as one BPF module, each program still loaded, attached and
detached on its own.

Each ``BPF()`` has a fixed libbcc cost however small the program: it re-reads all of
/proc/kallsyms (to choose between bpf_probe_read and bpf_probe_read_kernel) and re-parses the
kernel headers, twice. The default programs are small, so that fixed cost was most of the time to
attach them (docs/performance.md has the figures). A program stays the unit of failure and of detach:

- a unit that does not compile is given up and each program is compiled alone
  (:func:`memtop.probes.base.load_together`), so one broken program fails only its own pane;
- a program's functions are loaded (verified) and attached by its own probe, so a rejected function
  fails only that probe;
- each program's tracepoints and perf events are attached through its :class:`ProgramView` and
  closed by it; the module's maps go when the last program sharing it lets go.

The programs' text is included verbatim. Per section the builder defines the section's ``-D``
flags before it and undefines them, and every macro the section defines, after it, so one
program's configuration never leaks into the next. Globals are not renamed (BCC refuses map
methods reached through a macro): programs that share a unit must not declare the same global, so
the default programs name their common maps after themselves (``vmscan_events``); the builder
refuses overlapping sections (then each compiles alone) and a test keeps the default set disjoint.

No ``#include "..."`` reaches clang: BCC searches the process's working directory first for every
include, so the builder pastes each quoted include of a section in place (with ``#line`` markers
for clang's messages), from memtop's own resolved ``bpf/`` directory only, recursively, and refuses
any other (a path, a header that is not there, a computed ``#include MACRO``, ``include_next``).
Angle includes are the kernel's and stay. A pasted header's macros, like any header's, outlive its
section (so its include guard holds for the next section that includes it).

``TRACEPOINT_PROBE(category, event)`` is redefined per section to name the function
``<owner>__tp__<category>__<event>``: two programs may hook the same tracepoint (vmscan and oom
both watch reclaim begins), and BCC's auto-attach, which would attach every ``tracepoint__``
function of the module at once, is left with nothing to do. BCC declares a tracepoint's argument
struct in front of each function taking it, so a tracepoint's second user takes it through a
typedef instead of declaring it again.
"""

from __future__ import annotations

import os
import re
import stat
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memtop.core.errors import ProbeError
from memtop.linux import bcc_compat
from memtop.runtime import resources

_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)", re.M)
_TRACEPOINT = re.compile(r"\bTRACEPOINT_PROBE\(\s*(\w+)\s*,\s*(\w+)\s*\)")
_RAW_TRACEPOINT = re.compile(r"\bRAW_TRACEPOINT_PROBE\(\s*(\w+)\s*\)")
_MAP = re.compile(r'^\s*BPF_\w+\(\s*(?:"[^"]*"\s*,\s*[^,]+,\s*[^,]+,\s*)?(\w+)', re.M)
_STRUCT = re.compile(r"^\s*(?:struct|union|enum)\s+(\w+)\s*\{", re.M)
# a function definition from the start of a line: [static] [inline] type name(args) {, the name
# possibly on the next line (kernel style)
_FUNCTION = re.compile(r"^[A-Za-z_][\w\s*]*?\b(\w+)\s*\([^;{]*\)\s*\{", re.M)
_OWNER = re.compile(r"^[A-Za-z_]\w*$")
# a preprocessor include directive, whatever its spelling (the argument is judged apart)
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*(include|include_next|import)\b(.*)$", re.M)
_QUOTED = re.compile(r'"([A-Za-z0-9_][A-Za-z0-9_.-]*)"\s*(?://.*|/\*.*)?')
_MAX_INCLUDE_DEPTH = 8


@dataclass(frozen=True)
class Section:
    """One program as it goes into a unit: its owner (the probe's name), text and cflags."""

    owner: str
    text: str
    cflags: tuple[str, ...] = ()
    #: where the text came from (error messages)
    origin: str = ""

    @classmethod
    def from_file(cls, owner: str, path: Path, cflags: Sequence[str] = ()) -> Section:
        """``path``'s text; its quoted includes (bpf/perf_ctx.h) are pasted in by :func:`build`."""
        path = Path(path).resolve()
        return cls(owner, path.read_text(), tuple(cflags), path.name)

    def defines(self) -> list[tuple[str, str]]:
        """The section's ``-DNAME[=value]`` flags, in order."""
        out = []
        for flag in self.cflags:
            if flag.startswith("-D"):
                name, _, value = flag[2:].partition("=")
                out.append((name, value))
        return out

    def other_flags(self) -> list[str]:
        return [f for f in self.cflags if not f.startswith("-D")]

    def tracepoints(self) -> list[tuple[str, str]]:
        """(category, event) of every TRACEPOINT_PROBE in the text (compiled in or not)."""
        return _TRACEPOINT.findall(self.text)

    def raw_tracepoints(self) -> list[str]:
        """The event of every RAW_TRACEPOINT_PROBE in the text (compiled in or not)."""
        return _RAW_TRACEPOINT.findall(self.text)

    def globals(self) -> set[str]:
        """Names the text declares at file scope: maps, struct/union/enum tags, functions."""
        names = set(_MAP.findall(self.text)) | set(_STRUCT.findall(self.text))
        names |= {
            n for n in _FUNCTION.findall(self.text) if n not in ("TRACEPOINT_PROBE", "RAW_TRACEPOINT_PROBE")
        }
        return names


def expand_includes(text: str, origin: str, depth: int = 0) -> str:
    """``text`` with every ``#include "name"`` replaced by bpf/<name>'s own text (expanded in turn),
    between ``#line`` markers. ProbeError for any include clang would look up in a directory
    memtop does not choose: a quoted name that is not a plain file of bpf/, a computed include,
    a quoted include_next or import."""
    if depth > _MAX_INCLUDE_DEPTH:
        raise ProbeError(f"{origin}: quoted includes nested too deep", "")
    out: list[str] = []
    pos = 0
    for m in _INCLUDE.finditer(text):
        directive, arg = m.group(1), m.group(2).strip()
        if arg.startswith("<"):
            continue  # the kernel's: found in the kernel header tree
        quoted = _QUOTED.fullmatch(arg)
        if directive != "include" or quoted is None:
            raise ProbeError(
                f"{origin}: refusing `#{directive} {arg}`",
                'a BPF program may include only <kernel headers> and "files" of memtop\'s bpf/',
            )
        line = text.count("\n", 0, m.start()) + 1
        header = _own_header(quoted.group(1), origin)
        body = expand_includes(header, quoted.group(1), depth + 1)
        out += [text[pos : m.start()], f'#line 1 "{quoted.group(1)}"\n', body]
        if not body.endswith("\n"):
            out.append("\n")
        out.append(f'#line {line + 1} "{origin}"')
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)


def _own_header(name: str, origin: str) -> str:
    """The text of bpf/``name``: a regular file (not a link) of memtop's own bpf/ directory."""
    where = resources.bpf_dir().resolve()
    try:
        dir_fd = os.open(where, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        raise ProbeError(f'{origin}: cannot include "{name}" from {where}: {exc.strerror}', "") from exc
    with os.fdopen(fd, encoding="utf-8") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ProbeError(f'{origin}: "{name}" in {where} is not a file', "")
        return f.read()


def tp_function(owner: str, category: str, event: str) -> str:
    return f"{owner}__tp__{category}__{event}"


def raw_tp_function(owner: str, event: str) -> str:
    return f"{owner}__raw__{event}"


@dataclass(frozen=True)
class Built:
    text: str
    cflags: list[str]
    #: owner -> [(function name, "category:event")]
    tracepoints: dict[str, list[tuple[str, str]]]
    #: owner -> [(function name, "event")] of its raw tracepoints
    raw_tracepoints: dict[str, list[tuple[str, str]]]


def build(sections: Sequence[Section]) -> Built:
    """One C text for ``sections`` (see the module docstring). Raises ProbeError when two sections
    declare the same global or share an owner."""
    owners = [s.owner for s in sections]
    bad = [o for o in owners if not _OWNER.match(o)]
    if bad or len(set(owners)) != len(owners):
        raise ProbeError(f"bad or repeated program owners: {owners}", "")
    seen: dict[str, str] = {}
    for s in sections:
        for name in s.globals():
            if name in seen:
                raise ProbeError(
                    f"{s.origin or s.owner} and {seen[name]} both declare {name!r}",
                    "programs sharing a unit need distinct global names",
                )
            seen[name] = s.origin or s.owner
    lines = [
        "#undef TRACEPOINT_PROBE",
        # pasted, never expanded: a category or event that happens to be a macro stays a name
        "#define TRACEPOINT_PROBE(c, e) int MEMTOP_TP_FN(c##__##e)(MEMTOP_TP_ARG_##c##__##e *args)",
        "#undef RAW_TRACEPOINT_PROBE",
        "#define RAW_TRACEPOINT_PROBE(e) int MEMTOP_RAW_FN(e)(struct bpf_raw_tracepoint_args *ctx)",
    ]
    hooked: set[tuple[str, str]] = set()
    tracepoints: dict[str, list[tuple[str, str]]] = {}
    raw: dict[str, list[tuple[str, str]]] = {}
    flags: list[str] = []
    for s in sections:
        defines = s.defines()
        defines.append(("MEMTOP_TP_FN(tp)", f"{s.owner}__tp__##tp"))
        defines.append(("MEMTOP_RAW_FN(e)", f"{s.owner}__raw__##e"))
        raw[s.owner] = [(raw_tp_function(s.owner, ev), ev) for ev in dict.fromkeys(s.raw_tracepoints())]
        tps = []
        for cat, ev in dict.fromkeys(s.tracepoints()):
            arg = f"MEMTOP_TP_ARG_{cat}__{ev}"
            if (cat, ev) in hooked:  # its struct is already declared: name it without declaring it
                lines.append(f"typedef struct tracepoint__{cat}__{ev} memtop_tp__{s.owner}__{cat}__{ev};")
                defines.append((arg, f"memtop_tp__{s.owner}__{cat}__{ev}"))
            else:
                hooked.add((cat, ev))
                defines.append((arg, f"struct tracepoint__{cat}__{ev}"))
            tps.append((tp_function(s.owner, cat, ev), f"{cat}:{ev}"))
        tracepoints[s.owner] = tps
        lines += [f"#define {name} {value}".rstrip() for name, value in defines]
        lines.append(f'#line 1 "{s.origin or s.owner}"')
        lines.append(expand_includes(s.text, s.origin or s.owner))
        undefine = dict.fromkeys([*(n.partition("(")[0] for n, _ in defines), *_DEFINE.findall(s.text)])
        lines += [f"#undef {n}" for n in undefine]
        flags += [f for f in s.other_flags() if f not in flags]
    return Built("\n".join(lines) + "\n", flags, tracepoints, raw)


class Unit:
    """A compiled module shared by the programs of its sections."""

    def __init__(self, bpf: Any, built: Built) -> None:
        self.bpf = bpf
        self.built = built
        self.functions = set(bcc_compat.function_names(bpf))
        self._users = set(built.tracepoints)
        self._lock = threading.Lock()

    @classmethod
    def compile(cls, sections: Sequence[Section]) -> Unit:
        built = build(sections)
        return cls(bcc_compat.compile_text(built.text, built.cflags), built)

    def view(self, owner: str) -> ProgramView:
        return ProgramView(self, owner)

    def release(self, owner: str) -> None:
        with self._lock:
            last = owner in self._users and len(self._users) == 1
            self._users.discard(owner)
        if last:
            bcc_compat.cleanup(self.bpf)


class ProgramView:
    """One program's share of a unit: what its probe holds as ``self.bpf``. Tables and functions
    are looked up in the shared module; the hooks it attaches are its own and it closes them."""

    def __init__(self, unit: Unit, owner: str) -> None:
        self.unit = unit
        self.owner = owner
        self._fds: list[int] = []
        self._raw_fds: list[int] = []
        self._released = False

    def __getitem__(self, table: str) -> Any:
        return self.unit.bpf[table]

    def __getattr__(self, name: str) -> Any:  # everything else BCC offers, on the shared module
        return getattr(self.unit.bpf, name)

    def shared_with(self) -> list[str]:
        """The other programs compiled in the same unit."""
        return [o for o in self.unit.built.tracepoints if o != self.owner]

    def attach_tracepoints(self) -> None:
        """Attach the program's TRACEPOINT_PROBEs and RAW_TRACEPOINT_PROBEs that were compiled in
        (#ifdef'd out: skipped)."""
        for fn, tp in self.unit.built.tracepoints.get(self.owner, []):
            if fn in self.unit.functions:
                self._fds.append(bcc_compat.attach_tracepoint_fd(self.unit.bpf, fn, tp))
        for fn, event in self.unit.built.raw_tracepoints.get(self.owner, []):
            if fn in self.unit.functions:
                self._raw_fds.append(bcc_compat.attach_raw_tracepoint_fd(self.unit.bpf, fn, event))

    def attach_perf_event_system(self, ev_type: int, ev_config: int, fn: str, sample_period: int = 1) -> None:
        """``fn`` on a perf event on every online CPU, for all tasks."""
        for cpu in bcc_compat.online_cpus():
            fd = bcc_compat.attach_perf_event_fd(
                self.unit.bpf, fn, ev_type, ev_config, sample_period, -1, cpu
            )
            if fd < 0:
                raise OSError(
                    -fd if fd < -1 else 0, f"cannot open perf event {ev_type}:{ev_config} on cpu {cpu}"
                )
            self._fds.append(fd)

    def detach(self) -> None:
        """Close every hook this program attached (its maps stay: the module is shared)."""
        fds, self._fds = self._fds, []
        for fd in fds:
            try:
                bcc_compat.close_perf_event_fd(fd)
            except Exception:  # noqa: BLE001 - every exit path
                pass
        raw, self._raw_fds = self._raw_fds, []
        for fd in raw:  # a raw tracepoint's link is its fd: closing it detaches
            try:
                os.close(fd)
            except OSError:
                pass

    def release(self) -> None:
        """Detach, and let go of the module (freed with its last user). Idempotent."""
        self.detach()
        if not self._released:
            self._released = True
            self.unit.release(self.owner)
