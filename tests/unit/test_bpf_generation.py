"""Every path of a program that updates a map its probe reads bumps the program's generation after
the update (bpf/common.h ``memtop_generation``; memtop.probes.base.Generation): a path that
returned without it would leave a poll handing back the last read while the maps moved.

Read from the C sources, so it needs no BPF. Each program's body is walked statement by
statement, branch by branch (conservatively: a block that does not end in a return joins its
effects to the path after it): an update of a map the poll reads makes the path dirty, the
program's ``<probe>_updated()`` call makes it clean, and a return or the body's end on a dirty
path is a fault."""

from __future__ import annotations

import re

import pytest

from memtop.runtime import resources

#: what writes a map (or what a lookup of one returned); the helpers that count are writes too
WRITES = re.compile(
    r"memtop_bump\(|memtop_add\(|_count\(|__sync_fetch_and_add\(|\.update\(|\.insert\("
    r"|lookup_or_try_init\(|->\w+(\[\w+\])?\s*[-+]?=(?!=)|bpf_get_current_comm\(&\w+->"
)

#: per program: its bump, and the maps (or the pointers to their values) the poll never reads or
#: reads every poll anyway, whose writes need no bump
PROGRAMS = {
    "vmscan": (
        "vmscan_updated()",
        re.compile(r"\b(reclaim_begin|slab_begin|compact_begin|log_bucket)\b|\be->|\bb = \{"),
    ),
    "swapin": (
        "swapin_updated()",
        re.compile(r"\b(sleeping|pending|stackbuf|swapin_counters)\b|\bp->|\bst->"),
    ),
}

#: a program (a tracepoint's, a perf event's) or a helper that does a program's work to its end
#: (``reclaim_end_common``); the helpers that only count (``vmscan_count``) are checked where used
_FUNCTION = re.compile(
    r"^(TRACEPOINT_PROBE\(\w+, \w+\)|int \w+\(.*\)|static __always_inline void \w+_common\(.*\)) \{$", re.M
)


def bodies(text: str) -> dict[str, str]:
    """Each function's body (between its braces) by its header line."""
    out: dict[str, str] = {}
    for m in _FUNCTION.finditer(text):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        out[m.group(1)] = text[m.end() : i - 1]
    return out


def unbumped(body: str, bump: str, exempt: re.Pattern[str]) -> list[str]:
    """The statements of ``body`` at which a path that wrote a read map ends without ``bump``."""
    faults: list[str] = []
    dirty = False
    #: per open block: the path's state before it, and whether its last statement returned
    stack: list[tuple[bool, bool]] = []
    returned = False
    code = re.sub(r"//.*", "", body)
    for raw in re.split(r"(?<=[;{}])", code):
        stmt = raw.strip()
        if not stmt:
            continue
        if stmt.endswith("{"):
            head = stmt[:-1]
            if WRITES.search(head) and not exempt.search(head):
                dirty = True
            stack.append((dirty, False))
            returned = False
            continue
        if stmt == "}":
            before, _ = stack.pop()
            dirty = before if returned else (before or dirty)
            returned = False
            continue
        if bump in stmt:
            dirty = False
        elif WRITES.search(stmt) and not exempt.search(stmt):
            dirty = True
        returned = bool(re.match(r"return\b", stmt))
        if returned and dirty:
            faults.append(stmt)
            dirty = False  # what follows in this block is not on this path
    if dirty:
        faults.append("(the body's end)")
    return faults


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_every_path_that_updates_a_read_map_bumps_the_generation(program: str) -> None:
    bump, exempt = PROGRAMS[program]
    text = resources.bpf_source(program).read_text()
    found = bodies(text)
    assert len(found) >= 2, found.keys()
    faults = {name: f for name, body in found.items() if (f := unbumped(body, bump, exempt))}
    assert faults == {}
    assert sum(body.count(bump) for body in found.values()) >= 3


def test_the_walk_finds_a_path_that_returns_without_the_bump() -> None:
    """The check itself: an early return after an update, an update after the bump, and a
    branch that bumps and returns while the path past it does not, are each found."""
    exempt = re.compile(r"\be->")
    ok = "u64 *s = m.lookup(&k); if (!s) { x_count(1); x_updated(); return 0; } memtop_bump(s); x_updated(); return 0;"
    assert unbumped(ok, "x_updated()", exempt) == []
    early = "memtop_bump(a.lookup(&k)); if (c) { return 0; } x_updated(); return 0;"
    assert unbumped(early, "x_updated()", exempt) == ["return 0;"]
    late = "x_updated(); s->n += 1;"
    assert unbumped(late, "x_updated()", exempt) == ["(the body's end)"]
    branch = "m.update(&k, &v); if (!e) { x_updated(); return 0; } e->ts = 1; return 0;"
    assert unbumped(branch, "x_updated()", exempt) == ["return 0;"]
