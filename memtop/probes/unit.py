"""Several probes' programs compiled as one BPF module, each program still loaded, attached and
detached on its own.

Each ``BPF()`` costs libbcc ~0.2 s here however small the program: it re-reads all of
/proc/kallsyms (to choose between bpf_probe_read and bpf_probe_read_kernel) and re-parses the
kernel headers, twice. The default programs are small, so that fixed cost was most of the time to
attach them (four programs 0.95 s, the same four as one unit 0.30 s, idle machine; under a fault
storm the saving doubles). A program stays the unit of failure and of detach:

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

``TRACEPOINT_PROBE(category, event)`` is redefined per section to name the function
``<owner>__tp__<category>__<event>``: two programs may hook the same tracepoint (vmscan and oom
both watch reclaim begins), and BCC's auto-attach, which would attach every ``tracepoint__``
function of the module at once, is left with nothing to do. BCC declares a tracepoint's argument
struct in front of each function taking it, so a tracepoint's second user takes it through a
typedef instead of declaring it again.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memtop import bcc_compat
from memtop.errors import ProbeError

_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)", re.M)
_TRACEPOINT = re.compile(r"\bTRACEPOINT_PROBE\(\s*(\w+)\s*,\s*(\w+)\s*\)")
_MAP = re.compile(r'^\s*BPF_\w+\(\s*(?:"[^"]*"\s*,\s*[^,]+,\s*[^,]+,\s*)?(\w+)', re.M)
_STRUCT = re.compile(r"^\s*(?:struct|union|enum)\s+(\w+)\s*\{", re.M)
# a function definition from the start of a line: [static] [inline] type name(args) {, the name
# possibly on the next line (kernel style)
_FUNCTION = re.compile(r"^[A-Za-z_][\w\s*]*?\b(\w+)\s*\([^;{]*\)\s*\{", re.M)
_OWNER = re.compile(r"^[A-Za-z_]\w*$")


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
        """``path``'s text; quoted includes (bpf/perf_ctx.h) are looked up beside it."""
        path = Path(path).resolve()
        return cls(owner, path.read_text(), (*cflags, f"-I{path.parent}"), path.name)

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

    def globals(self) -> set[str]:
        """Names the text declares at file scope: maps, struct/union/enum tags, functions."""
        names = set(_MAP.findall(self.text)) | set(_STRUCT.findall(self.text))
        names |= {n for n in _FUNCTION.findall(self.text) if n != "TRACEPOINT_PROBE"}
        return names


def tp_function(owner: str, category: str, event: str) -> str:
    return f"{owner}__tp__{category}__{event}"


@dataclass(frozen=True)
class Built:
    text: str
    cflags: list[str]
    #: owner -> [(function name, "category:event")]
    tracepoints: dict[str, list[tuple[str, str]]]


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
    ]
    hooked: set[tuple[str, str]] = set()
    tracepoints: dict[str, list[tuple[str, str]]] = {}
    flags: list[str] = []
    for s in sections:
        defines = s.defines()
        defines.append(("MEMTOP_TP_FN(tp)", f"{s.owner}__tp__##tp"))
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
        lines.append(s.text)
        undefine = dict.fromkeys([*(n.partition("(")[0] for n, _ in defines), *_DEFINE.findall(s.text)])
        lines += [f"#undef {n}" for n in undefine]
        flags += [f for f in s.other_flags() if f not in flags]
    return Built("\n".join(lines) + "\n", flags, tracepoints)


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
        self._released = False

    def __getitem__(self, table: str) -> Any:
        return self.unit.bpf[table]

    def __getattr__(self, name: str) -> Any:  # everything else BCC offers, on the shared module
        return getattr(self.unit.bpf, name)

    def shared_with(self) -> list[str]:
        """The other programs compiled in the same unit."""
        return [o for o in self.unit.built.tracepoints if o != self.owner]

    def attach_tracepoints(self) -> None:
        """Attach the program's TRACEPOINT_PROBEs that were compiled in (#ifdef'd out: skipped)."""
        for fn, tp in self.unit.built.tracepoints.get(self.owner, []):
            if fn in self.unit.functions:
                self._fds.append(bcc_compat.attach_tracepoint_fd(self.unit.bpf, fn, tp))

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

    def release(self) -> None:
        """Detach, and let go of the module (freed with its last user). Idempotent."""
        self.detach()
        if not self._released:
            self._released = True
            self.unit.release(self.owner)
