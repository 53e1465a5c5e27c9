// vmscan: page reclaim, kswapd, slab shrinking, compaction and direct/memcg reclaim latency.
//
// Slow paths only (reclaim runs when memory is short), so this program is attached by default.
// Everything that can fire often (LRU shrinking, slab shrinkers, compaction) is aggregated in
// kernel maps that user space reads once per tick; only reclaim *ends* (one per direct or memcg
// reclaim episode) are sent as events, through a ring buffer. Latencies are also aggregated here,
// so a burst that overflows the ring loses events but never histogram counts; every ring drop is
// counted in `lost`.
//
// The ring is a log of episodes, not the source of any figure: totals, per-process and per-cgroup
// figures and latency histograms (also per process, for per-cgroup percentiles) are all in maps.
// So the log is rate-limited here, by a per-CPU token bucket (LOG_PER_S episodes a second, bursts
// of LOG_BURST): a memcg storm ends thousands of episodes a second, and each one the ring carries
// costs user space far more than it costs the kernel. Episodes left out by the bucket are counted
// in C_UNLISTED, apart from ring drops (`lost`): not listed is a choice, lost is an overflow.
//
// Tracepoint fields and helpers only: the headers BCC compiles against may be a stand-in of
// another kernel version, so no kernel struct is ever dereferenced.
//
// Per cgroup: episodes are also aggregated by the reclaiming task's cgroup2 id
// (bpf_get_current_cgroup_id, the inode of its directory in the unified hierarchy), and every event
// carries that id, so a cgroup's reclaim is exact even when the ring drops events. On a v1 or
// hybrid machine the memory cgroup is another hierarchy: user space attributes by the task's memcg.
//
// Configured with -DMAX_TIDS=<n> -DMAX_PIDS=<n> -DMAX_SHRINKERS=<n> -DRINGBUF_PAGES=<n>
// -DMAX_CGROUPS=<n> -DLOG_PER_S=<n> (0: log every episode) -DLOG_BURST=<n>
// (RINGBUF_PAGES is a power of two; tests shrink it to force overflow), and the kinds, origins,
// counter slots and histogram size memtop/probes/vmscan.py reads them by (VmscanProbe.defines:
// Python is their one definition, the values below are only defaults).

#include "common.h"

// compaction:mm_compaction_kcompactd_wake has an `enum zone_type` field; BCC builds the args
// struct from tracefs, and needs the enum to be complete (4 bytes; its values are not used).
// Declared here: <linux/mmzone.h> would double clang's time per compile for one enum.
enum zone_type { MEMTOP_ZONE_ANY };

#ifndef MAX_TIDS
#define MAX_TIDS 8192
#endif
#ifndef MAX_PIDS
#define MAX_PIDS 8192
#endif
#ifndef MAX_CGROUPS
#define MAX_CGROUPS 4096
#endif
#ifndef MAX_SHRINKERS
#define MAX_SHRINKERS 1024
#endif
#ifndef RINGBUF_PAGES
#define RINGBUF_PAGES 256
#endif

#ifndef LOG_PER_S
#define LOG_PER_S 64
#endif
#ifndef LOG_BURST
#define LOG_BURST 64
#endif

#ifndef HIST_SLOTS
#define HIST_SLOTS 64
#endif

// reclaim kinds (latency histograms, events, per-pid totals)
#ifndef KIND_DIRECT
#define KIND_DIRECT 0
#endif
#ifndef KIND_MEMCG
#define KIND_MEMCG 1
#endif
#ifndef NR_KINDS
#define NR_KINDS 2
#endif

// origins of LRU scanning (mm_vmscan_lru_shrink_inactive)
#ifndef ORIGIN_KSWAPD
#define ORIGIN_KSWAPD 0
#endif
#ifndef ORIGIN_DIRECT
#define ORIGIN_DIRECT 1
#endif
#ifndef ORIGIN_MEMCG
#define ORIGIN_MEMCG 2
#endif
#ifndef NR_ORIGINS
#define NR_ORIGINS 3
#endif

