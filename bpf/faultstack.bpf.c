// faultstack: page faults of ONE process, counted by user stack and by mapping.
//
// Attached to the perf software events PAGE_FAULT_MIN and PAGE_FAULT_MAJ opened per thread of
// the target (pid=tid, cpu=-1, sample_period=1), never system-wide: only the target's faults run
// this program, so nothing else on the machine pays for it. The kernel raises these events from
// the same place it bumps the task's min_flt/maj_flt (mm_account_fault), so the counts match
// /proc/PID/stat except for faults taken on behalf of get_user_pages (no regs, no event).
//
// Context fields only (struct bpf_perf_event_data is uapi and rewritten by the verifier): the
// fault address is ctx->addr. Mappings are resolved in kernel: first against the target's last
// RECENT mmap() results (a ring filled from sys_exit_mmap, newest first, so a mapping that
// replaced an older one at the same address wins, and short-lived mappings are still named),
// then against a sorted range table that user space fills from /proc/PID/maps (binary search).
// Addresses in neither (heap grown by brk, stack growth, mremap) go to a small `unresolved` hash
// that user space drains and resolves itself. Those are
// tagged with the count of mapping removals so far (munmap, mremap, mmap MAP_FIXED of the target,
// seen on syscall tracepoints filtered to TARGET_PID): an address is resolved against a later read
// of /proc/PID/maps only if no mapping was removed in between, so a reused address is never
// charged to the wrong file.
//
// Configured with -DTARGET_PID=<tgid> -DMAX_STACKS=<n> -DMAX_RANGES=<n> (power of two) -DRANGE_STEPS=<log2 n + 1>
// -DMAX_PATHS=<n> -DMAX_UNRESOLVED=<n> -DMAX_COARSE=<n> -DCOARSE_SHIFT=<n>, and the fault kinds and
// lost slots memtop/probes/faultstack.py reads by (FaultStackProbe.defines: Python is their one
// definition, the values below are only defaults).

#include "common.h"
#include "perf_ctx.h"

#ifndef TARGET_PID
#error "TARGET_PID must be set (-DTARGET_PID=<tgid>)"
#endif
#ifndef MAX_STACKS
#define MAX_STACKS 4096
#endif
#ifndef RECENT
#define RECENT 32  // power of two
#endif
#ifndef MAX_RECENT_COUNTS
#define MAX_RECENT_COUNTS 4096
#endif
#ifndef MAX_RANGES
#define MAX_RANGES 16384
#endif
#ifndef RANGE_STEPS
#define RANGE_STEPS 15
#endif
#ifndef MAX_PATHS
#define MAX_PATHS 4096
#endif
#ifndef MAX_UNRESOLVED
#define MAX_UNRESOLVED 65536
#endif
#ifndef MAX_COARSE
#define MAX_COARSE 4096
#endif
#ifndef COARSE_SHIFT
#define COARSE_SHIFT 21
#endif

#ifndef KIND_MIN
#define KIND_MIN 0
#endif
#ifndef KIND_MAJ
#define KIND_MAJ 1
#endif

// slots of `lost`
#ifndef LOST_STACKS
#define LOST_STACKS 0  // stack-count inserts that failed (map full)
#endif
#ifndef LOST_ADDRESSES
#define LOST_ADDRESSES 1  // address inserts that failed
#endif
#ifndef NR_LOST
#define NR_LOST 2
#endif

struct stack_key_t {
    s32 stack_id;  // negative: -errno from bpf_get_stackid (counted, frames unknown)
    u32 kind;
};

struct range_t {
    u64 start;
    u64 end;
    u32 path_id;
    u32 pad;
};

struct fcount_t {
    u64 minor;
    u64 major;
};

struct recent_t {
    u64 start;
    u64 end;
    u64 seq;
    u64 flags;  // mmap flags (MAP_ANONYMOUS = 0x20)
};

struct mmap_args_t {
    u64 len;
    u64 flags;
};

struct addr_key_t {
    u64 addr;  // page address, or region number in `coarse`
    u64 gen;   // mapping removals seen before the fault
};

BPF_STACK_TRACE(stacks, MAX_STACKS);
BPF_HASH(counts, struct stack_key_t, u64, MAX_STACKS);
BPF_ARRAY(ranges, struct range_t, MAX_RANGES);
BPF_ARRAY(nranges, u32, 1);
BPF_ARRAY(path_counts, struct fcount_t, MAX_PATHS);
// page address -> counts, for faults outside the range table (a mapping made since the refresh)
BPF_HASH(unresolved, struct addr_key_t, struct fcount_t, MAX_UNRESOLVED);
// when that is full: 2 MiB region -> counts (resolved by the mapping at the region's start)
BPF_HASH(coarse, struct addr_key_t, struct fcount_t, MAX_COARSE);
// mapping removals of the target so far
BPF_ARRAY(unmap_gen, u64, 1);
// the target's last RECENT successful mmap() calls, slot = seq % RECENT
BPF_ARRAY(recent, struct recent_t, RECENT);
BPF_ARRAY(recent_head, u64, 1);  // mmap() calls seen (the next seq)
// every mapping made while attached, by seq (for user space to name), and faults in it
BPF_TABLE("lru_hash", u64, struct recent_t, recent_info, MAX_RECENT_COUNTS);
BPF_HASH(recent_counts, u64, struct fcount_t, MAX_RECENT_COUNTS);
BPF_TABLE("lru_hash", u32, struct mmap_args_t, mmap_pending, 1024);
BPF_PERCPU_ARRAY(lost, u64, NR_LOST);

static __always_inline void lost_one(int slot) {
    memtop_bump(lost.lookup(&slot));
}

