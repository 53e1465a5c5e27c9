// swapin: who waits on swap, and for how long, without a program on every page fault.
//
// Counting: the PAGE_FAULTS_MAJ perf software event (attached system-wide with period 1 by the
// Python side to on_major_fault) fires once per major fault, at its end, exactly where the kernel
// bumps the task's maj_flt (mm_account_fault). Minor faults have their own static key, so enabling
// the major one costs minor faults nothing.
//
// Waiting: sched:sched_switch (rare next to faults). When a task blocks in D state, its kernel
// stack tells whether it is inside a page fault (a return address in exc_page_fault or
// asm_exc_page_fault) and which kind: do_swap_page / shmem_swapin_folio = swap-in,
// filemap_fault / __do_fault = file. The time until it runs again is added to the task's pending
// fault wait; the major-fault event takes it and classifies the fault. A major fault that never
// blocked (zswap, zram, a swap-cache race, a synchronous device such as zram or pmem that answered
// at once) is counted apart, and by 2 MiB region of its address per process: user space classifies
// each region against the process's mappings (anonymous = swap-in, file-backed = file). A map of
// regions, not an event per fault: a burst of thousands of such faults between two polls (every
// file fault on a zram-backed file system) overflowed the ring buffer this used to be.
//
// Tracepoint fields and helpers only; the symbol ranges come from /proc/kallsyms via cflags:
//   -D{PF1,PF2,SW1,SW2,FI1,FI2}_LO=0x...ULL -D..._HI=0x...ULL  (absent symbol: 0,0)
//   -DMAX_TIDS=<n> -DMAX_PIDS=<n> -DMAX_DEPTH=<n> -DMAX_REGIONS=<n> -DREGION_SHIFT=<n>
// and the histogram size and slots memtop/probes/swapin.py reads (SwapinProbe.defines: Python is
// their one definition, the values below are only defaults).

#include "common.h"
#include "perf_ctx.h"

#ifndef MAX_TIDS
#define MAX_TIDS 16384
#endif
#ifndef MAX_PIDS
#define MAX_PIDS 16384
#endif
#ifndef MAX_REGIONS
#define MAX_REGIONS 4096
#endif
#ifndef REGION_SHIFT
#define REGION_SHIFT 21
#endif
#ifndef MAX_DEPTH
#define MAX_DEPTH 48
#endif
// log2(wait ns) buckets per kind; a process's file major faults are its slots + HIST_SLOTS
#ifndef HIST_SLOTS
#define HIST_SLOTS 64
#endif
// slots of swapin_lost
#ifndef LOST_PROCESSES
#define LOST_PROCESSES 0  // processes the stats map could not take
#endif
#ifndef LOST_REGIONS
#define LOST_REGIONS 1  // no-wait faults the region map could not take
#endif
#ifndef NR_LOST
#define NR_LOST 2
#endif
// slots of swapin_counters
#ifndef CTR_SLEEPS
#define CTR_SLEEPS 0  // blocked-in-fault sleeps timed
#endif
#ifndef CTR_STACK_WALKS
#define CTR_STACK_WALKS 1  // D-state stack walks (the probe's own cost driver)
#endif
#ifndef CTR_GENERATION
#define CTR_GENERATION 2  // bumped by on_major_fault after it updates what user space reads
#endif
#ifndef NR_COUNTERS
#define NR_COUNTERS 3
#endif
#ifndef PF1_LO
#define PF1_LO 0ULL
#define PF1_HI 0ULL
#endif
#ifndef PF2_LO
#define PF2_LO 0ULL
#define PF2_HI 0ULL
#endif
#ifndef SW1_LO
#define SW1_LO 0ULL
#define SW1_HI 0ULL
#endif
#ifndef SW2_LO
#define SW2_LO 0ULL
#define SW2_HI 0ULL
#endif
#ifndef FI1_LO
#define FI1_LO 0ULL
#define FI1_HI 0ULL
#endif
#ifndef FI2_LO
#define FI2_LO 0ULL
#define FI2_HI 0ULL
#endif

#define KIND_NONE 0
#define KIND_SWAP 1
#define KIND_FILE 2
#define KIND_OTHER 3

