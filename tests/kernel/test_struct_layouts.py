"""Every struct a BPF program hands to user space is read by Python at the offsets the compiled C
program uses: for each layout memtop declares (memtop.probes.layout: a ctypes.Structure with
C_STRUCT, or a Packed format), the program is compiled as memtop compiles it, with lines whose
diagnostics make clang print sizeof and offsetof of each field (``int (*)[..][value]`` in the
diagnostic), and those values must equal Python's. A failure names the struct, the field and
both offsets."""

from __future__ import annotations

import ctypes
import importlib
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from memtop.linux import bcc_compat
from memtop.probes import unit
from memtop.probes.base import BpfProbe
from memtop.probes.faultstack import FaultStackProbe
from memtop.probes.growth import GrowthProbe
from memtop.probes.layout import Layout, Packed, of_ctypes
from memtop.probes.leaks import LeaksProbe
from memtop.probes.registry import PROBES, probe_class

pytestmark = pytest.mark.bpf

#: what clang prints for `int (*)[layout][field][what][value]`
TYPE = re.compile(r"'int \(\*\)\[(\d+)\]\[(\d+)\]\[(\d+)\]\[(\d+)\]'")
SIZE, OFFSET, FIELD_SIZE = 1, 2, 3


#: the on-demand probes and how each is made for a target
ON_A_TARGET: dict[str, Callable[[int], BpfProbe]] = {
    "leaks": lambda pid: LeaksProbe([pid]),
    "faultstack": lambda pid: FaultStackProbe(pid),
    "growth": lambda pid: GrowthProbe(pid),
}


@dataclass
class Program:
    probe: BpfProbe
    layouts: list[Layout]


def declared_layouts(module_name: str) -> list[Layout]:
    mod = importlib.import_module(module_name)
    out = []
    for value in vars(mod).values():
        if isinstance(value, type) and issubclass(value, ctypes.Structure) and hasattr(value, "C_STRUCT"):
            if value.__module__ == module_name:
                out.append(of_ctypes(value))
        elif isinstance(value, Packed):
            out.append(value.layout)
    return out


def programs() -> dict[str, Program]:
    """Each BPF program with the layouts its module declares, and a probe to build its text."""
    target = os.getpid()
    out: dict[str, Program] = {}
    for name in PROBES:
        cls = probe_class(name)
        if not issubclass(cls, BpfProbe):
            continue
        layouts = declared_layouts(cls.__module__)
        if not layouts:
            continue
        make = ON_A_TARGET.get(name)
        probe = make(target) if make is not None else cls()
        assert isinstance(probe, BpfProbe)
        out.setdefault(cls.program, Program(probe, []))
        for layout in layouts:
            if layout not in out[cls.program].layouts:
                out[cls.program].layouts.append(layout)
    return out


def probe_lines(layouts: list[Layout]) -> str:
    lines = []
    for k, lay in enumerate(layouts):
        s = lay.c_struct
        if lay.size is not None:
            lines.append(f"int (*__memtop_layout_{k})[{k}][0][{SIZE}][sizeof({s})] = 1;")
        for j, (field, _off, _size) in enumerate(lay.fields):
            lines.append(
                f"int (*__memtop_layout_{k}_{j}_o)[{k}][{j}][{OFFSET}][__builtin_offsetof({s}, {field})] = 1;"
            )
            lines.append(
                f"int (*__memtop_layout_{k}_{j}_s)[{k}][{j}][{FIELD_SIZE}][sizeof((({s} *)0)->{field})] = 1;"
            )
    return "\n".join(lines) + "\n"


def c_values(prog: Program) -> tuple[dict[tuple[int, int, int], int], str]:
    """(layout, field, what) -> the value clang printed; and all it printed."""
    built = unit.build([prog.probe.section()])
    text = built.text + probe_lines(prog.layouts)
    with tempfile.TemporaryFile() as err:
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        try:
            # clang 14 warns (-Wint-conversion) where later ones refuse: either way it prints the type
            try:
                compiled = bcc_compat.compile_text(
                    text, built.cflags + ["-ferror-limit=0", "-Wint-conversion"]
                )
            except Exception:  # noqa: BLE001 - BCC's bare Exception; what clang printed is what counts
                compiled = None
            if compiled is not None:
                compiled.cleanup()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        said = err.read().decode("utf-8", "replace")
    values = {(int(k), int(j), int(w)): int(v) for k, j, w, v in TYPE.findall(said)}
    return values, said


PROGRAMS = programs()


def test_every_struct_read_from_the_kernel_is_declared() -> None:
    """The six ctypes structs and the leaks program's map formats are all held to their C."""
    structs = {lay.c_struct for prog in PROGRAMS.values() for lay in prog.layouts}
    assert {
        "struct range_t",
        "struct brk_t",
        "struct oom_event_t",
        "struct proc_event_t",
        "struct stats_t",
        "struct reclaim_event_t",
        "struct alloc_info_t",
        "struct stack_key_t",
        "struct stack_val_t",
    } <= structs


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_python_reads_what_the_compiled_program_writes(program: str) -> None:
    prog = PROGRAMS[program]
    values, said = c_values(prog)
    wrong = []
    for k, lay in enumerate(prog.layouts):
        if lay.size is not None:
            c = values.get((k, 0, SIZE))
            if c != lay.size:
                wrong.append(f"{lay.c_struct}: size C {c} != Python {lay.size}")
        for j, (field, off, size) in enumerate(lay.fields):
            c_off, c_size = values.get((k, j, OFFSET)), values.get((k, j, FIELD_SIZE))
            if c_off != off:
                wrong.append(f"{lay.c_struct}.{field}: offset C {c_off} != Python {off}")
            if c_size != size:
                wrong.append(f"{lay.c_struct}.{field}: size C {c_size} != Python {size}")
    missing = [ln.strip() for ln in said.splitlines() if "error:" in ln and "int (*)" not in ln]
    assert not wrong, f"bpf/{program}.bpf.c vs Python: {wrong}; other errors: {missing[:5]}"


def test_a_drift_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check fails, naming struct, field and both offsets, when Python reads a field wider
    than the C one (what the test is for)."""
    prog = PROGRAMS["procmem"]
    lay = prog.layouts[0]
    name, off, size = lay.fields[0]
    widened = Layout(
        lay.c_struct, ((name, off, size),) + tuple((n, o + 4, s) for n, o, s in lay.fields[1:]), lay.size
    )
    values, _ = c_values(Program(prog.probe, [widened]))
    n1, o1, _ = widened.fields[1]
    assert values[(0, 1, OFFSET)] == o1 - 4 != o1, f"{lay.c_struct}.{n1}"


def test_layouts_from_declarations() -> None:
    assert Packed("struct x", "<Ii", ("a", "b")).layout == Layout("struct x", (("a", 0, 4), ("b", 4, 4)), 8)
    assert Packed("struct x", "<I", ("a",), whole=False).layout.size is None
    with pytest.raises(ValueError):
        Packed("struct x", "II", ("a", "b")).layout  # noqa: B018 - no byte order: native padding

    class S(ctypes.Structure):
        C_STRUCT = "struct s"
        _fields_ = [("a", ctypes.c_uint32), ("b", ctypes.c_uint64)]

    assert of_ctypes(S) == Layout("struct s", (("a", 0, 4), ("b", 8, 8)), 16)
