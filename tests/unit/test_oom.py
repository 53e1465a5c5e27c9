"""OOM records without a kernel: the kernel log's kill line parsed, the record round trip."""

from __future__ import annotations

import os

from support import OOM_KILL

from memtop.probes.kills import KNOWN_KILLERS, match_killer
from memtop.probes.oom import ReportParser, parse_kmsg_kill, parse_kmsg_task_memcg
from memtop.records import Batch, Record, from_json, to_json
from memtop.records.cgroups import CgroupSample
from memtop.records.oom import OomScoreAdj, SignalKill
from memtop.records.processes import ProcSample
from memtop.state import State
from memtop.state.oom import OomState
from memtop.views import Options, get_view
from memtop.views.oom import signal_kill_line


def test_kmsg_parsing() -> None:
    line = (
        "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
        "oom_memcg=/memtop-test-1,task_memcg=/memtop-test-1,task=a,b c,pid=42,uid=1000"
    )
    assert parse_kmsg_kill(line) == (42, "memcg", "/memtop-test-1")
    line = "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/,task=x,pid=7,uid=0"
    assert parse_kmsg_kill(line) == (7, "global", "")
    assert parse_kmsg_kill("Out of memory: Killed process 7 (x)") is None


def kmsg_escaped(raw: bytes) -> str:
    """A name as /dev/kmsg prints it: each byte below space or above 126, and each backslash, as
    \\xNN (the kernel's msg_add_ext_text)."""
    return "".join(chr(c) if 32 <= c < 127 and c != 0x5C else f"\\x{c:02x}" for c in raw)


def test_a_memcg_from_the_log_is_the_cgroups_probes_path() -> None:
    """Whatever bytes a cgroup's name holds (not UTF-8, escapes, a backslash as systemd's \\x2d,
    UTF-8), the OOM kill names it as the cgroups pane does (the path os gives, cleaned by the
    record), so the kill is found under its cgroup."""
    for raw in (
        b"/x\xff",
        b"/a\\b",
        b"/sys-by\\x2duuid.service",
        "/\u00e9t\u00e9".encode(),
        b"/\x1b]0;p\x07",
    ):
        shown = CgroupSample(os.fsdecode(raw), 1).path
        name = kmsg_escaped(raw)
        line = (
            "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
            f"oom_memcg={name},task_memcg={name},task=a,pid=42,uid=0"
        )
        assert parse_kmsg_kill(line) == (42, "memcg", shown), raw
        assert parse_kmsg_task_memcg(line) == shown, raw


def test_record_round_trip() -> None:
    assert from_json(to_json(OOM_KILL)) == OOM_KILL


REPORT = [
    "swapfill invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0",
    "CPU: 1 UID: 0 PID: 6851 Comm: swapfill Not tainted 6.18.44 #1 PREEMPT(none) ",
    "memory: usage 102400kB, limit 102400kB, failcnt 0",
    "Tasks state (memory values in pages):",
    "[  pid  ]   uid  tgid total_vm      rss rss_anon rss_file rss_shmem pgtables_bytes swapents"
    " oom_score_adj name",
    "[   6850]     0  6850      730       29        0       29         0    45056        0          -100 a b",
    "[   6851]     0  6851    77419    25843    25504      339         0   249856        0             0 swapfill",
    "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/t,"
    "task_memcg=/t,task=swapfill,pid=6851,uid=0",
    "Memory cgroup out of memory: Killed process 6851 (swapfill) total-vm:309676kB, anon-rss:102016kB,"
    " file-rss:1356kB, shmem-rss:0kB, UID:0 pgtables:244kB oom_score_adj:0",
]