// slots of the `counters` array
#ifndef C_KSWAPD_WAKE
#define C_KSWAPD_WAKE 0
#endif
#ifndef C_KSWAPD_SLEEP
#define C_KSWAPD_SLEEP 1
#endif
#ifndef C_KCOMPACTD_WAKE
#define C_KCOMPACTD_WAKE 2
#endif
#ifndef C_COMPACT_COUNT
#define C_COMPACT_COUNT 3
#endif
#ifndef C_COMPACT_NS
#define C_COMPACT_NS 4
#endif
#ifndef C_SLAB_DROPPED
#define C_SLAB_DROPPED 5    // shrinker calls not counted: shrinker table full
#endif
#ifndef C_PAIRS_DROPPED
#define C_PAIRS_DROPPED 6   // reclaim ends whose begin was not seen (evicted or before attach)
#endif
#ifndef C_CGROUPS_DROPPED
#define C_CGROUPS_DROPPED 7 // episodes not counted per cgroup: cgroup table full
#endif
#ifndef C_UNLISTED
#define C_UNLISTED 8        // episodes the log left out (the token bucket was empty)
#endif
#ifndef C_GENERATION
#define C_GENERATION 9      // bumped after every update of a map user space reads (common.h)
#endif
#ifndef NR_COUNTERS
#define NR_COUNTERS 10
#endif

struct begin_t {
    u64 ts_ns;
    u32 kind;
    u32 pad;
};

struct origin_t {
    u64 scanned;
    u64 reclaimed;
    u64 events;
};

struct pid_key_t {
    u32 pid;
    u32 kind;
};

struct pid_stat_t {
    u64 events;
    u64 total_ns;
    u64 max_ns;
    u64 reclaimed;
    char comm[16];
    u64 cgroup_id;  // the cgroup2 id of its latest episode's task
};

struct cg_key_t {
    u64 cgroup_id;
    u32 kind;
    u32 pad;
};

struct cg_stat_t {
    u64 events;
    u64 total_ns;
    u64 max_ns;
    u64 reclaimed;
};

struct reclaim_hist_key_t {
    u32 pid;
    u32 slot;  // kind * HIST_SLOTS + log2(latency ns)
};

// a CPU's log budget: nanoseconds of credit, one episode per 1e9 / LOG_PER_S of it
struct log_bucket_t {
    u64 last_ns;
    u64 credit_ns;
};

struct slab_begin_t {
    u64 ts_ns;
    u64 shrink;
};

struct slab_stat_t {
    u64 count;
    u64 total_ns;
    u64 freed;
};

struct reclaim_event_t {
    u64 ts_ns;          // end of the episode, CLOCK_MONOTONIC
    u64 latency_ns;
    u64 nr_reclaimed;   // pages
    u32 pid;
    u32 tid;
    u32 kind;
    u32 pad;
    char comm[16];
    u64 cgroup_id;      // the task's cgroup2 id
};

BPF_RINGBUF_OUTPUT(vmscan_events, RINGBUF_PAGES);
BPF_PERCPU_ARRAY(vmscan_lost, u64, 1);

// tid -> begin of its direct/memcg reclaim; LRU so threads that die mid-reclaim never fill it
BPF_TABLE("lru_hash", u32, struct begin_t, reclaim_begin, MAX_TIDS);
BPF_TABLE("lru_hash", u32, struct slab_begin_t, slab_begin, MAX_TIDS);
BPF_TABLE("lru_hash", u32, u64, compact_begin, MAX_TIDS);

