"""One definition of each fact shared by a BPF program and its probe: the sizes, enums, slots and
flags both sides use are Python's (``BpfProbe.defines()``, passed as ``-DNAME=value``), and the C
file keeps each only as an ``#ifndef NAME`` default. Parsed from the sources, so it needs no BPF:

- every name Python passes has a guarded default in C, equal to the default probe's value;
- no C ``#define`` of a name Python also defines (a module constant of the probe's module or one it
  passes) is left unguarded: a ``-D`` would be silently overridden by it (clang only warns);
- every guarded default in C is one Python passes (or a documented C-only knob of a bench);
- helpers the programs share live once, in ``bpf/common.h``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import operator
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from memtop.probes.base import BpfProbe
from memtop.probes.faultstack import FaultStackProbe
from memtop.probes.growth import GrowthProbe
from memtop.probes.leakrate import LeakRateProbe
from memtop.probes.leaks import LeaksProbe
from memtop.probes.registry import PROBES, probe_class
from memtop.runtime import resources

#: the on-demand probes made for a target (their constructors need one)
ON_A_TARGET: dict[str, Callable[[int], BpfProbe]] = {
    "leaks": lambda pid: LeaksProbe([pid], exact_sizes=False),
    "leakrate": lambda pid: LeakRateProbe([pid]),
    "faultstack": lambda pid: FaultStackProbe(pid),
    "growth": lambda pid: GrowthProbe(pid),
}

#: -D values that are not constants: per target, or read from this kernel (kallsyms, BTF)
PER_RUN = re.compile(r"^(TARGET_PID|KC_NAME_OFF|KC_SIZE_OFF|(PF|SW|FI)[12]_(LO|HI))$")

#: guarded C defaults no probe passes: knobs of a bench only, each with where it is set
C_ONLY = {
    ("leaks", "STACK_NONE"): "bench/leaks_stacks.py",
    ("leaks", "STACK_FLAGS"): "bench/leaks_stacks.py",
}


@dataclass(frozen=True)
class CDefine:
    name: str
    value: str
    #: inside ``#ifndef <name>`` (the define is only a default)
    guarded: bool
    line: int


_DIRECTIVE = re.compile(r"^\s*#\s*(\w+)\s*(.*?)\s*$")


def c_defines(text: str) -> list[CDefine]:
    """Every object-like ``#define`` of ``text`` and whether its nearest enclosing conditional is
    ``#ifndef`` of its own name (in that conditional's first branch)."""
    out: list[CDefine] = []
    stack: list[str] = []  # per open conditional: the name of an #ifndef in its first branch, else ""
    for n, raw in enumerate(text.splitlines(), 1):
        line = re.sub(r"//.*$", "", raw)
        m = _DIRECTIVE.match(line)
        if m is None:
            continue
        word, rest = m.group(1), m.group(2)
        if word == "ifndef":
            stack.append(rest.split()[0])
        elif word in ("if", "ifdef"):
            stack.append("")
        elif word in ("else", "elif") and stack:
            stack[-1] = ""
        elif word == "endif" and stack:
            stack.pop()
        elif word == "define":
            dm = re.match(r"(\w+)(\(?)\s*(.*)$", rest)
            if dm is None or dm.group(2):  # function-like macros are code, not facts
                continue
            name = dm.group(1)
            out.append(CDefine(name, dm.group(3).strip(), bool(stack) and stack[-1] == name, n))
    return out


_OPS: dict[type[ast.AST], Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitOr: operator.or_,
}


def c_value(expr: str) -> int | None:
    """The integer a C constant expression of literals stands for (None: not one)."""
    text = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)(?:[uU]?[lL]{0,2}|[lL]{1,2}[uU]?)\b", r"\1", expr).strip()
    if not text:
        return None
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        raise ValueError(ast.dump(node))

    try:
        return ev(tree)
    except ValueError:
        return None


def python_constants(module_name: str) -> set[str]:
    """Upper-case names the probe's module binds at module level (its constants)."""
    mod = importlib.import_module(module_name)
    tree = ast.parse(inspect.getsource(mod))
    names: set[str] = set()
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        for t in targets:
            for leaf in t.elts if isinstance(t, ast.Tuple) else [t]:
                if isinstance(leaf, ast.Name) and leaf.id.isupper():
                    names.add(leaf.id)
        if isinstance(node, ast.ClassDef) and any(
            isinstance(b, ast.Name) and b.id in ("IntEnum", "IntFlag") for b in node.bases
        ):
            names.add(node.name)
    return names


