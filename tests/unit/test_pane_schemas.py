"""Each docs/panes/<pane>.md documents its pane's JSON document field by field; the documents the
views build from tests/data/pressure.jsonl.gz (the same path `snapshot --replay`, `--batch
--replay` and `s` take) must hold exactly the documented fields, with the documented types. A field
added to a view without a line in its page, or documented and gone, fails here.

A map whose keys are names (the ``probes`` statuses) is documented once for any key, with the key
written as a placeholder: ``probes.<name>.state``. The same views of a session where no probe ran
are checked too, so a figure that can be null (not measured) must be documented ``… or null``."""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from memtop.records import Batch, from_json
from memtop.records.leaks import LeakPreflight
from memtop.records.process import FaultCoverage, GrowthStack
from memtop.state import State
from memtop.state.swapin import SwapinState
from memtop.state.vmscan import VmscanState
from memtop.stream.recfile import Recording
from memtop.views import Options, views
from memtop.views.process import SECTION_COLUMNS, SECTION_DOCS, SECTIONS

ROOT = Path(__file__).resolve().parents[2]
PANES_DOCS = ROOT / "docs" / "panes"
PRESSURE = ROOT / "tests" / "data" / "pressure.jsonl.gz"
SAMPLES = ROOT / "tests" / "data" / "samples"
HOG_PID = 3620  # the workload the recording's header names; it has fault stacks and mappings

SCALARS: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "float": (float, int),
    "str": (str,),
    "bool": (bool,),
    "object": (dict,),
}

Schema = dict[str, str]  # field path -> documented type