// sched_switch prev_state as reported (one-hot): 2 = TASK_UNINTERRUPTIBLE (incl. killable)
#define REPORT_UNINTERRUPTIBLE 2

struct sleep_t {
    u64 start_ns;
    u32 kind;
    u32 pad;
};

struct pending_t {
    u64 wait_ns;
    u32 kind;
    u32 sleeps;
};

struct stats_t {
    u64 swapins;
    u64 swapins_nowait;
    u64 swap_wait_ns;
    u64 swap_wait_max_ns;
    u64 file_majors;
    u64 file_wait_ns;
    u64 file_wait_max_ns;
    char comm[16];
};

struct region_t {
    u32 pid;
    u32 pad;
    u64 region;  // faulting address >> REGION_SHIFT
};

struct nowait_t {
    u64 count;
    u64 addr;  // the latest such fault's address (decides a region that holds both kinds)
};

struct hkey_t {
    u32 pid;
    u32 slot;  // bucket, +HIST_SLOTS for file major faults
};

struct stack_t {
    u64 ip[MAX_DEPTH];
};

// tid -> blocked-in-fault since; tid -> wait gathered for the fault in progress (LRU: bounded)
BPF_TABLE("lru_hash", u32, struct sleep_t, sleeping, MAX_TIDS);
BPF_TABLE("lru_hash", u32, struct pending_t, pending, MAX_TIDS);
// tgid -> cumulative counters, read once per tick
BPF_TABLE("lru_hash", u32, struct stats_t, stats, MAX_PIDS);
// major faults that never blocked since the last poll, by process and region (user space drains it)
BPF_TABLE("lru_hash", struct region_t, struct nowait_t, nowait_regions, MAX_REGIONS);
// log2(wait ns) -> count; every classified swap-in / file major fault lands in one bucket
BPF_PERCPU_ARRAY(hist, u64, HIST_SLOTS);
BPF_PERCPU_ARRAY(file_hist, u64, HIST_SLOTS);
// the same per process (sparse; a process rarely spans more than ~16 buckets)
BPF_TABLE("lru_hash", struct hkey_t, u64, pid_hist, MAX_PIDS * 8);
BPF_PERCPU_ARRAY(stackbuf, struct stack_t, 1);
BPF_PERCPU_ARRAY(swapin_lost, u64, NR_LOST);
BPF_PERCPU_ARRAY(swapin_counters, u64, NR_COUNTERS);

// on_major_fault ends every run that updated a map the probe reads (stats, pid_hist,
// nowait_regions, the histograms, swapin_lost) by this, after its updates: a poll that finds the
// generation where it was reads only swapin_counters (memtop.probes.base.Generation).
// sched_switch updates only its own maps (sleeping, pending) and swapin_counters, which every poll
// reads: it needs no bump, and the stack walks it counts do not make an idle poll read the maps.
static __always_inline void swapin_updated(void) {
    int slot = CTR_GENERATION;
    memtop_generation(swapin_counters.lookup(&slot));
}

static __always_inline int ip_in(u64 ip, u64 lo, u64 hi) {
    return ip >= lo && ip < hi;
}

