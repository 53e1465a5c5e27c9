"""No quoted include reaches clang (memtop/probes/unit.py): memtop's own headers are pasted in from
its resolved bpf/ directory, any other quoted or computed include is refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memtop.core.errors import ProbeError
from memtop.probes.base import BpfProbe
from memtop.probes.registry import all_probe_classes
from memtop.probes.unit import Section, build, expand_includes
from memtop.runtime import resources

INCLUDE = re.compile(r"^\s*#\s*(include|include_next|import)\b(.*)$", re.M)


def programs() -> list[str]:
    return sorted({c.program for c in all_probe_classes() if issubclass(c, BpfProbe)})


@pytest.mark.parametrize("program", programs())
def test_every_program_reaches_clang_with_angle_includes_only(program: str) -> None:
    source = resources.bpf_source(program)
    built = build([Section.from_file(program, source)])
    for _directive, arg in INCLUDE.findall(built.text):
        assert arg.strip().startswith("<"), arg
    assert not any(flag.startswith("-I") for flag in built.cflags)  # nothing to look up beside it
    for header in re.findall(r'^#include "([\w.]+)"', source.read_text(), re.M):
        own = (resources.bpf_dir() / header).read_text()
        assert own in built.text, header


def test_the_programs_share_common_h() -> None:
    """Every program takes its helpers from bpf/common.h; compiled as one unit, the helpers are
    pasted for each section but the include guard keeps one definition of each."""
    for program in programs():
        assert '#include "common.h"' in resources.bpf_source(program).read_text(), program
    sections = [Section.from_file(p, resources.bpf_source(p)) for p in ("vmscan", "oom", "procmem")]
    text = build(sections).text
    assert text.count("#ifndef MEMTOP_COMMON_H") == 3
    assert text.count("#define MEMTOP_COMMON_H") == 3  # each skipped after the first by its guard
    assert "#undef MEMTOP_COMMON_H" not in text


def test_a_pasted_header_keeps_clang_s_line_numbers() -> None:
    text = 'int a;\n#include "perf_ctx.h"  // the perf context\nint b;\n'
    out = expand_includes(text, "x.bpf.c")
    assert out.startswith('int a;\n#line 1 "perf_ctx.h"\n')
    assert out.endswith('#line 3 "x.bpf.c"\nint b;\n')


@pytest.mark.parametrize(
    "line",
    [
        '#include "../memtop/__init__.py"',
        '#include "/etc/passwd"',
        '#include "sub/perf_ctx.h"',
        '#include ".hidden.h"',
        '#include "no_such_header.h"',
        "#include PERF_CTX",
        '#include_next "perf_ctx.h"',
        '#import "perf_ctx.h"',
        '  #  include   "not_here.h"',
        '#include "perf_ctx.h" trailing',
    ],
)
def test_any_other_quoted_or_computed_include_is_refused(line: str) -> None:
    with pytest.raises(ProbeError, match="include"):
        expand_includes(f"int a;\n{line}\n", "x.bpf.c")


def test_a_link_in_bpf_is_not_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own = tmp_path / "bpf"
    own.mkdir()
    (tmp_path / "elsewhere.h").write_text("#error planted\n")
    (own / "linked.h").symlink_to(tmp_path / "elsewhere.h")
    (own / "real.h").write_text('#include "linked.h"\n')
    monkeypatch.setattr(resources, "bpf_dir", lambda: own)
    with pytest.raises(ProbeError, match="linked.h"):
        expand_includes('#include "real.h"\n', "x.bpf.c")


def test_includes_are_pasted_recursively_and_a_cycle_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = tmp_path / "bpf"
    own.mkdir()
    (own / "outer.h").write_text('int outer;\n#include "inner.h"\n')
    (own / "inner.h").write_text("int inner;")
    (own / "loop.h").write_text('#include "loop.h"\n')
    monkeypatch.setattr(resources, "bpf_dir", lambda: own)
    out = expand_includes('#include "outer.h"\nint main_;\n', "m.bpf.c")
    assert out == (
        '#line 1 "outer.h"\nint outer;\n#line 1 "inner.h"\nint inner;\n#line 3 "outer.h"\n'
        '#line 2 "m.bpf.c"\nint main_;\n'
    )
    with pytest.raises(ProbeError, match="too deep"):
        expand_includes('#include "loop.h"\n', "m.bpf.c")
