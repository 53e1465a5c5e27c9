"""Shared pane: four sections, one at a time (`v` / `V` step through them): System V segments
with the shm call log, POSIX shared memory (tmpfs files and memfds), huge pages (per process,
pools, THP, madvise), page migration by reason. A summary above the table breaks the header's
Shmem down; the box below shows what the selected row holds. Enter on a segment lists the
processes mapping it (Enter again: back to the log); on a process, drills into it."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Static

from memtop.core import fmt
from memtop.state import State
from memtop.ui.lines import show_text
from memtop.ui.panes.base import DrillIn, FilterablePane, StatusLine, cursor_key, fill_table
from memtop.ui.table import FastTable
from memtop.views.shared import (
    NOT_SNOOPING,
    NUMA_COUNTERS,
    PANE_SECTIONS,
    THP_COUNTERS,
    key_hex,
    section_table,
)

SECTION_TITLES = {"sysv": "SysV", "posix": "POSIX/memfd", "huge": "Huge pages", "migrate": "Migration"}
#: log lines the detail box shows under the System V table
LOG_LINES = 8


class SharedPane(FilterablePane):
    view_name = "shared"
    filter_hint = "filter segments: shmid, key (0x…), pid or command"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("v", "section(1)", "Section"),
        Binding("V", "section(-1)", "Section ←", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.opts.sort, self.opts.reverse = "rss_bytes", True
        self.section = PANE_SECTIONS[0]
        self._state: State | None = None
        self._doc: dict[str, Any] | None = None
        self._rows: dict[str, dict[str, Any]] = {}
        #: the segment whose mappers the detail box lists (Enter), None: the call log
        self._open: int | None = None

    def compose(self) -> ComposeResult:
        yield StatusLine(id="shared-status", classes="pane-status")
        yield Static(id="shared-summary")
        yield FastTable(id="shared-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="shared-detail")

    def focus_default(self) -> None:
        self.query_one("#shared-table", DataTable).focus()

    def _redraw(self) -> None:
        if self._state is not None:
            self.refresh_from(self._state)

    def action_section(self, step: int) -> None:
        i = PANE_SECTIONS.index(self.section)
        self.section = PANE_SECTIONS[(i + step) % len(PANE_SECTIONS)]
        self._open = None
        table = self.query_one("#shared-table", DataTable)
        table.clear(columns=True)  # another section's columns
        from memtop.ui.panes import base

        base._MEMOS.pop(table, None)
        self._redraw()

    def refresh_from(self, state: State) -> None:
        self._state = state
        doc = self._doc = self.view.document(state, self.opts)
        status = self.status_text(state)
        tabs = " ".join(
            f"[{SECTION_TITLES[s]}]" if s == self.section else SECTION_TITLES[s] for s in PANE_SECTIONS
        )
        status.append(f"   {tabs}  (v: next)")
        if self.opts.filter:
            status.append(f"  filter: {self.opts.filter}", style="bold")
        show_text(self.query_one("#shared-status", StatusLine), status)
        show_text(self.query_one("#shared-summary", Static), summary(doc, self.section))
        columns, rows, key = section_table(doc, self.section)
        table = self.query_one("#shared-table", DataTable)
        fill_table(table, columns, rows, key)
        self._rows = {str(r[key]): r for r in rows}
        self._detail(table)

    def _selected(self, table: DataTable[Any]) -> dict[str, Any] | None:
        key = cursor_key(table)
        return None if key is None else self._rows.get(key)

    def _detail(self, table: DataTable[Any]) -> None:
        doc = self._doc
        if doc is None:
            return
        row = self._selected(table)
        show_text(self.query_one("#shared-detail", Static), detail(doc, self.section, row, self._open))

    @on(DataTable.RowHighlighted, "#shared-table")
    def _highlight(self, _event: DataTable.RowHighlighted) -> None:
        self._detail(self.query_one("#shared-table", DataTable))

    @on(DataTable.RowSelected, "#shared-table")
    def _row(self, event: DataTable.RowSelected) -> None:
        row = self._rows.get(str(event.row_key.value))
        if row is None:
            return
        if self.section == "sysv":
            self._open = None if self._open == row["shmid"] else int(row["shmid"])
            self._detail(self.query_one("#shared-table", DataTable))
        elif row.get("pid") is not None:
            self.post_message(DrillIn(int(row["pid"])))


def summary(doc: dict[str, Any], section: str) -> Text:
    """The lines above the table: Shmem broken down, then the section's own figures."""
    t = Text(no_wrap=True, overflow="ellipsis")
    sh = doc["shmem"]
    if sh is not None:
        t.append(f"Shmem {fmt.bytes_h(sh['shmem_bytes'])}", style="bold")
        t.append(
            f" = SysV {fmt.bytes_h(sh['sysv_bytes'])} + tmpfs {fmt.bytes_h(sh['tmpfs_bytes'])}"
            f" + memfd {fmt.bytes_h(sh['memfd_bytes'])} + other {fmt.bytes_h(sh['other_bytes'])}"
        )
    sv, hu, mi = doc["sysv"], doc["huge"], doc["migrate"]
    t.append("\n")
    if section == "sysv":
        if sv["readable"] is False:
            t.append(f"System V segments not read: {sv['why']}", style="yellow")
        else:
            t.append(f"{fmt.plural(sv['segments'], 'segment')} {fmt.bytes_h(sv['rss_bytes'])} resident; ")
            style = "bold red" if sv["orphans"] else ""
            t.append(
                f"{fmt.plural(sv['orphans'], 'orphan')} {fmt.bytes_h(sv['orphan_rss_bytes'])}"
                f" (+{fmt.bytes_h(sv['orphan_swap_bytes'])} swapped) held by no process",
                style=style,
            )
    elif section == "posix":
        mounts = doc["posix"]["mounts"]
        t.append(
            "tmpfs: "
            + (
                "  ".join(f"{m['mount']} {fmt.bytes_h(m['used_bytes'])}" for m in mounts)
                if mounts
                else "not read yet"
            )
        )
    elif section == "huge":
        pools = "  ".join(
            f"{fmt.bytes_h(p['page_size_bytes'])}: {p['used']}/{p['total']} used, {p['reserved']} rsvd,"
            f" {p['surplus']} surp"
            for p in hu["pools"]
            if p["total"] or p["surplus"]
        )
        t.append(f"hugetlb {pools or 'no pool'}")
        t.append(
            f"\nTHP [{hu['thp_enabled']}] defrag [{hu['thp_defrag']}]  AnonHugePages {fmt.bytes_h(hu['anon_huge_bytes'])}"
        )
        if hu["thp_per_s"] is not None:
            t.append(
                "  "
                + " ".join(
                    f"{label} {fmt.count_h(hu['thp_per_s'].get(k, 0))}/s" for k, label in THP_COUNTERS[:3]
                )
            )
    elif section == "migrate":
        vm = mi["vmstat"]
        if vm:
            t.append(
                "  ".join(f"{label} {fmt.count_h(vm[k]['per_s'])}/s" for k, label in NUMA_COUNTERS if k in vm)
            )
        else:
            t.append("no /proc/vmstat reading yet")
    return t


