// leakrate: the leaks pane's preflight. Before the leaks probe traces a pid (every allocation
// with its stack), memtop counts the calls to the functions it would probe for about a second, so
// the user sees the expected cost first (memtop/probes/leakrate.py).
//
// The cheapest program there is: one entry uprobe per allocator function, each bumping its own
// slot of a per-CPU array. No return probes, no stacks, no map keyed by pointer. Program count_<i>
// counts the function user space attached it to as number i (bcc cannot tell a program which of
// its uprobes fired, so each function gets its own; a lane probes at most 29 functions).

#include <uapi/linux/ptrace.h>

#define N_FNS 40

BPF_PERCPU_ARRAY(calls, u64, N_FNS);

static __always_inline int bump(u32 which) {
    u64 *v = calls.lookup(&which);
    if (v)
        (*v)++;
    return 0;
}

int count_0(struct pt_regs *ctx) { return bump(0); }
int count_1(struct pt_regs *ctx) { return bump(1); }
int count_2(struct pt_regs *ctx) { return bump(2); }
int count_3(struct pt_regs *ctx) { return bump(3); }
int count_4(struct pt_regs *ctx) { return bump(4); }
int count_5(struct pt_regs *ctx) { return bump(5); }
int count_6(struct pt_regs *ctx) { return bump(6); }
int count_7(struct pt_regs *ctx) { return bump(7); }
int count_8(struct pt_regs *ctx) { return bump(8); }
int count_9(struct pt_regs *ctx) { return bump(9); }
int count_10(struct pt_regs *ctx) { return bump(10); }
int count_11(struct pt_regs *ctx) { return bump(11); }
int count_12(struct pt_regs *ctx) { return bump(12); }
int count_13(struct pt_regs *ctx) { return bump(13); }
int count_14(struct pt_regs *ctx) { return bump(14); }
int count_15(struct pt_regs *ctx) { return bump(15); }
int count_16(struct pt_regs *ctx) { return bump(16); }
int count_17(struct pt_regs *ctx) { return bump(17); }
int count_18(struct pt_regs *ctx) { return bump(18); }
int count_19(struct pt_regs *ctx) { return bump(19); }
int count_20(struct pt_regs *ctx) { return bump(20); }
int count_21(struct pt_regs *ctx) { return bump(21); }
int count_22(struct pt_regs *ctx) { return bump(22); }
int count_23(struct pt_regs *ctx) { return bump(23); }
int count_24(struct pt_regs *ctx) { return bump(24); }
int count_25(struct pt_regs *ctx) { return bump(25); }
int count_26(struct pt_regs *ctx) { return bump(26); }
int count_27(struct pt_regs *ctx) { return bump(27); }
int count_28(struct pt_regs *ctx) { return bump(28); }
int count_29(struct pt_regs *ctx) { return bump(29); }
int count_30(struct pt_regs *ctx) { return bump(30); }
int count_31(struct pt_regs *ctx) { return bump(31); }
int count_32(struct pt_regs *ctx) { return bump(32); }
int count_33(struct pt_regs *ctx) { return bump(33); }
int count_34(struct pt_regs *ctx) { return bump(34); }
int count_35(struct pt_regs *ctx) { return bump(35); }
int count_36(struct pt_regs *ctx) { return bump(36); }
int count_37(struct pt_regs *ctx) { return bump(37); }
int count_38(struct pt_regs *ctx) { return bump(38); }
int count_39(struct pt_regs *ctx) { return bump(39); }
