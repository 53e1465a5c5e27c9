// shared: System V shared memory calls (shmsnoop without kprobes), madvise calls that ask for
// or refuse huge pages, memfd_create, page migrations by reason and khugepaged's collapses.
//
// Two probes compile this file. -DSYSCALLS (the on-demand "shmsnoop" probe, attached while the
// Shared pane is shown): the syscall tracepoints. Enabling any syscall tracepoint sends every
// syscall of every task through the kernel's tracing path (about 40 ns each here, getppid 1.31x:
// bench/shared_cost.py), so they are not attached at start. Without it (the "shared" probe, at
// start): migrations and khugepaged, on slow paths.
// - syscalls:sys_{enter,exit}_shm{get,at,dt,ctl} and memfd_create: the enter's arguments wait in
//   an LRU hash by tid for the exit, which sends one ring-buffer event with the result.
// - syscalls:sys_enter_madvise: only behaviours MADV_HUGEPAGE (14), MADV_NOHUGEPAGE (15) and
//   MADV_COLLAPSE (25) go on; any other madvise costs this comparison only. Its exit costs a hash
//   lookup that misses for those others.
// - migrate:mm_migrate_pages fires once per migrate_pages() call: summed per reason in an array.
// - huge_memory:mm_collapse_huge_page (per collapse attempt) counted by status,
//   mm_khugepaged_scan_pmd (per PMD khugepaged scans; its scan rate is bounded by its own
//   settings) counted.
//
// Configured with -DSYSCALLS, -DMAX_TIDS=<n>, -DRINGBUF_PAGES=<n>, -DHAVE_MEMFD, -DHAVE_MIGRATE,
// -DHAVE_COLLAPSE, -DHAVE_SCAN_PMD (the optional tracepoints this kernel has), and the call
// numbers, madvise behaviours and table sizes memtop/probes/shared.py reads by
// (SharedProbe.defines: Python is their one definition, the values below are only defaults).

#include "common.h"

// BCC declares mm_migrate_pages' argument struct with a field of this enum's type
#include <linux/migrate_mode.h>

#ifndef MAX_TIDS
#define MAX_TIDS 4096
#endif
#ifndef RINGBUF_PAGES
#define RINGBUF_PAGES 16
#endif

#ifndef SHARED_SHMGET
#define SHARED_SHMGET 0
#endif
#ifndef SHARED_SHMAT
#define SHARED_SHMAT 1
#endif
#ifndef SHARED_SHMDT
#define SHARED_SHMDT 2
#endif
#ifndef SHARED_SHMCTL
#define SHARED_SHMCTL 3
#endif
#ifndef SHARED_MADVISE
#define SHARED_MADVISE 4
#endif
#ifndef SHARED_MEMFD_CREATE
#define SHARED_MEMFD_CREATE 5
#endif

// the madvise behaviours that go on (uapi asm-generic/mman-common.h)
#ifndef SHARED_MADV_HUGEPAGE
#define SHARED_MADV_HUGEPAGE 14
#endif
#ifndef SHARED_MADV_NOHUGEPAGE
#define SHARED_MADV_NOHUGEPAGE 15
#endif
#ifndef SHARED_MADV_COLLAPSE
#define SHARED_MADV_COLLAPSE 25
#endif

#ifndef SHARED_REASONS
#define SHARED_REASONS 16
#endif
#ifndef SHARED_STATUSES
#define SHARED_STATUSES 64
#endif

struct shared_event_t {
    u64 ts_ns;
    u64 arg0;   // shmget: key; shmat, shmctl: shmid; shmdt: address; madvise: start
    u64 arg1;   // shmget: size; shmat: address asked; shmctl: buf; madvise: length
    s64 ret;    // the syscall's return value (negative: -errno)
    u32 pid;
    u32 tid;
    u32 call;   // SHARED_*
    s32 flags;  // shmget, shmat: shmflg; shmctl: cmd; madvise: behaviour; memfd: flags
    char comm[16];
    char name[32];  // memfd_create: the name asked for
};

struct shared_pending_t {
    u64 arg0;
    u64 arg1;
    u32 call;
    s32 flags;
    s32 nr;  // the syscall entered: an exit of another (a thread died in its syscall, its tid reused) pairs with nothing
    char name[32];
};

struct shared_migrate_t {
    u64 calls;
    u64 succeeded;
    u64 failed;
    u64 thp_succeeded;
    u64 thp_failed;
    u64 thp_split;
};

BPF_RINGBUF_OUTPUT(shared_events, RINGBUF_PAGES);
BPF_TABLE("lru_hash", u32, struct shared_pending_t, shared_pending, MAX_TIDS);
BPF_PERCPU_ARRAY(shared_lost, u64, 1);
BPF_ARRAY(shared_migrate, struct shared_migrate_t, SHARED_REASONS);
BPF_ARRAY(shared_collapse, u64, SHARED_STATUSES);
BPF_PERCPU_ARRAY(shared_scan_pmd, u64, 1);

static __always_inline void shared_enter(s32 nr, u32 call, u64 arg0, u64 arg1, s32 flags) {
    u32 tid = bpf_get_current_pid_tgid();
    struct shared_pending_t p = {};
    p.nr = nr;
    p.arg0 = arg0;
    p.arg1 = arg1;
    p.call = call;
    p.flags = flags;
    shared_pending.update(&tid, &p);
}

