// Route (a) of issue 5, prototyped only to measure its cost (bench/swapin_overhead.py): stamp
// every user fault's start (exceptions:page_fault_user), tag it a swap-in when rss_stat shows an
// MM_SWAPENTS change on the current task, end it at the major-fault perf event. Runs on every
// fault, which is why memtop does not ship it.
#include <uapi/linux/bpf_perf_event.h>

#define MM_SWAPENTS 2

struct start_t {
    u64 ts;
    u64 swap;
};

BPF_TABLE("lru_hash", u32, struct start_t, start, 16384);
BPF_PERCPU_ARRAY(total, u64, 2);

TRACEPOINT_PROBE(exceptions, page_fault_user) {
    u32 tid = bpf_get_current_pid_tgid();
    struct start_t s = {.ts = bpf_ktime_get_ns(), .swap = 0};
    start.update(&tid, &s);
    return 0;
}

TRACEPOINT_PROBE(kmem, rss_stat) {
    if (args->member != MM_SWAPENTS || !args->curr)
        return 0;
    u32 tid = bpf_get_current_pid_tgid();
    struct start_t *s = start.lookup(&tid);
    if (s)
        s->swap = 1;
    return 0;
}

int on_major_fault(struct bpf_perf_event_data *ctx) {
    u32 tid = bpf_get_current_pid_tgid();
    struct start_t *s = start.lookup(&tid);
    if (!s)
        return 0;
    int k = s->swap ? 0 : 1;
    u64 *v = total.lookup(&k);
    if (v)
        *v += bpf_ktime_get_ns() - s->ts;
    return 0;
}