TRACEPOINT_PROBE(sched, sched_switch) {
    u64 now = bpf_ktime_get_ns();
    u32 next = args->next_pid;
    if (next) {
        struct sleep_t *s = sleeping.lookup(&next);
        if (s) {
            u64 d = now - s->start_ns;
            u32 kind = s->kind;
            sleeping.delete(&next);
            struct pending_t *p = pending.lookup(&next);
            if (p) {
                p->wait_ns += d;
                p->sleeps++;
                if (p->kind == KIND_OTHER && kind != KIND_OTHER)
                    p->kind = kind;
            } else if (kind != KIND_OTHER) {
                struct pending_t np = {.wait_ns = d, .kind = kind, .sleeps = 1};
                pending.update(&next, &np);
            }
        }
    }
    if (!(args->prev_state & REPORT_UNINTERRUPTIBLE))
        return 0;
    u32 prev = args->prev_pid;
    if (!prev)
        return 0;
    int zero = 0;
    struct stack_t *st = stackbuf.lookup(&zero);
    if (!st)
        return 0;
    int walks = CTR_STACK_WALKS;
    memtop_bump(swapin_counters.lookup(&walks));
    long n = bpf_get_stack(args, st->ip, sizeof(st->ip), 0);
    if (n <= 0)
        return 0;
    u32 frames = n / sizeof(u64);
    u32 kind = KIND_OTHER;
    int in_fault = 0;
    for (int i = 0; i < MAX_DEPTH; i++) {
        if (i >= frames)
            break;
        u64 ip = st->ip[i];
        if (ip_in(ip, PF1_LO, PF1_HI) || ip_in(ip, PF2_LO, PF2_HI)) {
            in_fault = 1;  // the innermost page-fault entry: frames beyond are the interrupted code
            break;
        }
        if (kind == KIND_OTHER) {
            if (ip_in(ip, SW1_LO, SW1_HI) || ip_in(ip, SW2_LO, SW2_HI))
                kind = KIND_SWAP;
            else if (ip_in(ip, FI1_LO, FI1_HI) || ip_in(ip, FI2_LO, FI2_HI))
                kind = KIND_FILE;
        }
    }
    if (!in_fault)
        return 0;
    // a sleep elsewhere in a fault (mmap_lock on retry, reclaim) counts only once the fault is
    // known to be a swap-in or file read; a minor fault's sleep must not leak into the next one
    if (kind == KIND_OTHER && !pending.lookup(&prev))
        return 0;
    int sleeps = CTR_SLEEPS;
    memtop_bump(swapin_counters.lookup(&sleeps));
    struct sleep_t s = {.start_ns = now, .kind = kind};
    sleeping.update(&prev, &s);
    return 0;
}

int on_major_fault(struct bpf_perf_event_data *ctx) {
    u64 id = bpf_get_current_pid_tgid();
    u32 tgid = id >> 32, tid = (u32)id;
    if (!tgid)
        return 0;
    u64 wait = 0;
    u32 kind = KIND_NONE;
    struct pending_t *p = pending.lookup(&tid);
    if (p) {
        wait = p->wait_ns;
        kind = p->kind;
        pending.delete(&tid);
    }
    struct stats_t *s = stats.lookup(&tgid);
    if (!s) {
        struct stats_t z = {};
        stats.insert(&tgid, &z);  // if absent: an update could zero another CPU's count
        s = stats.lookup(&tgid);
        if (!s) {
            int slot = LOST_PROCESSES;
            memtop_bump(swapin_lost.lookup(&slot));
            swapin_updated();
            return 0;
        }
    }
    bpf_get_current_comm(&s->comm, sizeof(s->comm));
    if (kind == KIND_NONE) {
        __sync_fetch_and_add(&s->swapins_nowait, 1);  // before the region: user space relies on it
        struct region_t rk = {.pid = tgid, .region = ctx->addr >> REGION_SHIFT};
        struct nowait_t zero = {};
        struct nowait_t *e = nowait_regions.lookup_or_try_init(&rk, &zero);
        if (!e) {
            int slot = LOST_REGIONS;
            memtop_bump(swapin_lost.lookup(&slot));
            swapin_updated();
            return 0;
        }
        __sync_fetch_and_add(&e->count, 1);
        e->addr = ctx->addr;
        swapin_updated();
        return 0;
    }
    int b = memtop_log2(wait);
    struct hkey_t hk = {.pid = tgid, .slot = kind == KIND_FILE ? b + HIST_SLOTS : b};
    u64 zero64 = 0;
    u64 *hv = pid_hist.lookup_or_try_init(&hk, &zero64);
    if (hv)
        __sync_fetch_and_add(hv, 1);
    if (kind == KIND_FILE) {
        __sync_fetch_and_add(&s->file_majors, 1);
        __sync_fetch_and_add(&s->file_wait_ns, wait);
        if (wait > s->file_wait_max_ns)
            s->file_wait_max_ns = wait;
        memtop_bump(file_hist.lookup(&b));
    } else {
        __sync_fetch_and_add(&s->swapins, 1);
        __sync_fetch_and_add(&s->swap_wait_ns, wait);
        if (wait > s->swap_wait_max_ns)
            s->swap_wait_max_ns = wait;
        memtop_bump(hist.lookup(&b));
    }
    swapin_updated();
    return 0;
}
