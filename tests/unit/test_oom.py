"""OOM records without a kernel: the kernel log's kill line parsed, the record round trip."""

from __future__ import annotations

from support import OOM_KILL

from memtop.probes.oom import parse_kmsg_kill
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
