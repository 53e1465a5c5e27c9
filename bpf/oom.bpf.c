// oom: who the OOM killer took, who triggered it, and whether a memory cgroup's limit or the
// whole machine ran out.
//
// oom:mark_victim fires in the task that invoked the OOM killer (the trigger), with the victim's
// pid, comm, total_vm, anon/file/shmem RSS (kB), uid, page tables (kB) and oom_score_adj on recent
// kernels. Scope: the trigger's most recent reclaim before the kill: memcg limit reclaim
// (vmscan:mm_vmscan_memcg_reclaim_begin) = memcg, page-allocator direct reclaim
// (vmscan:mm_vmscan_direct_reclaim_begin) = global. Both are slow paths. Kills are rare, so each
// goes through a ring buffer.
//
// Configured with -DMV_HAS_COMM, -DMV_HAS_RSS, -DMV_HAS_UID, -DMV_HAS_PGTABLES, -DMV_HAS_ADJ
// (the fields this kernel's mark_victim has), -DHAVE_MEMCG_RECLAIM, -DHAVE_DIRECT_RECLAIM,
// -DMAX_TIDS=<n>, -DRINGBUF_PAGES=<n>, and the scopes and the unknown oom_score_adj
// memtop/probes/oom.py reads (OomProbe.defines: Python is their one definition, the values below
// are only defaults).

#include "common.h"

#ifndef MAX_TIDS
#define MAX_TIDS 16384
#endif
#ifndef RINGBUF_PAGES
#define RINGBUF_PAGES 8
#endif

#ifndef SCOPE_UNKNOWN
#define SCOPE_UNKNOWN 0
#endif
#ifndef SCOPE_MEMCG
#define SCOPE_MEMCG 1
#endif
#ifndef SCOPE_GLOBAL
#define SCOPE_GLOBAL 2
#endif
// oom_score_adj when the tracepoint does not have it (below the kernel's -1000)
#ifndef ADJ_UNKNOWN
#define ADJ_UNKNOWN -10000
#endif

struct oom_event_t {
    u64 ts_ns;
    u64 total_vm_kb;
    u64 anon_rss_kb;
    u64 file_rss_kb;
    u64 shmem_rss_kb;
    u64 pgtables_kb;
    u32 victim_pid;
    u32 trigger_pid;
    u32 trigger_tid;
    u32 uid;
    s32 oom_score_adj;
    u32 scope;
    char victim_comm[16];
    char trigger_comm[16];
};

BPF_RINGBUF_OUTPUT(oom_events, RINGBUF_PAGES);
// tid -> kind of its latest reclaim (LRU: bounded)
BPF_TABLE("lru_hash", u32, u32, last_reclaim, MAX_TIDS);
BPF_PERCPU_ARRAY(oom_lost, u64, 1);

static __always_inline void note_reclaim(u32 kind) {
    u32 tid = bpf_get_current_pid_tgid();
    last_reclaim.update(&tid, &kind);
}

#ifdef HAVE_MEMCG_RECLAIM
TRACEPOINT_PROBE(vmscan, mm_vmscan_memcg_reclaim_begin) {
    note_reclaim(SCOPE_MEMCG);
    return 0;
}
#endif

#ifdef HAVE_DIRECT_RECLAIM
TRACEPOINT_PROBE(vmscan, mm_vmscan_direct_reclaim_begin) {
    note_reclaim(SCOPE_GLOBAL);
    return 0;
}
#endif

TRACEPOINT_PROBE(oom, mark_victim) {
    struct oom_event_t *e = oom_events.ringbuf_reserve(sizeof(*e));
    if (!e) {
        int zero = 0;
        memtop_bump(oom_lost.lookup(&zero));
        return 0;
    }
    u64 id = bpf_get_current_pid_tgid();
    u32 tid = (u32)id;
    __builtin_memset(e, 0, sizeof(*e));
    e->ts_ns = bpf_ktime_get_ns();
    e->victim_pid = args->pid;
    e->trigger_pid = id >> 32;
    e->trigger_tid = tid;
    e->oom_score_adj = ADJ_UNKNOWN;
#ifdef MV_HAS_COMM
    TP_DATA_LOC_READ_CONST(e->victim_comm, comm, sizeof(e->victim_comm));
#endif
#ifdef MV_HAS_RSS
    e->total_vm_kb = args->total_vm;
    e->anon_rss_kb = args->anon_rss;
    e->file_rss_kb = args->file_rss;
    e->shmem_rss_kb = args->shmem_rss;
#endif
#ifdef MV_HAS_UID
    e->uid = args->uid;
#endif
#ifdef MV_HAS_PGTABLES
    e->pgtables_kb = args->pgtables;
#endif
#ifdef MV_HAS_ADJ
    e->oom_score_adj = args->oom_score_adj;
#endif
    bpf_get_current_comm(&e->trigger_comm, sizeof(e->trigger_comm));
    u32 *kind = last_reclaim.lookup(&tid);
    e->scope = kind ? *kind : SCOPE_UNKNOWN;
    oom_events.ringbuf_submit(e, 0);
    return 0;
}