BPF_PERCPU_ARRAY(origins, struct origin_t, NR_ORIGINS);
BPF_PERCPU_ARRAY(vmscan_counters, u64, NR_COUNTERS);
BPF_PERCPU_ARRAY(reclaim_hist, u64, NR_KINDS * HIST_SLOTS);
BPF_PERCPU_ARRAY(compact_hist, u64, HIST_SLOTS);
// (tgid, kind) -> totals; LRU: the table stays bounded however many processes stall
BPF_TABLE("lru_hash", struct pid_key_t, struct pid_stat_t, pid_stats, MAX_PIDS);
// (tgid, kind, bucket) -> episodes: each process's latency histogram (sparse: a process's episodes
// rarely span more than a handful of buckets); user space sums them per memory cgroup
BPF_TABLE("lru_hash", struct reclaim_hist_key_t, u64, reclaim_pid_hist, MAX_PIDS * 8);
BPF_PERCPU_ARRAY(log_bucket, struct log_bucket_t, 1);
BPF_HASH(slab_stats, u64, struct slab_stat_t, MAX_SHRINKERS);
// (cgroup2 id, kind) -> totals; a plain hash, bounded: episodes of a cgroup that finds it full are
// counted in C_CGROUPS_DROPPED (a removed cgroup's entry stays: its totals are history)
BPF_HASH(cg_stats, struct cg_key_t, struct cg_stat_t, MAX_CGROUPS);

static __always_inline void vmscan_count(u32 slot, u64 n) {
    memtop_add(vmscan_counters.lookup(&slot), n);
}

// Every program that updates a map the probe reads ends by this, after its updates and before any
// ring submit: a poll that finds the generation where it was hands back its last read
// (memtop.probes.base.Generation). The begin programs update only their own begin maps.
static __always_inline void vmscan_updated(void) {
    u32 slot = C_GENERATION;
    memtop_generation(vmscan_counters.lookup(&slot));
}

static __always_inline u32 hist_slot(u64 v) {
    u32 r = memtop_log2(v);
    return r < HIST_SLOTS ? r : HIST_SLOTS - 1;
}

// Whether this episode goes into the log: a token bucket per CPU (per-CPU data, no atomics: a task
// preempted here by another ending reclaim on the same CPU may make the bucket a token off, never
// an episode both listed and counted as not listed, nor neither).
static __always_inline int log_allowed(u64 now) {
#if LOG_PER_S == 0
    return 1;
#else
    u32 zero = 0;
    struct log_bucket_t *b = log_bucket.lookup(&zero);
    if (!b)
        return 1;
    u64 per = 1000000000ULL / LOG_PER_S;
    u64 cap = per * LOG_BURST;
    u64 credit = b->credit_ns + (now - b->last_ns);
    if (!b->last_ns || credit > cap)
        credit = cap;  // first episode on this CPU, or idle long enough: a full bucket
    b->last_ns = now;
    if (credit < per) {
        b->credit_ns = credit;
        return 0;
    }
    b->credit_ns = credit - per;
    return 1;
#endif
}

static __always_inline int is_kswapd(void) {
    char comm[16] = {};
    bpf_get_current_comm(&comm, sizeof(comm));
    return comm[0] == 'k' && comm[1] == 's' && comm[2] == 'w' && comm[3] == 'a' && comm[4] == 'p' &&
           comm[5] == 'd';
}

static __always_inline void reclaim_begin_common(u32 kind) {
    u32 tid = (u32)bpf_get_current_pid_tgid();
    struct begin_t b = {.ts_ns = bpf_ktime_get_ns(), .kind = kind};
    reclaim_begin.update(&tid, &b);
}