def schema_tables(page: Path) -> dict[str, Schema]:
    """The field tables of the page's "## JSON…" section, by the "###" heading above each ("" for
    a table straight under the "##")."""
    out: dict[str, Schema] = {}
    in_json, heading = False, ""
    for line in page.read_text().splitlines():
        if line.startswith("## "):
            in_json = line[3:].startswith("JSON")
            heading = ""
        elif line.startswith("### ") and in_json:
            heading = line[4:].strip().lower()
        elif in_json and line.startswith("| `"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
            assert len(cells) == 4, f"{page.name}: {line!r} is not field | type | unit | meaning"
            field = cells[0].strip("`")
            table = out.setdefault(heading, {})
            assert field not in table, f"{page.name}: {field} documented twice"
            table[field] = cells[1]
    return out


def type_ok(doc_type: str, value: Any) -> bool:
    nullable = doc_type.endswith(" or null")
    base = doc_type.removesuffix(" or null")
    if value is None:
        return nullable
    if isinstance(value, bool) and base != "bool":
        return False
    if base in SCALARS:
        return isinstance(value, SCALARS[base])
    inner = re.fullmatch(r"list\[(\w+(?: or null)?)\]", base)
    if inner:
        return isinstance(value, list) and all(type_ok(inner[1], v) for v in value)
    inner = re.fullmatch(r"map\[str, (\w+(?: or null)?)\]", base)
    if inner:
        return isinstance(value, dict) and all(
            isinstance(k, str) and type_ok(inner[1], v) for k, v in value.items()
        )
    raise AssertionError(f"unknown documented type {doc_type!r}")


PLACEHOLDER = re.compile(r"<\w+>")


def placeholders(schema: Schema) -> dict[str, str]:
    """Object paths whose keys are data, documented with a placeholder (``probes.<name>.state``):
    the path (``probes``) -> the placeholder (``<name>``)."""
    out: dict[str, str] = {}
    for field in schema:
        parts = field.split(".")
        for i, part in enumerate(parts):
            if PLACEHOLDER.fullmatch(part):
                out[".".join(parts[:i])] = part
                break
    return out


def fields(
    value: Any, schema: Schema, path: str = "", out: dict[str, list[Any]] | None = None
) -> dict[str, list[Any]]:
    """Every field path in a document (objects' keys, ``[]`` for list elements) with the values
    seen there; a field documented as a map is a leaf (its keys are data, not fields); the keys of
    an object documented with a placeholder all take the placeholder's path."""
    out = {} if out is None else out
    if path and not path.endswith("[]"):  # a list's element is described by its fields
        out.setdefault(path, []).append(value)
    if path and schema.get(path, "").startswith("map["):
        return out
    if isinstance(value, dict):
        wildcard = placeholders(schema).get(path)
        for k, v in value.items():
            key = wildcard or k
            fields(v, schema, f"{path}.{key}" if path else key, out)
    elif isinstance(value, list):
        for v in value:
            if isinstance(v, dict):
                fields(v, schema, f"{path}[]", out)
    return out


@functools.cache
def pressure_state() -> State:
    """The recording replayed to its end, then one more sample with what the recording lacks (a
    compaction histogram, slab shrinkers, file-read waits, zswap, a heap-growth stack), so every
    documented field can show up."""
    rec = Recording.load(PRESSURE)
    state = State(mode="replay")
    for b in rec.batches():
        state.apply(b)
    vmscan = state.get(VmscanState).totals
    swapin = state.get(SwapinState)
    assert vmscan is not None and swapin.hist is not None and swapin.swapinfo is not None
    growth = GrowthStack(
        pid=HOG_PID,
        stack_id=7,
        frames=("brk+0xb [libc.so.6]", "main+0x2a [rec_hog]"),
        brk_calls=3,
        brk_grown_bytes=3 << 20,
        brk_shrunk_bytes=1 << 20,
        mmap_calls=1,
        mmap_bytes=8 << 20,
        munmap_calls=1,
        munmap_bytes=8 << 20,
        freed_bytes=8 << 20,
    )
    extra = (
        dataclasses.replace(
            vmscan,
            compaction_count=vmscan.compaction_count + 2,
            compaction_hist=((12, 1), (15, 1)),
            slab=(("super_cache_scan", 40, 120_000, 900), ("deferred_split_scan", 2, 3_000, 0)),
        ),
        dataclasses.replace(swapin.hist, file_counts=(0, 0, 5, 2)),
        dataclasses.replace(
            swapin.swapinfo, zswap_enabled=True, zswap_pool_bytes=1 << 20, zswapped_bytes=4 << 20
        ),
        growth,
        FaultCoverage(pid=HOG_PID, threads_total=3, threads_traced=2, reason="open-file limit 64"),
    )
    state.apply(Batch(ts_ns=state.ts_ns + 1_000_000_000, records=extra))
    # a pane newer than the recording brings sample records of its own, one JSON record a line,
    # in tests/data/samples/<pane>.jsonl (a file named after it: the recording need not be remade)
    for sample in sorted(SAMPLES.glob("*.jsonl")):
        recs = tuple(from_json(json.loads(line)) for line in sample.read_text().splitlines() if line.strip())
        state.apply(Batch(ts_ns=state.ts_ns + 1_000_000_000, records=recs))
    return state


def preflight_state(decision: str) -> State:
    """A live session's state after the leaks preflight counted (and the user chose, or not)."""
    state = State(mode="bpf")
    rec = LeakPreflight(
        pids=(42,),
        state="measured",
        message="10 entry probes counted calls for 1.00 s, then detached",
        allocator="glibc",
        window_ns=10**9,
        functions=("free", "malloc", "calloc"),
        calls=(200_000, 190_000, 10_000),
        alloc_calls=200_000,
        free_calls=200_000,
        trap_ns=512.0,
        program_ns=40.0,
        sample_bytes=524288,
        decision=decision,
        decided_by="user" if decision else "",
    )
    state.apply(Batch(ts_ns=1, records=(rec,)))
    return state


def budget_state() -> State:
    """A live session tracing on a CPU budget (--budget) that found a leak."""
    from memtop.records.leaks import LeakBudget, LeakStack, LeakTarget, LeakVerdict

    state = State(mode="bpf")
    recs = (
        LeakTarget(42, "leaker", "tracing", "glibc"),
        LeakStack(42, 7, ("leak_here+0x1 [leaker]", "main+0x2 [leaker]"), 409600, 100, 0, 0),
        LeakBudget(
            0.01, 5, 300_000_000, 17_000_000_000, 199_000.0, 150_000_000, 600_000_000, 85 * 10**9, 0.97
        ),
        LeakVerdict(42, 7, 100, 0, 100, 409600, 1.0, growing_since_ns=10**9),
    )
    state.apply(Batch(ts_ns=30 * 10**9, records=recs))
    return state


def documents(name: str, section: str) -> list[Mapping[str, Any]]:
    """The view's documents of the recording, and of a session where no probe ran (nothing
    measured: its figures are null)."""
    docs = []
    for state in (pressure_state(), State(mode="procfs")):
        view = views()[name]()
        if name == "process":
            docs.append(view.document(state, Options(pid=HOG_PID, section=section)))
            continue
        docs.append(view.document(state, Options()))
        if name == "leaks":  # before tracing: the preflight's count, waiting for an answer or answered
            docs += [view.document(preflight_state(d), Options()) for d in ("", "sampled")]
            docs.append(view.document(budget_state(), Options()))
        if name in ("swapin", "reclaim", "oom"):  # one process's view of the pane: the same fields
            docs.append(view.document(state, Options(pid=HOG_PID)))
        if name == "processes":  # grouped by cgroup (C) adds each cgroup's totals
            docs.append(view.document(state, Options(extra={"group": "cgroup"})))
        if name == "cgroups":  # a cgroup's drill-in adds its detail
            docs.append(view.document(state, Options(extra={"cgroup": "/memtop-rec"})))
    return docs


def cases() -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for name in views():
        out += [(name, s) for s in SECTIONS] if name == "process" else [(name, "")]
    return out


def test_every_pane_has_a_page() -> None:
    assert {p.stem for p in PANES_DOCS.glob("*.md")} == set(views())


@pytest.mark.parametrize(("name", "section"), cases())
def test_documented_fields_are_the_fields_produced(name: str, section: str) -> None:
    tables = schema_tables(PANES_DOCS / f"{name}.md")
    schema = dict(tables.get("every section", {}), **tables.get(section, {}))
    assert schema, f"docs/panes/{name}.md has no field table for {section or 'the pane'}"
    seen: dict[str, list[Any]] = {}
    for doc in documents(name, section):
        for path, values in fields(doc, schema).items():
            seen.setdefault(path, []).extend(values)
    produced, documented = set(seen), set(schema)
    assert produced - documented == set(), f"docs/panes/{name}.md lacks these fields"
    assert documented - produced == set(), f"docs/panes/{name}.md documents fields the view does not produce"
    wrong = {p: (schema[p], vs) for p, vs in seen.items() if not all(type_ok(schema[p], v) for v in vs)}
    assert not wrong, f"docs/panes/{name}.md: documented types do not match the values"


def test_the_process_page_has_a_table_per_section() -> None:
    tables = schema_tables(PANES_DOCS / "process.md")
    assert set(tables) == {"every section", *SECTIONS}


SCALAR_NAMES = {int: "int", float: "float", str: "str", bool: "bool"}


def typed_fields(td: Any, schema: Schema, path: str = "") -> Schema:
    """The fields of a TypedDict document type, as the page documents them: ``path -> type``
    (``list[object]`` and ``[]`` for a list of objects, ``object`` and the page's placeholder for
    a map keyed by names, ``… or null`` for an optional value)."""
    out: Schema = {}
    for name, hint in typing.get_type_hints(td).items():
        here = f"{path}.{name}" if path else name
        out.update(typed_field(hint, schema, here))
    return out


def typed_field(hint: Any, schema: Schema, path: str) -> Schema:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) < len(typing.get_args(hint)):
        assert len(args) == 1, f"{path}: one type or null, as the pages document it"
        inner = typed_field(args[0], schema, path)
        inner[path] += " or null"
        return inner
    if typing.is_typeddict(hint):
        return {path: "object", **typed_fields(hint, schema, path)}
    origin = typing.get_origin(hint)
    if origin is list:
        (item,) = typing.get_args(hint)
        if typing.is_typeddict(item):
            return {path: "list[object]", **typed_fields(item, schema, f"{path}[]")}
        return {path: f"list[{typed_field(item, schema, path)[path]}]"}
    if origin is typing.Literal:  # a tag (the drill-in's ``section``): the type of its values
        (kind,) = {type(v) for v in typing.get_args(hint)}
        return {path: SCALAR_NAMES[kind]}
    if origin is dict:
        _, value = typing.get_args(hint)
        placeholder = placeholders(schema).get(path)
        if placeholder is not None and typing.is_typeddict(value):
            return {path: "object", **typed_field(value, schema, f"{path}.{placeholder}")}
        return {path: f"map[str, {typed_field(value, schema, path)[path]}]"}
    return {path: SCALAR_NAMES[hint]}


