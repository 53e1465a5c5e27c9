"""Views: what each pane shows, as data. Pure Python (no Textual), shared by the TUI, snapshots
and batch mode.

A view turns ``State`` into a *document* (the JSON snapshot, a dict) and describes its main table
with ``Column``s so the text snapshot and the TUI table render the same rows. Views register
themselves by subclassing :class:`View`; every submodule of this package is imported by
:func:`views`.
"""

from __future__ import annotations

import datetime
import functools
import importlib
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypedDict, TypeVar

from memtop.core import fmt
from memtop.core.errors import MemtopError
from memtop.state import State
from memtop.views.levels import Level, level

#: a column's key: a field of its table's rows (each view names its keys as a Literal)
K = TypeVar("K", bound=str, covariant=True)
#: a view's document: the TypedDict (or union of them) its ``document`` returns
D = TypeVar("D", bound=Mapping[str, Any])


@dataclass(frozen=True)
class Column(Generic[K]):
    key: K
    label: str
    fmt: Callable[[Any], str] = str
    numeric: bool = True
    #: the widest cell the column shows, when its formatter does not say (memtop/views/layout.py)
    width: int = 0
    #: a metric of memtop.views.levels whose thresholds colour this cell, read from ``level_key``
    #: (default: this column's own value)
    level: str = ""
    level_key: str = ""
    #: on a narrow terminal (memtop/views/layout.py): 0 always shown, higher dropped sooner
    priority: int = 0
    #: a name column may be cut to this many cells (an ellipsis marks the cut); 0: never cut
    min_width: int = 0

    def cell(self, row: Mapping[str, Any]) -> str:
        value = row.get(self.key)
        return "-" if value is None else self.fmt(value)

    def level_of(self, row: Mapping[str, Any]) -> Level:
        """The cell's level ("", "warn", "bad") when the column has thresholds."""
        if not self.level:
            return ""
        value = row.get(self.level_key or self.key)
        return level(self.level, value if isinstance(value, int | float) else None)


@dataclass
class Options:
    """What a view is asked to show: sort, filter, target pid, section."""

    sort: str = ""
    reverse: bool = True
    filter: str = ""
    pid: int | None = None
    section: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def wall_offset_ns(state: State) -> int | None:
    """What turns the batches' CLOCK_MONOTONIC into wall-clock time on the machine that took them
    (``wall_ns`` of many timestamps: look it up once); None when not known."""
    from memtop.state.host import HostState

    facts = state.get(HostState).facts
    if facts is None or not facts.wall_minus_monotonic_ns:
        return None
    return facts.wall_minus_monotonic_ns


def wall_ns(state: State, ts_ns: int | None = None) -> int | None:
    """Wall-clock time (ns since the epoch) of ``ts_ns`` (default: the state's latest sample), on
    the clock of the machine that took it (a replay's recorded time); None when not known."""
    off = wall_offset_ns(state)
    ts = state.ts_ns if ts_ns is None else ts_ns
    if off is None or not ts:
        return None
    return ts + off


def taken_at(state: State) -> str | None:
    """The state's latest sample's wall-clock time, ISO 8601 in UTC (``2026-11-21T13:43:12.345Z``)."""
    ns = wall_ns(state)
    if ns is None:
        return None
    stamp = datetime.datetime.fromtimestamp(ns / 1e9, datetime.UTC)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


#: probe states whose figures are measurements (detached: measured until it detached). An
#: erroring probe's figures are its last good reading, of some age: not current
MEASURING = ("attached", "detached")
#: how many ticks without a reading a pane waits before it greys what its probe fed (one missed
#: poll is noise; two is a probe that is not measuring)
STALE_AFTER_TICKS = 2

#: the probes whose figures are on screen whatever pane is shown, so the TUI always watches them
#: (``Source.watch``): the header's memory, swap and pressure (procfs; swapinfo's compressed
#: swap) and the notices any screen shows: OOM kills (oom), kills by signal (kills), the
#: out-of-memory forecasts (cgroups' usage, procfs' MemAvailable). The other probes are polled
#: less often while no pane shown names them (``View.probes``).
ALWAYS_SHOWN_PROBES: tuple[str, ...] = ("procfs", "swapinfo", "oom", "kills", "cgroups")
#: of those, what the header draws (memory, swap, pressure): with the shown pane's own probes,
#: all the TUI's first frame waits for. The notices need a second reading (a kill counted, a
#: usage's slope), so their probes are read at the tick right after the first frame, as is the
#: cgroups probe for the Processes pane's CGROUP column (its cells read "-" until then, as
#: RECLAIM Σ's do until the vmscan probe attaches): ~0.3 s of a first frame in a fault storm
#: on a machine with 500 memcgs (docs/performance.md).
FIRST_FRAME_PROBES: tuple[str, ...] = ("procfs", "swapinfo")


