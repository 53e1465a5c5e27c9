// procmem: process lifecycle (exec, exit) for the processes pane.
//
// Memory and fault counters come from the kernel's own per-task accounting (/proc), which is
// exact and free; no program runs on the fault path. This program sees what polling cannot:
// processes that start and exit between two ticks. Tracepoint fields and helpers only: the
// headers BCC compiles against may be a stand-in of another kernel version.
//
// Configured with -DMAX_PIDS=<n> -DRINGBUF_PAGES=<n> and the event kinds memtop/probes/procmem.py
// reads (ProcmemProbe.defines: Python is their one definition, the values below are only
// defaults).

#include "common.h"

#ifndef MAX_PIDS
#define MAX_PIDS 16384
#endif
#ifndef RINGBUF_PAGES
#define RINGBUF_PAGES 64
#endif

#ifndef EV_EXEC
#define EV_EXEC 1
#endif
#ifndef EV_EXIT
#define EV_EXIT 2
#endif

struct proc_event_t {
    u64 ts_ns;
    u64 lifetime_ns;
    u32 pid;
    u32 kind;
    char comm[16];
};

BPF_RINGBUF_OUTPUT(procmem_events, RINGBUF_PAGES);
// fork time per task; LRU so a burst of short-lived threads can never fill it
BPF_TABLE("lru_hash", u32, u64, start_ns, MAX_PIDS);
BPF_PERCPU_ARRAY(procmem_lost, u64, 1);

static __always_inline void procmem_lost_one(void) {
    int zero = 0;
    memtop_bump(procmem_lost.lookup(&zero));
}

TRACEPOINT_PROBE(sched, sched_process_fork) {
    u32 child = args->child_pid;
    u64 ts = bpf_ktime_get_ns();
    start_ns.update(&child, &ts);
    return 0;
}

TRACEPOINT_PROBE(sched, sched_process_exec) {
    struct proc_event_t *e = procmem_events.ringbuf_reserve(sizeof(*e));
    if (!e) {
        procmem_lost_one();
        return 0;
    }
    e->ts_ns = bpf_ktime_get_ns();
    e->lifetime_ns = 0;
    e->pid = args->pid;
    e->kind = EV_EXEC;
    bpf_get_current_comm(&e->comm, sizeof(e->comm));
    procmem_events.ringbuf_submit(e, 0);
    return 0;
}

TRACEPOINT_PROBE(sched, sched_process_exit) {
    u64 id = bpf_get_current_pid_tgid();
    u32 tgid = id >> 32, tid = (u32)id;
    u64 now = bpf_ktime_get_ns();
    u64 *start = start_ns.lookup(&tid);
    u64 lifetime = start ? now - *start : 0;
    start_ns.delete(&tid);
    if (tgid != tid)  // a thread, not the process
        return 0;
    struct proc_event_t *e = procmem_events.ringbuf_reserve(sizeof(*e));
    if (!e) {
        procmem_lost_one();
        return 0;
    }
    e->ts_ns = now;
    e->lifetime_ns = lifetime;
    e->pid = tgid;
    e->kind = EV_EXIT;
    bpf_probe_read_kernel(&e->comm, sizeof(e->comm), args->comm);
    procmem_events.ringbuf_submit(e, 0);
    return 0;
}
