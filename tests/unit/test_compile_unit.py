"""The default programs compiled as one unit (memtop/probes/unit.py), built without a kernel: every
default program shares it, no global is declared twice, each section's macros stay its own."""

from __future__ import annotations

import re

import pytest

from memtop.core.errors import ProbeError
from memtop.probes.base import BpfProbe
from memtop.probes.registry import all_probe_classes, default_probes
from memtop.probes.unit import Section, build
from memtop.runtime import resources


def shared_classes() -> list[type[BpfProbe]]:
    return [c for c in all_probe_classes() if issubclass(c, BpfProbe) and c.shares_unit]


def test_default_programs_can_share_a_unit() -> None:
    """Every probe attached at start shares the unit, and their programs declare no global twice
    (a clash would make every start fall back to one compilation per program)."""
    names = {c.name for c in shared_classes()}
    assert names == {p.name for p in default_probes() if isinstance(p, BpfProbe)}
    sections = [Section.from_file(c.name, resources.bpf_source(c.program)) for c in shared_classes()]
    built = build(sections)
    assert set(built.tracepoints) == names
    # two programs hook the same tracepoints (reclaim begins): the second names the struct
    # through a typedef instead of declaring it again
    users: dict[str, list[str]] = {}
    for owner, tps in built.tracepoints.items():
        for _fn, tp in tps:
            users.setdefault(tp, []).append(owner)
    shared = [tp for tp, owners in users.items() if len(owners) > 1]
    assert "vmscan:mm_vmscan_memcg_reclaim_begin" in shared
    assert built.text.count("typedef struct tracepoint__vmscan__mm_vmscan_memcg_reclaim_begin ") == 1


def test_build_refuses_a_global_declared_twice() -> None:
    a = Section("a", "BPF_PERCPU_ARRAY(lost, u64, 1);\n", origin="a.bpf.c")
    b = Section("b", 'BPF_TABLE("lru_hash", u32, u64, lost, 16);\n', origin="b.bpf.c")
    with pytest.raises(ProbeError, match="'lost'"):
        build([a, b])
    c = Section("c", "struct lost { int x; };\nstatic __always_inline int helper(void) {\n  return 0;\n}\n")
    d = Section("d", "static __always_inline int\nhelper(void) { return 1; }\n")
    with pytest.raises(ProbeError, match="'helper'"):
        build([c, d])
    with pytest.raises(ProbeError, match="owners"):
        build([a, Section("a", "")])


def test_build_scopes_each_sections_macros() -> None:
    """A section's -D flags and #defines are undefined before the next section starts."""
    a = Section("a", "#ifndef STEP\n#define STEP 10\n#endif\n#define ONLY_A 1\n", ("-DSTEP=1", "-Ifoo"))
    b = Section("b", "#ifndef STEP\n#define STEP 10\n#endif\n", ("-Ifoo", "-Ibar"))
    built = build([a, b])
    text = built.text
    first_b = text.index('#line 1 "b"')
    a_start = text.index('#line 1 "a"')
    assert "#define STEP 1\n" in text[:a_start]
    after_a = text[a_start:first_b]
    last_undef = after_a.rindex("#undef STEP")
    assert "#undef ONLY_A" in after_a and "#define STEP" not in after_a[last_undef:]
    assert built.cflags == ["-Ifoo", "-Ibar"]


def test_tracepoint_functions_are_named_per_program() -> None:
    built = build([Section("x", "TRACEPOINT_PROBE(sched, sched_switch) { return 0; }\n")])
    assert built.tracepoints == {"x": [("x__tp__sched__sched_switch", "sched:sched_switch")]}
    assert re.search(r"#define MEMTOP_TP_FN\(tp\) x__tp__##tp", built.text)