static __always_inline void reclaim_end_common(u32 kind, u64 nr_reclaimed) {
    u64 id = bpf_get_current_pid_tgid();
    u32 tid = (u32)id, tgid = id >> 32;
    struct begin_t *b = reclaim_begin.lookup(&tid);
    if (!b || b->kind != kind) {
        vmscan_count(C_PAIRS_DROPPED, 1);
        vmscan_updated();
        return;
    }
    u64 now = bpf_ktime_get_ns();
    u64 lat = now - b->ts_ns;
    reclaim_begin.delete(&tid);

    u32 slot = kind * HIST_SLOTS + hist_slot(lat);
    memtop_bump(reclaim_hist.lookup(&slot));
    struct reclaim_hist_key_t hk = {.pid = tgid, .slot = slot};
    u64 zero64 = 0;
    u64 *ph = reclaim_pid_hist.lookup_or_try_init(&hk, &zero64);
    if (ph)
        __sync_fetch_and_add(ph, 1);

    struct pid_key_t key = {.pid = tgid, .kind = kind};
    struct pid_stat_t *ps = pid_stats.lookup(&key);
    if (!ps) {
        struct pid_stat_t zero = {};
        pid_stats.insert(&key, &zero);  // if absent: an update could zero another CPU's count
        ps = pid_stats.lookup(&key);
    }
    if (ps) {
        // threads of one process may end reclaim on two CPUs at once
        __sync_fetch_and_add(&ps->events, 1);
        __sync_fetch_and_add(&ps->total_ns, lat);
        __sync_fetch_and_add(&ps->reclaimed, nr_reclaimed);
        if (lat > ps->max_ns)
            ps->max_ns = lat;  // a lost race here only understates max by one concurrent episode
        bpf_get_current_comm(&ps->comm, sizeof(ps->comm));
    }

    u64 cgid = bpf_get_current_cgroup_id();
    if (ps)
        ps->cgroup_id = cgid;
    struct cg_key_t ck = {.cgroup_id = cgid, .kind = kind};
    struct cg_stat_t *cs = cg_stats.lookup(&ck);
    if (!cs) {
        struct cg_stat_t zero = {};
        cg_stats.insert(&ck, &zero);
        cs = cg_stats.lookup(&ck);
    }
    if (cs) {
        __sync_fetch_and_add(&cs->events, 1);
        __sync_fetch_and_add(&cs->total_ns, lat);
        __sync_fetch_and_add(&cs->reclaimed, nr_reclaimed);
        if (lat > cs->max_ns)
            cs->max_ns = lat;
    } else {
        vmscan_count(C_CGROUPS_DROPPED, 1);
    }

    if (!log_allowed(now)) {
        vmscan_count(C_UNLISTED, 1);
        vmscan_updated();
        return;
    }
    struct reclaim_event_t *e = vmscan_events.ringbuf_reserve(sizeof(*e));
    if (!e) {
        u32 zero = 0;
        memtop_bump(vmscan_lost.lookup(&zero));
        vmscan_updated();
        return;
    }
    e->ts_ns = now;
    e->latency_ns = lat;
    e->nr_reclaimed = nr_reclaimed;
    e->pid = tgid;
    e->tid = tid;
    e->kind = kind;
    e->pad = 0;
    e->cgroup_id = cgid;
    bpf_get_current_comm(&e->comm, sizeof(e->comm));
    vmscan_updated();  // before the submit: a poll that drains the event sees its totals
    vmscan_events.ringbuf_submit(e, 0);
}

TRACEPOINT_PROBE(vmscan, mm_vmscan_direct_reclaim_begin) {
    reclaim_begin_common(KIND_DIRECT);
    return 0;
}

TRACEPOINT_PROBE(vmscan, mm_vmscan_direct_reclaim_end) {
    reclaim_end_common(KIND_DIRECT, args->nr_reclaimed);
    return 0;
}

TRACEPOINT_PROBE(vmscan, mm_vmscan_memcg_reclaim_begin) {
    reclaim_begin_common(KIND_MEMCG);
    return 0;
}

TRACEPOINT_PROBE(vmscan, mm_vmscan_memcg_reclaim_end) {
    reclaim_end_common(KIND_MEMCG, args->nr_reclaimed);
    return 0;
}