class ProbeStatusDoc(TypedDict):
    """A probe's status in a document (``probes.<name>``)."""

    state: str
    message: str
    hint: str
    failures: int
    reading_age_s: float | None


class Head(TypedDict):
    """The fields every pane's document begins with."""

    pane: str
    source: str
    taken_at_ns: int
    taken_at: str | None
    probes: dict[str, ProbeStatusDoc]


def probe_status(state: State, name: str) -> ProbeStatusDoc:
    """``{"state", "message", "hint", "failures", "reading_age_s"}`` of probe ``name`` as the
    state last heard it; "absent" when this session never ran it (``--no-bpf``, a recording made
    without it). ``reading_age_s``: how old its latest good reading is (0 while attached, None
    when it never read), so a figure it fed never passes for current."""
    st = state.statuses.get(name)
    age_ns = state.reading_age_ns(name)
    age_s = round(age_ns / 1e9, 3) if age_ns is not None else None
    if st is None:
        return {
            "state": "absent",
            "message": "not running in this session",
            "hint": "",
            "failures": 0,
            "reading_age_s": None,
        }
    return {
        "state": st.state,
        "message": st.message,
        "hint": st.hint,
        "failures": st.failures,
        "reading_age_s": age_s,
    }


def stale_probes(state: State, names: tuple[str, ...]) -> list[str]:
    """Those of ``names`` that fed figures once but have missed :data:`STALE_AFTER_TICKS` ticks
    of readings since, erroring or failed: what they fed is old. A probe detached on purpose (a
    tracer the user turned off) is not one: its figures are marked stopped by its pane."""
    out = []
    for n in names:
        st = state.statuses.get(n)
        if (
            st is not None
            and st.state in ("erroring", "failed")
            and state.missed_ticks(n) >= STALE_AFTER_TICKS
        ):
            out.append(n)
    return out


def no_reading_text(state: State, name: str) -> str:
    """``cgroups: no reading for 12 s (poll failed 6×: <reason>)`` for a probe not measuring that
    read before; "" for one measuring or that never read."""
    st = state.statuses.get(name)
    age_ns = state.reading_age_ns(name)
    if st is None or st.state == "attached" or age_ns is None:
        return ""
    out = f"{name}: no reading for {fmt_age(age_ns)}"
    if st.state == "erroring":
        out += f" (poll failed {st.failures}×: {st.message})"
    elif st.message:
        out += f" ({st.state}: {st.message})"
    return out