def test_kernel_report_parsed_into_a_kill() -> None:
    p = ReportParser()
    out = [p.feed(2708_663273 + i, line) for i, line in enumerate(REPORT)]
    assert [w for w, _, _ in out] == [""] * 7 + ["summary", "killed"]
    kill = out[-1][2]
    assert kill is not None and kill.source == "kmsg"
    assert kill.ts_ns == 2708_663273 * 1000  # the report's first line
    assert (kill.victim_pid, kill.victim_comm, kill.trigger_pid, kill.trigger_comm) == (
        6851,
        "swapfill",
        6851,
        "swapfill",
    )
    assert (kill.scope, kill.memcg, kill.task_memcg) == ("memcg", "/t", "/t")
    assert (kill.memcg_usage_bytes, kill.memcg_limit_bytes) == (100 << 20, 100 << 20)
    assert kill.anon_rss_bytes == 102016 * 1024 and kill.total_vm_bytes == 309676 * 1024
    assert (kill.gfp_mask, kill.order) == ("0xcc0(GFP_KERNEL)", 0)
    page = os.sysconf("SC_PAGE_SIZE")
    assert kill.top_tasks == ((6851, "swapfill", 25843 * page, 0), (6850, "a b", 29 * page, -100))
    assert kill.missing == ("loadavg",)


def test_rate_limited_report_is_still_a_kill() -> None:
    """The kernel rate-limits the dump, never the Killed line: what it says is kept, the rest missing."""
    kill = ReportParser().feed(5, REPORT[-1])[2]
    assert kill is not None and kill.victim_pid == 6851 and kill.scope == "unknown"
    assert kill.missing == ("loadavg", "trigger_pid", "trigger_comm")


def test_known_killers_matched_by_executable_script_or_comm() -> None:
    names = KNOWN_KILLERS + ("mykiller",)
    assert match_killer(names, "/usr/bin/earlyoom", "earlyoom", ["/usr/bin/earlyoom"]) == "earlyoom"
    # nohang is a Python script: the interpreter is the executable, the script its argument
    assert match_killer(names, "/usr/bin/python3.11", "nohang", ["python3", "/usr/sbin/nohang"]) == "nohang"
    # gone before its exe was read: the kernel's 15-character comm
    assert match_killer(names, "", "low-memory-moni", []) == "low-memory-monitor"
    assert match_killer(names, "/opt/x/mykiller", "mykiller", []) == "mykiller"
    assert match_killer(names, "/usr/bin/bash", "bash", ["bash"]) == ""
    assert match_killer(names, "/usr/bin/oomd-not", "oomd-not", []) == ""


def _signal(
    ts_s: float, sig: int, pid: int = 500, sender: str = "bash", killer: str = "", rss: int | None = None
) -> SignalKill:
    return SignalKill(
        ts_ns=int(ts_s * 1e9),
        sig=sig,
        victim_pid=pid,
        victim_comm="victim",
        sender_pid=77,
        sender_tid=77,
        sender_comm=sender,
        killer=killer,
        rss_bytes=rss,
    )


def _apply(state: State, ts_s: float, *recs: Record) -> None:
    state.apply(Batch(int(ts_s * 1e9), recs))


def test_signal_kills_listed_by_killer_or_size_once_with_both_signals() -> None:
    state = State(mode="bpf")
    # a small process SIGKILLed by a shell: not listed (under the 100 MiB threshold)
    _apply(state, 1, _signal(1, 9, pid=1, rss=10 << 20))
    # a big one SIGTERMed by a shell: not listed yet (a SIGTERM from anyone but a memory killer)
    _apply(state, 2, _signal(2, 15, pid=2, rss=300 << 20))
    st = state.get(OomState)
    assert list(st.signal_kills) == []
    # ... then SIGKILLed: one row, both signals, its RSS at the first signal
    _apply(state, 3, _signal(3, 9, pid=2))
    # a memory killer's SIGTERM is listed whatever the size
    _apply(state, 4, _signal(4, 15, pid=3, sender="earlyoom", killer="earlyoom", rss=1 << 20))
    doc = get_view("oom").document(state, Options())
    rows = {k["victim_pid"]: k for k in doc["signal_kills"]}
    assert set(rows) == {2, 3}
    assert [s["signal"] for s in rows[2]["signals"]] == ["SIGTERM", "SIGKILL"]
    assert rows[2]["rss_bytes"] == 300 << 20 and rows[2]["killer"] is None
    assert rows[3]["killer"] == "earlyoom"
    assert signal_kill_line(rows[2]).startswith(
        "victim [2] killed by 77 bash, not an OOM kill: SIGTERM then SIGKILL"
    )
    notices = [n.text for n in st.pop_notices()]
    assert len(notices) == 2 and any("killed by earlyoom" in n for n in notices)
    # a SIGKILL a minute and more after the SIGTERM is another kill
    _apply(state, 70, _signal(70, 9, pid=2, rss=300 << 20))
    assert (
        sum(1 for k in get_view("oom").document(state, Options())["signal_kills"] if k["victim_pid"] == 2)
        == 2
    )