static __always_inline void add_fcount(struct fcount_t *c, u32 kind) {
    if (kind == KIND_MAJ)
        __sync_fetch_and_add(&c->major, 1);
    else
        __sync_fetch_and_add(&c->minor, 1);
}

static __always_inline int by_recent(u64 addr, u32 kind) {
    int zero = 0;
    u64 *hp = recent_head.lookup(&zero);
    u64 head = hp ? *hp : 0;
    for (int i = 0; i < RECENT; i++) {
        if ((u64)i >= head)
            break;
        u64 seq = head - 1 - i;
        u32 slot = seq & (RECENT - 1);
        struct recent_t *r = recent.lookup(&slot);
        if (!r || r->seq != seq)
            continue;
        if (addr >= r->start && addr < r->end) {
            struct fcount_t *c = recent_counts.lookup(&seq);
            if (c) {
                add_fcount(c, kind);
                return 1;
            }
            struct fcount_t init = {};
            if (kind == KIND_MAJ)
                init.major = 1;
            else
                init.minor = 1;
            if (recent_counts.update(&seq, &init) == 0)
                return 1;
            return 0;
        }
    }
    return 0;
}

static __always_inline void by_mapping(u64 addr, u32 kind) {
    if (by_recent(addr, kind))
        return;
    int zero = 0;
    u32 *np = nranges.lookup(&zero);
    u32 lo = 0, hi = np ? *np : 0;
    if (hi > MAX_RANGES)
        hi = MAX_RANGES;
    for (int i = 0; i < RANGE_STEPS; i++) {
        if (lo >= hi)
            break;
        u32 mid = (lo + hi) / 2;
        struct range_t *r = ranges.lookup(&mid);
        if (!r)
            break;
        if (addr < r->start) {
            hi = mid;
        } else if (addr >= r->end) {
            lo = mid + 1;
        } else {
            u32 pid_ = r->path_id;
            struct fcount_t *c = path_counts.lookup(&pid_);
            if (c)
                add_fcount(c, kind);
            return;
        }
    }
    int zero2 = 0;
    u64 *gen = unmap_gen.lookup(&zero2);
    struct addr_key_t key = {};
    key.addr = addr & ~0xfffULL;
    key.gen = gen ? *gen : 0;
    // insert-if-absent, then add to what is there: a lookup-then-update lets two CPUs' first
    // faults on one key both write 1, and one of the two faults is lost
    struct fcount_t none = {};
    struct fcount_t *c = unresolved.lookup(&key);
    if (!c) {
        unresolved.insert(&key, &none);
        c = unresolved.lookup(&key);
    }
    if (c) {
        add_fcount(c, kind);
        return;
    }
    key.addr = addr >> COARSE_SHIFT;
    c = coarse.lookup(&key);
    if (!c) {
        coarse.insert(&key, &none);
        c = coarse.lookup(&key);
    }
    if (c)
        add_fcount(c, kind);
    else
        lost_one(LOST_ADDRESSES);
}

static __always_inline int on_fault(struct bpf_perf_event_data *ctx, u32 kind) {
    struct stack_key_t key = {};
    key.stack_id = stacks.get_stackid(ctx, BPF_F_USER_STACK);
    key.kind = kind;
    u64 *v = counts.lookup(&key);
    if (!v) {  // insert-if-absent, then add (see by_mapping)
        u64 zero = 0;
        counts.insert(&key, &zero);
        v = counts.lookup(&key);
    }
    if (v)
        __sync_fetch_and_add(v, 1);
    else
        lost_one(LOST_STACKS);
    by_mapping(ctx->addr, kind);
    return 0;
}

int on_fault_min(struct bpf_perf_event_data *ctx) { return on_fault(ctx, KIND_MIN); }

int on_fault_maj(struct bpf_perf_event_data *ctx) { return on_fault(ctx, KIND_MAJ); }

static __always_inline void mapping_removed(void) {
    if ((bpf_get_current_pid_tgid() >> 32) != TARGET_PID)
        return;
    int zero = 0;
    u64 *gen = unmap_gen.lookup(&zero);
    if (gen)
        __sync_fetch_and_add(gen, 1);
}

TRACEPOINT_PROBE(syscalls, sys_enter_munmap) {
    mapping_removed();
    return 0;
}

TRACEPOINT_PROBE(syscalls, sys_enter_mremap) {
    mapping_removed();
    return 0;
}

TRACEPOINT_PROBE(syscalls, sys_enter_mmap) {
    if ((bpf_get_current_pid_tgid() >> 32) != TARGET_PID)
        return 0;
    if (args->flags & 0x10)  // MAP_FIXED: replaces whatever was there
        mapping_removed();
    u32 tid = (u32)bpf_get_current_pid_tgid();
    struct mmap_args_t a = {};
    a.len = args->len;
    a.flags = args->flags;
    mmap_pending.update(&tid, &a);
    return 0;
}

TRACEPOINT_PROBE(syscalls, sys_exit_mmap) {
    if ((bpf_get_current_pid_tgid() >> 32) != TARGET_PID)
        return 0;
    u32 tid = (u32)bpf_get_current_pid_tgid();
    struct mmap_args_t *a = mmap_pending.lookup(&tid);
    if (!a)
        return 0;
    struct recent_t r = {};
    r.start = (u64)args->ret;
    r.end = r.start + ((a->len + 0xfff) & ~0xfffULL);
    r.flags = a->flags;
    mmap_pending.delete(&tid);
    long ret = args->ret;
    if (ret < 0 && ret > -4096)
        return 0;
    int zero = 0;
    u64 *hp = recent_head.lookup(&zero);
    if (!hp)
        return 0;
    r.seq = __sync_fetch_and_add(hp, 1);
    u32 slot = r.seq & (RECENT - 1);
    recent_info.update(&r.seq, &r);
    recent.update(&slot, &r);
    return 0;
}
