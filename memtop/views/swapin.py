"""The swap-in pane: who waits on swap and for how long, the wait histogram, and the swap system
line (pswpin/pswpout rates, swap devices, zswap, PSI)."""

from __future__ import annotations

from typing import Any

from memtop.core import fmt
from memtop.linux import cgroupfs
from memtop.state import State
from memtop.state.base import log2_le
from memtop.state.cgroups import CgroupsState
from memtop.state.host import HostState
from memtop.state.processes import ProcessesState
from memtop.state.swapin import SwapinState
from memtop.views import Column, Options, View, measuring, render_table

SORT_KEYS = (
    "pid",
    "comm",
    "swapins",
    "swapins_per_s",
    "wait_ns_total",
    "wait_ns_avg",
    "wait_ns_max",
    "file_major_faults",
)


def histogram(counts: tuple[int, ...]) -> list[dict[str, int]]:
    """``[{"le_ns", "count"}]`` from bucket 0 up to the highest non-empty bucket."""
    top = max((i for i, c in enumerate(counts) if c), default=-1)
    return [{"le_ns": log2_le(i), "count": int(counts[i])} for i in range(top + 1)]


def dense(pairs: tuple[tuple[int, int], ...]) -> tuple[int, ...]:
    """(bucket, count) pairs as a dense tuple of counts."""
    out = [0] * (max((b for b, _ in pairs), default=-1) + 1)
    for b, c in pairs:
        out[b] += c
    return tuple(out)


def bar(count: int, most: int, width: int = 40) -> str:
    return "█" * (round(count * width / most) if most else 0)


def hist_lines(hist: list[dict[str, int]]) -> list[tuple[str, int]]:
    """(label, count) per bucket to show: bucket 0 as "no wait" (faults that never blocked),
    then from the first non-empty bucket on (empty leading buckets say nothing)."""
    out: list[tuple[str, int]] = []
    if hist and hist[0]["count"]:
        out.append(("no wait", hist[0]["count"]))
    first = next((i for i, h in enumerate(hist) if i and h["count"]), len(hist))
    for i in range(first, len(hist)):
        lo = hist[i - 1]["le_ns"] + 1
        out.append((f"{fmt.ns_h(lo)}-{fmt.ns_h(hist[i]['le_ns'])}", hist[i]["count"]))
    return out


class SwapinView(View):
    name = "swapin"
    title = "Swap-in waiters"
    tab_title = "Swap"  # nine tabs fit 80 columns unshortened (the pane is titled "Swap-in waiters")
    order = 40
    probes = ("swapin", "swapinfo")
    legend = (
        ("†", "after a name: the process has exited; its row keeps the figures it ended with"),
        (
            "N swap-ins waited T",
            "totals since memtop started of every process listed, and their "
            "file major faults (the same wait, on the page cache)",
        ),
    )
    vmstat_fallback = ("swapin", (("pswpin", "swap-ins", "rate"), ("pgmajfault", "major faults", "rate")))
    columns = (
        Column("pid", "PID"),
        Column("command", "COMMAND", numeric=False),
        Column("swapins", "SWAPINS", fmt.count_h),
        Column("swapins_per_s", "SWAPIN/s", fmt.count_h),
        Column("wait_ns_total", "WAITED", fmt.ns_h),
        Column("wait_ns_avg", "AVG WAIT", fmt.ns_h),
        Column("wait_ns_max", "MAX WAIT", fmt.ns_h),
        Column("file_major_faults", "FILE MAJFLT", fmt.count_h),
        Column("cgroup", "CGROUP", cgroupfs.short_path, numeric=False),
    )

    def document(self, state: State, opts: Options) -> dict[str, Any]:
        st = state.get(SwapinState)
        running = state.get(ProcessesState).rows
        rows: list[dict[str, Any]] = []
        memcg = state.get(CgroupsState).pid_memcg
        for pid, r in st.rows.items():
            rec = r.rec
            if opts.pid is not None and pid != opts.pid:
                continue
            if opts.pid is None and not rec.swapins and not rec.file_major_faults:
                continue  # nothing to show (a dead sub-second process): not a row of waiters
            exited = bool(running) and pid not in running
            row = {
                "pid": pid,
                "comm": rec.comm,
                "exited": exited,
                "command": rec.comm + (" †" if exited else ""),  # short: the columns stay put
                "swapins": rec.swapins,
                "wait_ns_total": rec.swapin_wait_ns,
                "wait_ns_max": rec.swapin_wait_max_ns,
                "file_major_faults": rec.file_major_faults,
                "swapins_per_s": round(r.swapins_per_s, 3),
                "wait_ns_avg": rec.swapin_wait_ns // rec.swapins if rec.swapins else 0,
                "swapins_nowait": rec.swapins_nowait,
                "file_wait_ns_total": rec.file_wait_ns,
                "file_wait_ns_max": rec.file_wait_max_ns,
                "cgroup": memcg.get(pid),
            }
            if opts.filter and opts.filter.lower() not in rec.comm.lower() and opts.filter != str(pid):
                continue
            rows.append(row)
        key = opts.sort if opts.sort in SORT_KEYS else "wait_ns_total"
        rows.sort(key=lambda row: (row[key], row["pid"]), reverse=opts.reverse)
        hist = st.hist
        swap_counts: tuple[int, ...] = hist.swapin_counts if hist else ()
        file_counts: tuple[int, ...] = hist.file_counts if hist else ()
        if opts.pid is not None:  # one process: its own histograms
            row_rec = st.rows[opts.pid].rec if opts.pid in st.rows else None
            swap_counts = dense(row_rec.swapin_hist if row_rec else ())
            file_counts = dense(row_rec.file_hist if row_rec else ())
        measured = measuring(state, "swapin") or bool(st.rows)  # no wait seen is not "no wait"
        return {
            **self.head(state),
            "rows": rows if measured else [],
            "histogram": histogram(swap_counts) if measured else [],
            "file_histogram": histogram(file_counts) if measured else [],
            "system": system_line(state),
        }

    def text_extra(self, doc: dict[str, Any]) -> str:
        out = ["", "Swap-in wait (log2 ns)"]
        lines = hist_lines(doc["histogram"])
        most = max((c for _, c in lines), default=0)
        for label, count in lines:
            out.append(f"{label:>19} {count:>9}  {bar(count, most)}")
        out.append("")
        out.extend(system_text(doc["system"]))
        return "\n".join(out) + "\n"


