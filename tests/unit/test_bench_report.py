"""bench/RESULTS.md and the table in docs/performance.md are what bench/report.py makes of the
committed bench/results/*.json, so neither can drift from the figures; a figure past its target
reads as a miss."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def load_report() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_report", ROOT / "bench" / "report.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod


report = load_report()


def test_results_md_is_generated_from_the_committed_json() -> None:
    assert (ROOT / "bench" / "RESULTS.md").read_text() == report.results_md(), (
        "bench/RESULTS.md is stale: run .venv/bin/python bench/report.py"
    )


def test_performance_page_holds_the_same_table() -> None:
    page = (ROOT / "docs" / "performance.md").read_text()
    assert page == report.with_table(page), (
        "docs/performance.md is stale: run .venv/bin/python bench/report.py"
    )
    assert report.table() in page


def test_every_results_file_has_rows_and_every_case_a_file() -> None:
    names = {name for name, _ in report.CASES}
    on_disk = {p.stem for p in (ROOT / "bench" / "results").glob("*.json")}
    assert on_disk == names
    text = report.table()
    assert "not run" not in text
    # the header, the rule, then at least one row per case
    assert len(text.splitlines()) >= 2 + len(names)


def memtop_self_doc() -> dict[str, Any]:
    doc = json.loads((ROOT / "bench" / "results" / "memtop_self.json").read_text())
    assert isinstance(doc, dict)
    return doc


def rows_by_case(doc: dict[str, Any]) -> dict[str, Any]:
    return {row.case: row for row in report.memtop_self(doc)}


def test_a_figure_past_its_target_is_a_miss_and_one_within_it_is_met() -> None:
    doc = memtop_self_doc()
    for cond, progs in doc["summary"].items():
        progs["memtop"].update(
            first_frame_s=0.4, rss_anon_mib=40.0, rss_anon_attached_mib=40.0, all_probes_s=2.0
        )
        progs["memtop"]["cpu_s_per_min"] = 0.25 if cond == "idle" else 1.2  # at the bound: met
    rows = rows_by_case(doc)
    assert {r.met for r in rows.values()} == {"yes"}

    worse = copy.deepcopy(doc)
    worse["summary"]["idle"]["memtop"]["cpu_s_per_min"] = 0.26
    worse["summary"]["fault storm"]["memtop"]["cpu_s_per_min"] = 1.0  # within the loaded bound
    worse["summary"]["idle"]["memtop"]["rss_anon_mib"] = 40.1
    rows = rows_by_case(worse)
    size = doc["size"]
    assert rows[f"4 · the TUI at {size}, 1 s refresh, steady, CPU s a minute: idle"].met == "**no**"
    assert rows[f"4 · the TUI at {size}, 1 s refresh, steady, CPU s a minute: fault storm"].met == "yes"
    assert [r.met for c, r in rows.items() if "RssAnon" in c] == ["**no**"]
    # RssAnon is held to the target both once attached and at the window's end
    attached = copy.deepcopy(doc)
    attached["summary"]["1000 sleepers"]["memtop"]["rss_anon_attached_mib"] = 40.1
    rows = rows_by_case(attached)
    assert [r.met for c, r in rows.items() if "RssAnon" in c] == ["**no**"]


def test_the_tools_beside_memtop_are_in_its_rows() -> None:
    doc = memtop_self_doc()
    rows = rows_by_case(doc)
    cpu = next(r for c, r in rows.items() if c.endswith("CPU s a minute: idle"))
    beside = [p for p in doc["summary"]["idle"] if p != "memtop"]
    assert beside, "the run measured nothing beside memtop"
    for prog in beside:
        assert f"{prog} " in cpu.figure


def test_strict_targets_miss_at_the_bound() -> None:
    growth = report.TARGETS["soak_growth_mib"]
    assert growth.met(9.99) == "yes" and growth.met(10.0) == "**no**"
    ratio = report.TARGETS["fault_ratio"]
    assert ratio.met(1.03) == "yes" and ratio.met(1.031) == "**no**"


def test_a_pipe_in_a_figure_does_not_split_the_row() -> None:
    assert report.cell("a|b") == "a\\|b"