def typed_views() -> list[str]:
    """The panes whose ``document`` returns a TypedDict (issue 36: every one, pane by pane)."""
    return [
        name
        for name, view in views().items()
        if typing.is_typeddict(typing.get_type_hints(view.document).get("return"))
    ]


def test_typed_panes_are_counted() -> None:
    assert "processes" in typed_views()


@pytest.mark.parametrize("name", typed_views())
def test_documented_fields_are_the_document_type(name: str) -> None:
    """A typed document's page documents exactly its type's fields, with the type's types."""
    schema = schema_tables(PANES_DOCS / f"{name}.md")[""]
    doc_type = typing.get_type_hints(views()[name].document)["return"]
    typed = typed_fields(doc_type, schema)
    assert set(typed) - set(schema) == set(), f"docs/panes/{name}.md lacks these fields of the type"
    assert set(schema) - set(typed) == set(), f"docs/panes/{name}.md documents fields the type lacks"
    wrong = {f: (schema[f], t) for f, t in typed.items() if schema[f] != t}
    assert not wrong, f"docs/panes/{name}.md: documented types are not the type's"


def test_column_keys_are_fields_of_the_rows() -> None:
    """A typed pane's columns are keyed by a Literal of the fields of the rows its table lists
    (one of the document's lists: ``rows``, the OOM pane's ``events``; or the rows a view's
    ``rows`` gives its table, the Leaks pane's, a document row with the tree's internals)."""
    for name in typed_views():
        view = views()[name]
        hints = typing.get_type_hints(typing.get_type_hints(view.document)["return"])
        table = getattr(view, "rows", None)
        if table is not None:
            hints["<table>"] = typing.get_type_hints(table)["return"]
        lists = [typing.get_args(h)[0] for h in hints.values() if typing.get_origin(h) is list]
        row_fields = [set(typing.get_type_hints(t)) for t in lists if typing.is_typeddict(t)]
        keys = {c.key for c in view.columns}
        assert any(keys <= fields for fields in row_fields), name