def system_line(state: State) -> dict[str, Any]:
    sys_state = state.get(HostState)
    info = state.get(SwapinState).swapinfo
    p = sys_state.pressure
    zswap: dict[str, Any] | None = None
    if info is not None and (info.zswap_enabled or info.zswapped_bytes):
        zswap = {
            "enabled": info.zswap_enabled,
            "pool_bytes": info.zswap_pool_bytes,
            "stored_bytes": info.zswapped_bytes,
            "zswpin_per_s": round(sys_state.vmstat_rate("zswpin"), 3),
            "zswpout_per_s": round(sys_state.vmstat_rate("zswpout"), 3),
        }
    return {
        "pswpin_per_s": round(sys_state.vmstat_rate("pswpin"), 3),
        "pswpout_per_s": round(sys_state.vmstat_rate("pswpout"), 3),
        "pswpin_since_start": sys_state.vmstat_since_start("pswpin"),
        "pswpout_since_start": sys_state.vmstat_since_start("pswpout"),
        "swap_devices": [
            {"name": d[0], "type": d[1], "size_bytes": d[2], "used_bytes": d[3], "priority": d[4]}
            for d in (info.devices if info else ())
        ]
        if info is not None or measuring(state, "swapinfo")
        else None,
        "zswap": zswap,
        "psi": None
        if p is None
        else {
            "some_avg10": p.some_avg10,
            "full_avg10": p.full_avg10,
            "some_avg60": p.some_avg60,
            "full_avg60": p.full_avg60,
        },
    }


def system_text(sysline: dict[str, Any]) -> list[str]:
    """The system line as plain text lines (text snapshot and the pane's header)."""
    lines = [
        f"pswpin {fmt.count_h(sysline['pswpin_per_s'])}/s  pswpout {fmt.count_h(sysline['pswpout_per_s'])}/s"
        f"  (since start: in {fmt.count_h(sysline['pswpin_since_start'])}"
        f" out {fmt.count_h(sysline['pswpout_since_start'])} pages)"
    ]
    psi = sysline.get("psi")
    if psi:
        lines[0] += f"  PSI memory some {psi['some_avg10']:.2f} full {psi['full_avg10']:.2f} (avg10)"
    z = sysline.get("zswap")
    if z:
        lines.append(
            f"zswap {'on' if z['enabled'] else 'off'}: {fmt.bytes_h(z['stored_bytes'])} stored in "
            f"{fmt.bytes_h(z['pool_bytes'])}  in {fmt.count_h(z['zswpin_per_s'])}/s out {fmt.count_h(z['zswpout_per_s'])}/s"
        )
    devs = sysline.get("swap_devices")
    if devs is None:
        lines.append("swap devices not read (swapinfo not running)")
        devs = []
    elif not devs:
        lines.append("no swap device")
    for d in devs:
        used = d["used_bytes"] / d["size_bytes"] * 100 if d["size_bytes"] else 0.0
        lines.append(
            f"{d['name']}  {d['type']}  {fmt.bytes_h(d['used_bytes'])} / {fmt.bytes_h(d['size_bytes'])}"
            f" ({used:.1f}%)  prio {d['priority']}"
        )
    return lines


__all__ = ["SwapinView", "render_table", "histogram", "hist_lines", "system_line", "system_text", "SORT_KEYS"]