def detail(doc: dict[str, Any], section: str, row: dict[str, Any] | None, open_shmid: int | None) -> Text:
    """The box under the table: the selected row's story (a segment's mappers, the call log, a
    process's madvise ranges, the pools, khugepaged)."""
    t = Text(no_wrap=True, overflow="ellipsis")
    if section == "sysv":
        sv = doc["sysv"]
        if row is not None and open_shmid == row["shmid"]:
            t.append(f"segment {row['shmid']} key {key_hex(row['key'])}", style="bold")
            t.append(
                f": {fmt.bytes_h(row['size_bytes'])}, {fmt.plural(row['nattch'], 'attach', 'attaches')},"
                f" created by {row['creator']}, last used by {row['last']}\n"
            )
            if row["mappers"]:
                t.append("mapped by: " + ", ".join(f"{m['pid']} {m['comm']}" for m in row["mappers"]))
            elif row["orphan"]:
                t.append(
                    "no process maps it: it holds its memory until shmctl(IPC_RMID) or `ipcrm -m`",
                    style="red",
                )
            else:
                t.append("no mapper found in the processes' maps yet (read every 5 s)", style="dim")
            return t
        events = sv["events"]
        if events is None:
            t.append(f"shm calls not traced: {NOT_SNOOPING}", style="yellow")
            return t
        if row is not None:
            events = [e for e in events if e["shmid"] == row["shmid"]] or events
        t.append(
            "shm calls, newest first" + (" (Enter: who maps it)" if row is not None else ""), style="bold"
        )
        for e in [e for e in events if e["call"].startswith("shm")][:LOG_LINES]:
            t.append(f"\n{fmt.age_h(e['age_ns'] / 1e9):>6} {e['pid']:>7} {e['comm']:<16} ")
            t.append(e["what"], style="red" if e["error"] else "")
        if not events:
            t.append("\nnone since memtop started", style="dim")
        return t
    if section == "posix":
        if row is None:
            t.append(
                "no tmpfs file or memfd found" if doc["posix"]["scanned"] else "not scanned yet", style="dim"
            )
            return t
        t.append(row["name"], style="bold")
        t.append(
            f"  {fmt.bytes_h(row['alloc_bytes'])} allocated of {fmt.bytes_h(row['size_bytes'])}"
            f"  owner {row['owner']}"
        )
        if row["kind"] == "memfd":
            t.append(f"  pid {row['pid']}  " + ("mapped" if row["mapped"] else "open, not mapped"))
        return t
    if section == "huge":
        hu = doc["huge"]
        kh = hu["khugepaged"]
        if kh is not None:
            coll = ", ".join(f"{k} {v}" for k, v in sorted(kh["collapses"].items())) or "none"
            t.append(f"khugepaged: {fmt.count_h(kh['pmds_scanned'])} PMDs scanned; collapses: {coll}\n")
        mad = next((m for m in hu["madvise"] or [] if row is not None and m["pid"] == row["pid"]), None)
        if mad is None:
            t.append(
                "madvise(MADV_HUGEPAGE / NOHUGEPAGE / COLLAPSE): "
                + ("not traced" if hu["madvise"] is None else "none by this process"),
                style="dim",
            )
        else:
            t.append(f"{mad['comm']} [{mad['pid']}] madvise ranges, newest first", style="bold")
            for r in mad["ranges"][:6]:
                end = (r["start"] or 0) + (r["length_bytes"] or 0)
                t.append(
                    f"\n  {(r['start'] or 0):#x}-{end:#x} {fmt.bytes_h(r['length_bytes'])} {r['advice']}"
                    f" {r['error'] or 'ok'}"
                )
        return t
    mi = doc["migrate"]
    if mi["reasons"] is None:
        t.append("migrations not traced: the shared probe is not running", style="yellow")
    elif not mi["reasons"]:
        t.append("no page migrated since memtop started", style="dim")
    elif row is not None:
        t.append(
            f"{row['reason']}: {fmt.count_h(row['succeeded'])} pages migrated, {fmt.count_h(row['failed'])} failed"
            f" in {fmt.count_h(row['calls'])} migrate_pages() calls; THP {row['thp_succeeded']} moved,"
            f" {row['thp_failed']} failed, {row['thp_split']} split"
        )
    return t
