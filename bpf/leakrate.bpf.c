// leakrate: the leaks pane's preflight. Before the leaks probe traces a pid (every allocation
// with its stack), memtop counts the calls to the functions it would probe for about a second, so
// the user sees the expected cost first (memtop/probes/leakrate.py).
//
// The cheapest program there is: one entry uprobe per allocator function, each bumping its own
// slot of a per-CPU array. No return probes, no stacks, no map keyed by pointer. Program count_<i>
// counts the function user space attached it to as number i (bcc cannot tell a program which of
// its uprobes fired, so each function gets its own; a lane probes at most 29 functions).
// -DN_FNS=<n> is memtop/probes/leakrate.py's N_FNS (the value below is only a default), and this
// file has count_0 .. count_<N_FNS - 1> (tests/unit/test_bpf_constants.py counts them).

#include <uapi/linux/ptrace.h>
#include "common.h"

#ifndef N_FNS
#define N_FNS 40
#endif
#ifndef UPROBE_MULTI
// 1: memtop's compiler process also loads each program for uprobe_multi links (on a budget)
#define UPROBE_MULTI 0
#endif

BPF_PERCPU_ARRAY(calls, u64, N_FNS);

static __always_inline int calls_of(u32 which) {
    memtop_bump(calls.lookup(&which));
    return 0;
}

int count_0(struct pt_regs *ctx) { return calls_of(0); }
int count_1(struct pt_regs *ctx) { return calls_of(1); }
int count_2(struct pt_regs *ctx) { return calls_of(2); }
int count_3(struct pt_regs *ctx) { return calls_of(3); }
int count_4(struct pt_regs *ctx) { return calls_of(4); }
int count_5(struct pt_regs *ctx) { return calls_of(5); }
int count_6(struct pt_regs *ctx) { return calls_of(6); }
int count_7(struct pt_regs *ctx) { return calls_of(7); }
int count_8(struct pt_regs *ctx) { return calls_of(8); }
int count_9(struct pt_regs *ctx) { return calls_of(9); }
int count_10(struct pt_regs *ctx) { return calls_of(10); }
int count_11(struct pt_regs *ctx) { return calls_of(11); }
int count_12(struct pt_regs *ctx) { return calls_of(12); }
int count_13(struct pt_regs *ctx) { return calls_of(13); }
int count_14(struct pt_regs *ctx) { return calls_of(14); }
int count_15(struct pt_regs *ctx) { return calls_of(15); }
int count_16(struct pt_regs *ctx) { return calls_of(16); }
int count_17(struct pt_regs *ctx) { return calls_of(17); }
int count_18(struct pt_regs *ctx) { return calls_of(18); }
int count_19(struct pt_regs *ctx) { return calls_of(19); }
int count_20(struct pt_regs *ctx) { return calls_of(20); }
int count_21(struct pt_regs *ctx) { return calls_of(21); }
int count_22(struct pt_regs *ctx) { return calls_of(22); }
int count_23(struct pt_regs *ctx) { return calls_of(23); }
int count_24(struct pt_regs *ctx) { return calls_of(24); }
int count_25(struct pt_regs *ctx) { return calls_of(25); }
int count_26(struct pt_regs *ctx) { return calls_of(26); }
int count_27(struct pt_regs *ctx) { return calls_of(27); }
int count_28(struct pt_regs *ctx) { return calls_of(28); }
int count_29(struct pt_regs *ctx) { return calls_of(29); }
int count_30(struct pt_regs *ctx) { return calls_of(30); }
int count_31(struct pt_regs *ctx) { return calls_of(31); }
int count_32(struct pt_regs *ctx) { return calls_of(32); }
int count_33(struct pt_regs *ctx) { return calls_of(33); }
int count_34(struct pt_regs *ctx) { return calls_of(34); }
int count_35(struct pt_regs *ctx) { return calls_of(35); }
int count_36(struct pt_regs *ctx) { return calls_of(36); }
int count_37(struct pt_regs *ctx) { return calls_of(37); }
int count_38(struct pt_regs *ctx) { return calls_of(38); }
int count_39(struct pt_regs *ctx) { return calls_of(39); }
