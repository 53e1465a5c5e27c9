"""The key and value layouts memtop.linux.bpfout reads from BCC's JSON descriptions are the ones
BCC itself would make: the same size and the same fields at the same offsets."""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

from memtop.linux import bcc_compat, bpfout

DESCS: list[Any] = [
    "unsigned long long",
    "int",
    ["key_t", [["pid", "unsigned int"], ["comm", "char", [16]], ["ts", "unsigned long long"]], "struct"],
    ["bits_t", [["a", "unsigned int", 3], ["b", "unsigned int", 29], ["c", "unsigned long long"]], "struct"],
    [
        "outer_t",
        [
            ["x", "int"],
            ["", [["u", "unsigned int"], ["l", "long"]], "union"],
            ["inner", [["p", "unsigned short"], ["q", "char", [3]]], "struct"],
            ["ip", "unsigned long long", [127]],
        ],
        "struct",
    ],
    ["packed_t", [["c", "char"], ["v", "unsigned long long"]], "struct_packed"],
    ["wide_t", [["v", "unsigned __int128"], ["b", "_Bool"], ["d", "double"]], "struct"],
]


def layout(t: Any) -> list[tuple[str, int, int]]:
    if not hasattr(t, "_fields_"):
        return []
    return [(f[0], getattr(t, f[0]).offset, getattr(t, f[0]).size) for f in t._fields_]


@pytest.mark.parametrize("desc", DESCS, ids=lambda d: d if isinstance(d, str) else d[0])
def test_layouts_as_bcc_makes_them(desc: Any) -> None:
    if not bcc_compat.bcc_available():
        pytest.skip("BCC's bindings are not installed")
    bcc = bcc_compat.bcc_module()
    theirs = bcc.BPF._decode_table_type(desc)
    ours = bpfout.ctype_of(desc)
    assert ctypes.sizeof(ours) == ctypes.sizeof(theirs)
    assert layout(ours) == layout(theirs)


def test_an_unknown_type_is_refused() -> None:
    with pytest.raises((KeyError, ValueError)):
        bpfout.ctype_of(["t", [["x", "mystery"]], "struct"])
    with pytest.raises(ValueError):
        bpfout.ctype_of(["t", [["x", "int", "enum"]], "struct"])


def test_program_types_from_the_context_each_function_takes() -> None:
    text = "int on_fault(struct bpf_perf_event_data *ctx) {}\nint count_0(struct pt_regs *ctx) {}\n"
    by_ctx = bpfout.program_types(text)
    assert by_ctx == {"on_fault": bpfout.PERF_EVENT, "count_0": bpfout.KPROBE}
    assert bpfout.type_of("vmscan__tp__vmscan__mm_vmscan_kswapd_wake", by_ctx) == bpfout.TRACEPOINT
    assert bpfout.type_of("kills__raw__sched_process_exit", by_ctx) == bpfout.RAW_TRACEPOINT
    assert bpfout.type_of("on_fault", by_ctx) == bpfout.PERF_EVENT
    assert bpfout.type_of("anything_else", by_ctx) == bpfout.KPROBE


def test_cpu_lists_read_as_the_kernel_writes_them() -> None:
    cpus = bcc_compat.online_cpus()
    assert cpus and cpus == sorted(set(cpus))
    assert bpfout.possible_cpus() >= len(cpus)
