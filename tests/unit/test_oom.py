"""OOM records without a kernel: the kernel log's kill line parsed, the record round trip."""

from __future__ import annotations

import os

from support import OOM_KILL

from memtop.probes.oom import parse_kmsg_kill, parse_kmsg_task_memcg
from memtop.records import from_json, to_json
from memtop.records.cgroups import CgroupSample


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