@pytest.mark.parametrize("section", SECTIONS)
def test_the_drill_ins_sections_are_their_types(section: str) -> None:
    """The drill-in's document is one TypedDict per section: each is what the page's "every
    section" table and the section's own table document, and its table's columns are fields of
    its rows."""
    tables = schema_tables(PANES_DOCS / "process.md")
    schema = dict(tables["every section"], **tables[section])
    typed = typed_fields(SECTION_DOCS[section], schema)
    assert set(typed) - set(schema) == set(), f"docs/panes/process.md lacks these fields of {section}'s type"
    assert set(schema) - set(typed) == set(), f"docs/panes/process.md documents fields {section}'s type lacks"
    wrong = {f: (schema[f], t) for f, t in typed.items() if schema[f] != t}
    assert not wrong, f"docs/panes/process.md: documented types are not {section}'s type's"
    (row,) = typing.get_args(typing.get_type_hints(SECTION_DOCS[section])["rows"])
    assert {c.key for c in SECTION_COLUMNS[section]} <= set(typing.get_type_hints(row)), section


def test_the_drill_in_returns_its_sections_types() -> None:
    """``document`` is declared to return the union of the sections' types, and each section's
    document is tagged by its ``section``."""
    union = typing.get_type_hints(views()["process"].document)["return"]
    assert set(typing.get_args(union)) == set(SECTION_DOCS.values())
    for section, td in SECTION_DOCS.items():
        assert typing.get_args(typing.get_type_hints(td)["section"]) == (section,)