static __always_inline void shared_exit(s32 nr, s64 ret) {
    u64 id = bpf_get_current_pid_tgid();
    u32 tid = (u32)id;
    struct shared_pending_t *p = shared_pending.lookup(&tid);
    if (!p)
        return;
    if (p->nr != nr) {
        shared_pending.delete(&tid);
        return;
    }
    struct shared_event_t *e = shared_events.ringbuf_reserve(sizeof(*e));
    if (!e) {
        int zero = 0;
        memtop_bump(shared_lost.lookup(&zero));
        shared_pending.delete(&tid);
        return;
    }
    __builtin_memset(e, 0, sizeof(*e));
    e->ts_ns = bpf_ktime_get_ns();
    e->arg0 = p->arg0;
    e->arg1 = p->arg1;
    e->call = p->call;
    e->flags = p->flags;
    __builtin_memcpy(e->name, p->name, sizeof(e->name));
    e->ret = ret;
    e->pid = id >> 32;
    e->tid = tid;
    bpf_get_current_comm(&e->comm, sizeof(e->comm));
    shared_events.ringbuf_submit(e, 0);
    shared_pending.delete(&tid);
}

#ifdef SYSCALLS
TRACEPOINT_PROBE(syscalls, sys_enter_shmget) {
    shared_enter(args->__syscall_nr, SHARED_SHMGET, (u64)args->key, args->size, (s32)args->shmflg);
    return 0;
}

TRACEPOINT_PROBE(syscalls, sys_exit_shmget) {
    shared_exit(args->__syscall_nr, args->ret);
    return 0;
}

TRACEPOINT_PROBE(syscalls, sys_enter_shmat) {
    shared_enter(args->__syscall_nr, SHARED_SHMAT, (u64)args->shmid, (u64)args->shmaddr, (s32)args->shmflg);
    return 0;
}

TRACEPOINT_PROBE(syscalls, sys_exit_shmat) {
    shared_exit(args->__syscall_nr, args->ret);
    return 0;
}

TRACEPOINT_PROBE(syscalls, sys_enter_shmdt) {
    shared_enter(args->__syscall_nr, SHARED_SHMDT, (u64)args->shmaddr, 0, 0);
    return 0;
}

TRACEPOINT_PROBE(syscalls, sys_exit_shmdt) {
    shared_exit(args->__syscall_nr, args->ret);
    return 0;
}

TRACEPOINT_PROBE(syscalls, sys_enter_shmctl) {
    shared_enter(args->__syscall_nr, SHARED_SHMCTL, (u64)args->shmid, (u64)args->buf, (s32)args->cmd);
    return 0;
}

TRACEPOINT_PROBE(syscalls, sys_exit_shmctl) {
    shared_exit(args->__syscall_nr, args->ret);
    return 0;
}

TRACEPOINT_PROBE(syscalls, sys_enter_madvise) {
    int behavior = args->behavior;
    // the in-kernel filter: every other madvise stops here
    if (behavior != SHARED_MADV_HUGEPAGE && behavior != SHARED_MADV_NOHUGEPAGE &&
        behavior != SHARED_MADV_COLLAPSE)
        return 0;
    shared_enter(args->__syscall_nr, SHARED_MADVISE, args->start, args->len_in, behavior);
    return 0;
}

TRACEPOINT_PROBE(syscalls, sys_exit_madvise) {
    shared_exit(args->__syscall_nr, args->ret);
    return 0;
}

#ifdef HAVE_MEMFD
TRACEPOINT_PROBE(syscalls, sys_enter_memfd_create) {
    u32 tid = bpf_get_current_pid_tgid();
    struct shared_pending_t p = {};
    p.nr = args->__syscall_nr;
    p.call = SHARED_MEMFD_CREATE;
    p.flags = (s32)args->flags;
    bpf_probe_read_user_str(p.name, sizeof(p.name), args->uname);
    shared_pending.update(&tid, &p);
    return 0;
}

TRACEPOINT_PROBE(syscalls, sys_exit_memfd_create) {
    shared_exit(args->__syscall_nr, args->ret);
    return 0;
}
#endif
#endif  // SYSCALLS

#ifdef HAVE_MIGRATE
TRACEPOINT_PROBE(migrate, mm_migrate_pages) {
    int reason = args->reason;
    if (reason < 0 || reason >= SHARED_REASONS)
        reason = SHARED_REASONS - 1;  // a reason newer than this list: "other"
    struct shared_migrate_t *m = shared_migrate.lookup(&reason);
    if (!m)
        return 0;
    __sync_fetch_and_add(&m->calls, 1);
    __sync_fetch_and_add(&m->succeeded, args->succeeded);
    __sync_fetch_and_add(&m->failed, args->failed);
    __sync_fetch_and_add(&m->thp_succeeded, args->thp_succeeded);
    __sync_fetch_and_add(&m->thp_failed, args->thp_failed);
    __sync_fetch_and_add(&m->thp_split, args->thp_split);
    return 0;
}
#endif

#ifdef HAVE_COLLAPSE
TRACEPOINT_PROBE(huge_memory, mm_collapse_huge_page) {
    int status = args->status;
    if (status < 0 || status >= SHARED_STATUSES)
        status = SHARED_STATUSES - 1;
    u64 *v = shared_collapse.lookup(&status);
    if (v)
        __sync_fetch_and_add(v, 1);
    return 0;
}
#endif

#ifdef HAVE_SCAN_PMD
TRACEPOINT_PROBE(huge_memory, mm_khugepaged_scan_pmd) {
    int zero = 0;
    memtop_bump(shared_scan_pmd.lookup(&zero));
    return 0;
}
#endif