def test_forecast_of_a_memcg_growing_toward_its_limit() -> None:
    state = State(mode="bpf")
    for t in range(12):  # 10 MiB/s toward 200 MiB, swap forbidden (memsw = limit)
        sample = CgroupSample(
            path="/grow",
            version=1,
            usage_bytes=(50 + 10 * t) << 20,
            limit_bytes=200 << 20,
            swap_bytes=0,
            swap_limit_bytes=0,
        )
        _apply(state, 100 + t, sample)
    f = state.get(OomState).forecasts["/grow"]
    assert f.growth_bytes_per_s == 10 << 20
    # its latest sample (t=111: 160 MiB, this batch's): 40 MiB left at 10 MiB/s
    assert f.used_bytes == 160 << 20 and f.seconds_left == 4.0
    notices = [n.text for n in state.get(OomState).pop_notices()]
    # once, when it first fell under 60 s (its second sample: 140 MiB left at 10 MiB/s, 14 s)
    assert notices == ["memcg /grow runs out of memory in about 14 s at the current growth (140 MiB left)"]
    doc = get_view("oom").document(state, Options())
    assert [r["cgroup"] for r in doc["at_risk"]] == ["/grow"]


def test_forecast_of_an_idle_memcg_kept_is_what_computing_it_gives() -> None:
    """A memcg that grew and then stood still (no sample for many ticks): its forecast, kept from
    tick to tick once its window starts at its last point, equals the one computed afresh at
    every tick (a second state whose kept forecasts are dropped before each batch)."""
    kept, fresh = State(mode="bpf"), State(mode="bpf")
    for t in range(40):  # growth for 4 s (one sample a second), then idle ticks only
        recs = []
        if t < 5:
            recs.append(
                CgroupSample(
                    path="/idle",
                    version=1,
                    usage_bytes=(50 + 10 * t) << 20,
                    limit_bytes=200 << 20,
                    swap_bytes=0,
                    swap_limit_bytes=0,
                )
            )
        fresh.get(OomState)._flat.clear()
        _apply(kept, 100 + t, *recs)
        _apply(fresh, 100 + t, *recs)
        assert kept.get(OomState).forecasts == fresh.get(OomState).forecasts, t
    assert "/idle" in kept.get(OomState)._flat  # the kept answer was the one served
    assert kept.get(OomState).forecasts["/idle"].seconds_left is None  # flat: no time counted down


def test_next_victim_by_badness_with_oom_score_adj() -> None:
    """The kernel's choice in a memcg: RSS + swap + adj thousandths of its limit; -1000 never."""

    def proc(pid: int, rss_mib: int) -> ProcSample:
        return ProcSample(pid, f"p{pid}", "root", 0, rss_mib << 20, 0, 0, 0, 0, 0)

    state = State(mode="bpf")
    for t in range(3):
        sample = CgroupSample(
            path="/grow",
            version=1,
            usage_bytes=(500 + 10 * t) << 20,
            limit_bytes=1000 << 20,
            swap_bytes=0,
            swap_limit_bytes=0,
            pids=(1, 2, 3),
        )
        _apply(state, 100 + t, sample, proc(1, 400), proc(2, 60), proc(3, 40))

    def victim() -> int:
        (risk,) = get_view("oom").document(state, Options())["at_risk"]
        return int(risk["victim_pid"])

    assert victim() == 1  # the largest, no adj read yet
    # pid 1 is exempt (-1000); pid 3's +300 is 300 MiB of a 1000 MiB limit: 340 beats 60
    _apply(state, 103, OomScoreAdj(adjusted=((1, -1000), (3, 300))))
    assert victim() == 3
