"""OOM records without a kernel: the kernel log's kill line parsed, the record round trip."""

from __future__ import annotations

import os

from support import OOM_KILL

from memtop.probes.kills import KNOWN_KILLERS, match_killer
from memtop.probes.oom import ReportParser, parse_kmsg_kill
from memtop.records import from_json, to_json


def test_kmsg_parsing() -> None:
    line = (
        "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
        "oom_memcg=/memtop-test-1,task_memcg=/memtop-test-1,task=a,b c,pid=42,uid=1000"
    )
    assert parse_kmsg_kill(line) == (42, "memcg", "/memtop-test-1")
    line = "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/,task=x,pid=7,uid=0"
    assert parse_kmsg_kill(line) == (7, "global", "")
    assert parse_kmsg_kill("Out of memory: Killed process 7 (x)") is None


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