def problems(program: str, text: str, passed: dict[str, int], python_names: set[str]) -> list[str]:
    """What breaks the one-definition rule between ``text`` (bpf/<program>.bpf.c) and Python."""
    out: list[str] = []
    defines = c_defines(text)
    guarded = {d.name: d for d in defines if d.guarded}
    for name, value in sorted(passed.items()):
        d = guarded.get(name)
        if d is None:
            out.append(f"{program}: {name} is passed as -D{name}={value} but has no `#ifndef {name}` default")
        elif c_value(d.value) != value:
            out.append(f"{program}:{d.line}: C default {name} {d.value} != Python {value}")
    for d in defines:
        if d.guarded:
            if d.name not in passed and (program, d.name) not in C_ONLY and not PER_RUN.match(d.name):
                out.append(f"{program}:{d.line}: {d.name} has a C default no probe passes")
        elif d.name in passed or d.name in python_names:
            out.append(f"{program}:{d.line}: {d.name} is defined in C and in Python, and C's has no #ifndef")
    return out


def bpf_probes() -> dict[str, list[BpfProbe]]:
    """Program -> the probes that compile it, each as made by default."""
    out: dict[str, list[BpfProbe]] = {}
    for name in PROBES:
        cls = probe_class(name)
        if not issubclass(cls, BpfProbe):
            continue
        make = ON_A_TARGET.get(name)
        probe = make(os.getpid()) if make is not None else cls()
        assert isinstance(probe, BpfProbe)
        out.setdefault(cls.program, []).append(probe)
    return out


PROGRAMS = bpf_probes()


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_each_shared_constant_is_defined_once(program: str) -> None:
    text = resources.bpf_source(program).read_text()
    found: list[str] = []
    for probe in PROGRAMS[program]:
        passed = probe.defines()
        per_run = [n for n in passed if PER_RUN.match(n)]
        assert not per_run, f"{per_run}: per-run values are cflags, not defines()"
        names = python_constants(type(probe).__module__)
        found += problems(program, text, passed, names)
        flags = probe.define_flags()
        assert flags == [f"-D{k}={v}" for k, v in passed.items()], "defines() reach clang as -D"
    assert not sorted(set(found)), "\n".join(sorted(set(found)))


def test_the_checks_can_fail() -> None:
    """Each rule reports what breaks it (so a green run means something)."""
    text = "\n".join(
        [
            "#ifndef MAX_PIDS",
            "#define MAX_PIDS 8192",
            "#endif",
            "#ifndef RING",
            "#define RING (1U << 4)  // pages",
            "#endif",
            "#define HIST_SLOTS 64",
            "#ifndef OLD",
            "#define OLD 1",
            "#endif",
            "#if 0",
            "#ifndef X",
            "#else",
            "#define X 3",
            "#endif",
            "#endif",
            "#define ONLY_C 7",
            "#define FN(a) (a)",
        ]
    )
    got = problems("p", text, {"MAX_PIDS": 4096, "RING": 16, "NEW": 1}, {"HIST_SLOTS", "X"})
    assert got == [
        "p:2: C default MAX_PIDS 8192 != Python 4096",
        "p: NEW is passed as -DNEW=1 but has no `#ifndef NEW` default",
        "p:7: HIST_SLOTS is defined in C and in Python, and C's has no #ifndef",
        "p:9: OLD has a C default no probe passes",
        "p:14: X is defined in C and in Python, and C's has no #ifndef",
    ]
    assert c_value("0x10ULL") == 16 and c_value("-10000") == -10000 and c_value("sizeof(x)") is None


def test_shared_helpers_live_in_common_h() -> None:
    """The helpers every program needs (a log2 bucket, a per-CPU slot bump, a lost-event count)
    are written once, in bpf/common.h, and no program defines its own."""
    common = (resources.bpf_dir() / "common.h").read_text()
    for helper in ("memtop_log2", "memtop_bump", "memtop_add"):
        assert re.search(rf"\b{helper}\s*\(", common), helper
    for path in sorted(Path(resources.bpf_dir()).glob("*.bpf.c")):
        text = path.read_text()
        assert not re.search(r"\b(log2_slot|log2_u64|count_lost)\s*\(", text), path.name
        assert not re.search(r"^static __always_inline \w+ (bump|count)\(", text, re.M), path.name


def test_leakrate_has_a_program_per_slot() -> None:
    """bcc cannot tell a program which uprobe fired, so bpf/leakrate.bpf.c has one count_<i>
    function per slot of its array: as many as Python's N_FNS."""
    from memtop.probes import leakrate

    text = resources.bpf_source("leakrate").read_text()
    found = sorted(int(i) for i in re.findall(r"^int count_(\d+)\(", text, re.M))
    assert found == list(range(leakrate.N_FNS))
