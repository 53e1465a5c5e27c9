// The context of a perf-event program (struct bpf_perf_event_data), for swapin and faultstack.
//
// <uapi/linux/bpf_perf_event.h> pulls in the architecture's ptrace headers, which cost clang
// several times a trivial program's compile (docs/performance.md). The layout is
// stable uAPI, so on x86-64 it is declared here: struct pt_regs is 21 eight-byte registers, then
// sample_period and addr (the verifier checks the offsets the program reads). Other
// architectures, or -DMEMTOP_FULL_HEADERS, use the kernel's header.
#ifndef MEMTOP_PERF_CTX_H
#define MEMTOP_PERF_CTX_H
#if defined(__x86_64__) && !defined(MEMTOP_FULL_HEADERS)
struct memtop_user_regs {
    u64 r[21];
};
struct bpf_perf_event_data {
    struct memtop_user_regs regs;
    u64 sample_period;
    u64 addr;
};
#else
#include <uapi/linux/bpf_perf_event.h>
#endif
#endif