def fmt_age(age_ns: int) -> str:
    """An age for a sentence: ``12 s``, ``3 min 20 s``, ``2 h 5 min``."""
    s = int(age_ns // 1_000_000_000)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def measuring(state: State, name: str) -> bool:
    """True when probe ``name``'s figures are measurements; a zero from a probe that failed, is
    still attaching or never ran is not one (documents give None, text says why)."""
    st = state.statuses.get(name)
    return st is not None and st.state in MEASURING


def status_notes(statuses: Mapping[str, Mapping[str, Any]]) -> str:
    """Text lines for the probes of a document that are not measuring: which, and why."""
    lines = []
    for name, st in statuses.items():
        if st["state"] in MEASURING:
            continue
        what = {"pending": "waiting to attach", "attaching": "attaching"}.get(st["state"], st["state"])
        if st["state"] == "erroring":
            what = f"erroring (poll failed {st.get('failures', 0)}×)"
        line = f"note: {name} {what}"
        if st["message"] and st["state"] not in ("pending", "attaching"):
            line += f" — {st['message']}"
        if st["hint"]:
            line += f" (hint: {st['hint']})"
        age = st.get("reading_age_s")
        if isinstance(age, int | float) and age > 0:
            lines.append(line + f"; its figures are its last reading, {fmt_age(int(age * 1e9))} old")
            continue
        lines.append(line + "; its figures are not measured")
    return "".join(f"{line}\n" for line in lines)


#: the marks every pane's status line and tables may show: (mark, what it means)
LEGEND: tuple[tuple[str, str], ...] = (
    (
        "NAME: state",
        "the probes that feed the pane: attached; failed (why, what to do); off (it runs "
        "when its key is pressed); not running (not loaded in this session or recording)",
    ),
    (
        "lost N",
        "events a probe could not deliver (its ring was full); totals read from kernel maps still count them",
    ),
    ("▼ ▲", "after a column's name: the table's sort and its direction"),
)


class View(Generic[D]):
    """A pane's view, typed by its document (``View[ReclaimDoc]``): ``document`` builds it, and
    ``text_extra`` and ``table_rows`` read it through that type. Code that takes any view
    writes ``View[Any]``."""

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    #: the tab's label when the title is long (every tab fits on one line of 80 columns)
    tab_title: ClassVar[str] = ""
    #: on-demand tracers (``Source.trace_kernel``) attached while the pane is shown, or while a
    #: snapshot or --batch of it runs: they cost too much to run unseen
    while_shown: ClassVar[tuple[str, ...]] = ()
    #: on-demand probes that run only when the user asks (a key): not running is their normal
    on_request: ClassVar[tuple[str, ...]] = ()
    #: groups of on-request probes of which one runs at a time (the same tracer with and without
    #: kernel stacks): the status line names the one running, or the first as off
    alternatives: ClassVar[tuple[tuple[str, ...], ...]] = ()
    order: ClassVar[int] = 100
    columns: ClassVar[tuple[Column[str], ...]] = ()
    #: the probes whose data this view shows, declared once here: documents carry their statuses
    #: (``"probes"``), text snapshots a note for each one not measuring, the pane its status line
    probes: ClassVar[tuple[str, ...]] = ()
    #: the sections `memtop snapshot --section` may ask for (the drill-in's tabs)
    sections: ClassVar[tuple[str, ...]] = ()
    #: export formats besides json/txt/svg (e.g. "folded")
    extra_formats: ClassVar[tuple[str, ...]] = ()
    #: export formats written as bytes (e.g. "pprof": a gzipped protobuf), by ``export_binary``
    binary_formats: ClassVar[tuple[str, ...]] = ()
    #: what the pane's marks and status-line counts mean, (mark, meaning) each: the help screen's
    #: legend, before the marks every pane shares (LEGEND)
    legend: ClassVar[tuple[tuple[str, str], ...]] = ()
    registry: ClassVar[dict[str, type[View[Any]]]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.name:
            View.registry[cls.name] = cls

    def default_options(self) -> Options:
        """What the pane shows before the user changes anything (and what a headless snapshot or
        `--batch` shows): the TUI's pane starts from these too."""
        return Options()

    def ready(self, state: State, opts: Options) -> bool:
        """Whether the state holds a first complete reading of what this view shows (a snapshot
        taken headless waits a little for it); most views show whatever is there."""
        return True

    @functools.cached_property
    def own_probes(self) -> tuple[str, ...]:
        """Those of its probes that feed no other pane (the drill-in's: what it attaches for its
        target); the others' statuses are on the panes they also feed."""
        fed = panes_of_probes()
        return tuple(p for p in self.probes if fed.get(p) == (self.name,))

    def document(self, state: State, opts: Options) -> D:
        """The pane's document (its JSON snapshot): a TypedDict of the view's own."""
        raise NotImplementedError

    def table_rows(self, doc: D) -> Sequence[Mapping[str, Any]]:
        """The rows of the pane's main table (the text snapshot's too): the document's ``rows``."""
        rows = doc.get("rows", [])
        return rows if isinstance(rows, list) else []

    def statuses(self, state: State) -> dict[str, ProbeStatusDoc]:
        """The statuses of this view's probes, for its document."""
        return {name: probe_status(state, name) for name in self.probes}

    def head(self, state: State) -> Head:
        """The fields every pane's document begins with: which pane, from what source, when, and
        the statuses of its probes."""
        return {
            "pane": self.name,
            "source": state.mode,
            "taken_at_ns": state.ts_ns,
            "taken_at": taken_at(state),
            "probes": self.statuses(state),
        }

    #: what /proc/vmstat tells of this pane's subject while its probe cannot see:
    #: (probe, [(vmstat counter, label, "rate" or "total")])
    vmstat_fallback: ClassVar[tuple[str, tuple[tuple[str, str, str], ...]]] = ("", ())

    def blind_note(self, state: State) -> str:
        """When the probe that feeds this pane is not measuring: what /proc/vmstat says instead
        (the kernel's own counters, machine-wide), e.g. "from /proc/vmstat: pswpin 7.5k/s"; ""
        otherwise or before two vmstat samples."""
        probe, counters = self.vmstat_fallback
        if not probe or measuring(state, probe):
            return ""
        from memtop.state.host import HostState

        host = state.get(HostState)
        if not host.vmstat or not host.vmstat_prev:
            return ""

        def total(counters: dict[str, int], name: str) -> int | None:
            # "name*" sums a family (allocstall_dma32, allocstall_normal, ...)
            if name.endswith("*"):
                found = [v for k, v in counters.items() if k.startswith(name[:-1])]
                return sum(found) if found else None
            return counters.get(name)

        parts = []
        dt_ns = host.vmstat_ts_ns - host.vmstat_prev_ts_ns
        for counter, label, how in counters:
            cur, prev = total(host.vmstat, counter), total(host.vmstat_prev, counter)
            if cur is None or prev is None:
                continue
            if how == "rate":
                per_s = (cur - prev) * 1e9 / dt_ns if dt_ns > 0 and cur >= prev else 0.0
                parts.append(f"{label} {fmt.count_h(per_s)}/s")
            else:
                first = total(host.vmstat_first, counter)
                parts.append(f"{label} {fmt.count_h(cur - (first or 0))} since start")
        return "from /proc/vmstat (machine-wide): " + ", ".join(parts) if parts else ""

    def text(self, state: State, opts: Options) -> str:
        doc = self.document(state, opts)
        notes = status_notes(doc.get("probes") or {})
        blind = self.blind_note(state)
        if blind:
            notes += f"note: {blind}\n"
        return notes + render_table(self.title, self.columns, self.table_rows(doc)) + self.text_extra(doc)

    def text_extra(self, doc: D) -> str:
        return ""

    def export(self, state: State, opts: Options, fmt: str) -> str:
        raise MemtopError(f"pane {self.name!r} has no {fmt!r} export")

    def export_binary(self, state: State, opts: Options, fmt: str) -> bytes:
        raise MemtopError(f"pane {self.name!r} has no {fmt!r} export")


def render_table(title: str, columns: tuple[Column[str], ...], rows: Sequence[Mapping[str, Any]]) -> str:
    cells = [[c.cell(r) for c in columns] for r in rows]
    widths = [max([len(c.label)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    widths = [min(w, 60) for w in widths]

    def line(values: list[str]) -> str:
        out = []
        for i, (c, v) in enumerate(zip(columns, values, strict=False)):
            v = v[: widths[i]]
            out.append(v.rjust(widths[i]) if c.numeric else v.ljust(widths[i]))
        return "  ".join(out).rstrip()

    lines = [title, line([c.label for c in columns])]
    lines += [line(r) for r in cells]
    return "\n".join(lines) + "\n"


def _load() -> None:
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")


def views() -> dict[str, type[View[Any]]]:
    _load()
    return dict(sorted(View.registry.items(), key=lambda kv: kv[1].order))


def panes_of_probes() -> dict[str, tuple[str, ...]]:
    """Probe name -> the panes (views) it feeds, in the panes' order: what the views' ``probes``
    declare, turned around (for doctor)."""
    out: dict[str, tuple[str, ...]] = {}
    for name, view in views().items():
        for probe in view.probes:
            out[probe] = out.get(probe, ()) + (name,)
    return out


#: every view's name and its tab's label (``tab_title or title``), in the views' order: what the
#: TUI's tab line draws before any view is needed, so a session imports only the views of the
#: panes it shows (the other eleven views' modules were ~1.3 MiB of RssAnon in every TUI;
#: docs/performance.md). Each view's module is named after it. The views' own attributes are
#: the truth: tests/unit/test_view_tabs.py checks this table against them.
TABS: dict[str, str] = {
    "processes": "Processes",
    "process": "Process",
    "vmscan": "vmscan",
    "reclaim": "Reclaim",
    "swapin": "Swap",
    "oom": "OOM",
    "leaks": "Leaks",
    "cgroups": "Cgroups",
    "kernel": "Kernel",
    "shared": "Shared",
    "pagecache": "Cache",
}


def get_view(name: str) -> View[Mapping[str, Any]]:
    """The view of pane ``name``; its document is some TypedDict, read here as a Mapping (a
    caller that needs its type takes the view's class). Imports only that view's module."""
    cls = View.registry.get(name)
    if cls is None and name in TABS:
        importlib.import_module(f"{__name__}.{name}")
        cls = View.registry.get(name)
    if cls is None:
        all_views = views()
        if name not in all_views:
            raise MemtopError(f"unknown pane {name!r}", "panes: " + ", ".join(all_views))
        cls = all_views[name]
    return cls()
