"""Helpers shared by the tests, one module a purpose (docs/development.md, "Tests"):

- ``paths``: the repository, the C workloads, the fixtures;
- ``programs``: what this machine has (programs, BPF) and the workloads' compiler;
- ``cgroups``: real pressure, a memory cgroup with a limit and a swap file;
- ``mounts``: file systems made for a test (zram ext4, a small tmpfs, a full disk);
- ``procs``: the kernel's own figures (/proc) and reading them around memtop's;
- ``workloads``: the C workloads' side (paused start, line reader, the leakers and their
  ``leakers`` fixture, which tests/conftest.py makes every test's);
- ``memtop_run``: memtop as a user runs it (command, snapshot, pseudo-terminal, BPF left behind);
- ``fakes``: records and a fake Source for tests that need no kernel;
- ``documents``: every pane's document of a state, and their differences;
- ``exporter``: the shipped dashboard's and rules' PromQL;
- ``waits``: bounded waits on what cannot notify a test (the kernel, a child, a thread).

Everything is re-exported here, so ``from support import X`` works whichever module X is in."""

from __future__ import annotations

from support.cgroups import CG1, CG2, MemCgroup, memcg, swapfile
from support.documents import differences, documents
from support.exporter import dashboard_expressions, rated_metrics
from support.fakes import OOM_KILL, RECORDED_FACTS, FakeSource, force_tick, vmscan_batches
from support.memtop_run import (
    PtyMemtop,
    bpf_left_behind,
    bpftool,
    exit_deadline_hit,
    memtop_cmd,
    prog_ids_of,
    run_snapshot,
)
from support.mounts import fill, fill_up, small_tmpfs, zram_filesystem
from support.paths import DATA, PROGRAMS, ROOT, WORKLOADS
from support.procs import (
    between,
    bracket,
    code_byte,
    function_address,
    kb,
    pid_reads,
    proc_samples,
    proc_stat_faults,
    proc_status,
    vmstat,
    wait_asleep,
    waking_sleepers,
    within,
)
from support.programs import bpf_unavailable_reason, compile_c, missing_programs
from support.waits import BOUND_S, WaitTimeout, readable, wait_until, wait_until_async
from support.workloads import Leaker, Leakers, LineReader, PausedWorkload, case_lines, leaky_argv

__all__ = [
    "BOUND_S",
    "CG1",
    "CG2",
    "DATA",
    "OOM_KILL",
    "PROGRAMS",
    "RECORDED_FACTS",
    "ROOT",
    "WORKLOADS",
    "FakeSource",
    "Leaker",
    "Leakers",
    "LineReader",
    "MemCgroup",
    "PausedWorkload",
    "PtyMemtop",
    "WaitTimeout",
    "between",
    "bpf_left_behind",
    "bpf_unavailable_reason",
    "bpftool",
    "bracket",
    "case_lines",
    "code_byte",
    "compile_c",
    "dashboard_expressions",
    "differences",
    "documents",
    "exit_deadline_hit",
    "fill",
    "fill_up",
    "force_tick",
    "function_address",
    "kb",
    "pid_reads",
    "proc_samples",
    "leaky_argv",
    "memcg",
    "memtop_cmd",
    "missing_programs",
    "proc_stat_faults",
    "proc_status",
    "prog_ids_of",
    "rated_metrics",
    "run_snapshot",
    "small_tmpfs",
    "swapfile",
    "vmscan_batches",
    "vmstat",
    "readable",
    "wait_until",
    "wait_until_async",
    "wait_asleep",
    "waking_sleepers",
    "within",
    "zram_filesystem",
]
