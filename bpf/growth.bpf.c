// growth: heap growth of ONE process by user stack, from syscall tracepoints (no kprobes).
//
// brk(): growth = new brk - old brk, where the current brk of the target is kept here (seeded by
// user space from /proc/PID/maps at attach, then learnt exactly from each sys_exit_brk).
// mmap(): bytes requested by successful calls. munmap(): bytes unmapped, charged back to the stack
// that mapped that address (when the unmap starts at a mapping this program saw being made).
// Everything is filtered in kernel to the target tgid and summed in maps read once per tick.
//
// Configured with -DTARGET_PID=<tgid> -DMAX_STACKS=<n> -DMAX_LIVE=<n> -DMAX_TIDS=<n> (the sizes are
// GrowthProbe.defines': Python is their one definition, the values below are only defaults).

#include "common.h"

#ifndef TARGET_PID
#error "TARGET_PID must be set (-DTARGET_PID=<tgid>)"
#endif
#ifndef MAX_STACKS
#define MAX_STACKS 4096
#endif
#ifndef MAX_LIVE
#define MAX_LIVE 65536
#endif
#ifndef MAX_TIDS
#define MAX_TIDS 4096
#endif

struct growth_t {
    u64 brk_calls;
    u64 brk_grown_bytes;
    u64 brk_shrunk_bytes;
    u64 mmap_calls;
    u64 mmap_bytes;
    u64 munmap_calls;
    u64 munmap_bytes;   // unmapped by calls from this stack
    u64 freed_bytes;    // of mappings this stack made, unmapped later (by any stack)
};

struct pending_t {
    u64 len;
    s32 stack_id;
    u32 is_brk;
};

struct live_t {
    u64 len;
    s32 stack_id;
    u32 pad;
};

struct brk_t {
    u64 cur;
    u64 known;
};

BPF_STACK_TRACE(stacks, MAX_STACKS);
BPF_HASH(growth, s32, struct growth_t, MAX_STACKS);
// per thread: the call in flight between sys_enter and sys_exit
BPF_TABLE("lru_hash", u32, struct pending_t, pending, MAX_TIDS);
// start address -> (len, stack) of mappings made while attached
BPF_TABLE("lru_hash", u64, struct live_t, live, MAX_LIVE);
BPF_ARRAY(cur_brk, struct brk_t, 1);
// [0] = growth inserts that failed (map full)
BPF_PERCPU_ARRAY(lost, u64, 1);

static __always_inline int is_target(void) {
    return (bpf_get_current_pid_tgid() >> 32) == TARGET_PID;
}

static __always_inline struct growth_t *growth_of(s32 stack_id) {
    struct growth_t *g = growth.lookup(&stack_id);
    if (g)
        return g;
    struct growth_t zero = {};
    growth.insert(&stack_id, &zero);  // if absent: an update could zero another CPU's count
    g = growth.lookup(&stack_id);
    if (!g) {
        int slot = 0;
        memtop_bump(lost.lookup(&slot));
    }
    return g;
}

static __always_inline void stash(void *ctx, u64 len, u32 is_brk) {
    u32 tid = (u32)bpf_get_current_pid_tgid();
    struct pending_t p = {};
    p.len = len;
    p.stack_id = stacks.get_stackid(ctx, BPF_F_USER_STACK);
    p.is_brk = is_brk;
    pending.update(&tid, &p);
}

TRACEPOINT_PROBE(syscalls, sys_enter_brk) {
    if (!is_target())
        return 0;
    stash(args, args->brk, 1);
    return 0;
}

TRACEPOINT_PROBE(syscalls, sys_exit_brk) {
    if (!is_target())
        return 0;
    u32 tid = (u32)bpf_get_current_pid_tgid();
    struct pending_t *p = pending.lookup(&tid);
    if (!p || !p->is_brk)
        return 0;
    s32 stack_id = p->stack_id;
    u64 requested = p->len;
    pending.delete(&tid);
    u64 newbrk = (u64)args->ret;
    int zero = 0;
    struct brk_t *b = cur_brk.lookup(&zero);
    if (!b)
        return 0;
    u64 old = b->cur;
    u64 known = b->known;
    b->cur = newbrk;
    b->known = 1;
    if (requested == 0)  // brk(0): a query, not a change
        return 0;
    struct growth_t *g = growth_of(stack_id);
    if (!g)
        return 0;
    __sync_fetch_and_add(&g->brk_calls, 1);
    if (!known)
        return 0;
    if (newbrk > old)
        __sync_fetch_and_add(&g->brk_grown_bytes, newbrk - old);
    else if (newbrk < old)
        __sync_fetch_and_add(&g->brk_shrunk_bytes, old - newbrk);
    return 0;
}

TRACEPOINT_PROBE(syscalls, sys_enter_mmap) {
    if (!is_target())
        return 0;
    stash(args, args->len, 0);
    return 0;
}

TRACEPOINT_PROBE(syscalls, sys_exit_mmap) {
    if (!is_target())
        return 0;
    u32 tid = (u32)bpf_get_current_pid_tgid();
    struct pending_t *p = pending.lookup(&tid);
    if (!p || p->is_brk)
        return 0;
    s32 stack_id = p->stack_id;
    u64 len = p->len;
    pending.delete(&tid);
    long ret = args->ret;
    if (ret < 0 && ret > -4096)  // failed: -errno
        return 0;
    struct growth_t *g = growth_of(stack_id);
    if (!g)
        return 0;
    __sync_fetch_and_add(&g->mmap_calls, 1);
    __sync_fetch_and_add(&g->mmap_bytes, len);
    u64 addr = (u64)ret;
    struct live_t l = {};
    l.len = len;
    l.stack_id = stack_id;
    live.update(&addr, &l);
    return 0;
}

TRACEPOINT_PROBE(syscalls, sys_enter_munmap) {
    if (!is_target())
        return 0;
    u64 addr = args->addr;
    u64 len = args->len;
    s32 stack_id = stacks.get_stackid(args, BPF_F_USER_STACK);
    struct growth_t *g = growth_of(stack_id);
    if (g) {
        __sync_fetch_and_add(&g->munmap_calls, 1);
        __sync_fetch_and_add(&g->munmap_bytes, len);
    }
    struct live_t *l = live.lookup(&addr);
    if (!l)
        return 0;
    struct live_t rec = *l;
    live.delete(&addr);
    u64 freed = len < rec.len ? len : rec.len;
    struct growth_t *owner = growth_of(rec.stack_id);
    if (owner)
        __sync_fetch_and_add(&owner->freed_bytes, freed);
    if (len < rec.len) {  // the head of a mapping: the tail stays live
        u64 rest = addr + len;
        rec.len -= len;
        live.update(&rest, &rec);
    }
    return 0;
}