TRACEPOINT_PROBE(vmscan, mm_vmscan_lru_shrink_inactive) {
    // Whose scan is this? A thread inside a direct or memcg reclaim pair: that kind (checked first,
    // so a user task that happens to be called "kswapd…" is still attributed by its pair);
    // otherwise kswapd by name; anything else (e.g. node reclaim) counts as direct, which is also
    // where /proc/vmstat puts non-kswapd global reclaim.
    u32 tid = (u32)bpf_get_current_pid_tgid();
    u32 origin = ORIGIN_DIRECT;
    struct begin_t *b = reclaim_begin.lookup(&tid);
    if (b)
        origin = b->kind == KIND_MEMCG ? ORIGIN_MEMCG : ORIGIN_DIRECT;
    else if (is_kswapd())
        origin = ORIGIN_KSWAPD;
    struct origin_t *o = origins.lookup(&origin);
    if (o) {
        o->scanned += args->nr_scanned;
        o->reclaimed += args->nr_reclaimed;
        o->events += 1;
    }
    vmscan_updated();
    return 0;
}

TRACEPOINT_PROBE(vmscan, mm_vmscan_kswapd_wake) {
    vmscan_count(C_KSWAPD_WAKE, 1);
    vmscan_updated();
    return 0;
}

TRACEPOINT_PROBE(vmscan, mm_vmscan_kswapd_sleep) {
    vmscan_count(C_KSWAPD_SLEEP, 1);
    vmscan_updated();
    return 0;
}

TRACEPOINT_PROBE(vmscan, mm_shrink_slab_start) {
    u32 tid = (u32)bpf_get_current_pid_tgid();
    struct slab_begin_t b = {.ts_ns = bpf_ktime_get_ns(), .shrink = (u64)args->shrink};
    slab_begin.update(&tid, &b);
    return 0;
}

TRACEPOINT_PROBE(vmscan, mm_shrink_slab_end) {
    u32 tid = (u32)bpf_get_current_pid_tgid();
    struct slab_begin_t *b = slab_begin.lookup(&tid);
    if (!b)
        return 0;
    u64 lat = bpf_ktime_get_ns() - b->ts_ns;
    u64 key = b->shrink;
    slab_begin.delete(&tid);
    struct slab_stat_t *s = slab_stats.lookup(&key);
    if (!s) {
        struct slab_stat_t zero = {};
        slab_stats.insert(&key, &zero);  // fails when the table is full
        s = slab_stats.lookup(&key);
        if (!s) {
            vmscan_count(C_SLAB_DROPPED, 1);
            vmscan_updated();
            return 0;
        }
    }
    __sync_fetch_and_add(&s->count, 1);
    __sync_fetch_and_add(&s->total_ns, lat);
    long freed = args->retval;
    if (freed > 0)
        __sync_fetch_and_add(&s->freed, (u64)freed);
    vmscan_updated();
    return 0;
}

TRACEPOINT_PROBE(compaction, mm_compaction_begin) {
    u32 tid = (u32)bpf_get_current_pid_tgid();
    u64 ts = bpf_ktime_get_ns();
    compact_begin.update(&tid, &ts);
    return 0;
}

TRACEPOINT_PROBE(compaction, mm_compaction_end) {
    u32 tid = (u32)bpf_get_current_pid_tgid();
    u64 *ts = compact_begin.lookup(&tid);
    if (!ts)
        return 0;
    u64 lat = bpf_ktime_get_ns() - *ts;
    compact_begin.delete(&tid);
    vmscan_count(C_COMPACT_COUNT, 1);
    vmscan_count(C_COMPACT_NS, lat);
    u32 slot = hist_slot(lat);
    memtop_bump(compact_hist.lookup(&slot));
    vmscan_updated();
    return 0;
}

TRACEPOINT_PROBE(compaction, mm_compaction_kcompactd_wake) {
    vmscan_count(C_KCOMPACTD_WAKE, 1);
    vmscan_updated();
    return 0;
}
