// slabtrace: who allocates slab objects, sampled, from the kmem tracepoints (no kprobes).
//
// kmem:kmem_cache_alloc (named caches: the tracepoint carries the cache's name) and kmem:kmalloc
// (the kmalloc-N caches: named in user space from bytes_alloc and the gfp flags) are counted per
// CPU; one allocation in SAMPLE on average (per CPU, at random gaps) is recorded under (cache,
// call site): allocations and bytes. Everything read once per tick; every failed insert counted.
//
// With -DFREES (the slabfrees probe: per call site net growth) a sampled allocation's pointer is
// also kept in a bounded LRU map, and kmem:kfree and kmem:kmem_cache_free look every freed
// pointer up there: a free of a sampled object is charged back to its (cache, site), the others
// are only counted (frees of objects not sampled cannot be attributed). Every free must be looked
// at, so sampling cannot make the free hooks cheaper: without -DFREES they are not compiled in,
// and only the two allocation hooks attach (half the hooked events of a slab-heavy workload).
//
// Two ways in, the same maps. With -DRAW (what memtop uses where the kernel's BTF describes these
// raw tracepoints as expected: memtop/probes/slabtrace.py checks), raw tracepoints: the program is
// called with the tracepoint's arguments, without the perf tracepoint path's record building,
// which alone slowed a slab-heavy loop ~1.5x here. kmem_cache_alloc's cache comes as a pointer:
// its name and size are read, for sampled allocations only, at the offsets the running kernel's BTF
// gives (-DKC_NAME_OFF, -DKC_SIZE_OFF). Without -DRAW, the regular tracepoints (named fields).
//
// Configured with -DSAMPLE=<n> -DMAX_SITES=<n> -DMAX_LIVE=<n>; -DFREES, -DSTACKS as above;
// -DFLOOR (bench/kernel_cost.py) makes every program return at once, to measure what the hooks
// cost by themselves. The counter slots and kmalloc cache flags are memtop/probes/slabtrace.py's
// (SlabTraceProbe.defines: Python is their one definition, the values below are only defaults).

#include "common.h"

#ifndef SAMPLE
#define SAMPLE 64
#endif
#ifndef MAX_SITES
#define MAX_SITES 8192
#endif
#ifndef MAX_LIVE
#define MAX_LIVE 65536
#endif

// slots of slab_counters
#ifndef SLAB_ALLOCS
#define SLAB_ALLOCS 0  // allocations seen
#endif
#ifndef SLAB_SAMPLED
#define SLAB_SAMPLED 1
#endif
#ifndef SLAB_FREES
#define SLAB_FREES 2  // frees seen
#endif
#ifndef SLAB_FREES_MATCHED
#define SLAB_FREES_MATCHED 3  // frees of a sampled allocation
#endif
#ifndef SLAB_DROPPED
#define SLAB_DROPPED 4  // samples dropped: sites map full
#endif
#ifndef SLAB_NEXT_SAMPLE
#define SLAB_NEXT_SAMPLE 5  // allocations left before the next sample (not a count)
#endif
#ifndef NR_SLAB_COUNTERS
#define NR_SLAB_COUNTERS 6
#endif
// site_t.flags of a kmalloc: which kmalloc cache family its gfp flags chose
#ifndef KMALLOC_CG
#define KMALLOC_CG 1  // accounted: kmalloc-cg-N
#endif
#ifndef KMALLOC_RCL
#define KMALLOC_RCL 2  // reclaimable: kmalloc-rcl-N
#endif

#define CACHE_NAME 32
#define GFP_RECLAIMABLE (1UL << 4)
#define GFP_ACCOUNT (1UL << 22)

struct site_t {
    u64 site;         // call_site: the kernel text address of the caller
    s64 stack;        // -DSTACKS: the kernel stack's id in slab_stacks (<0: none); else -1
    u32 size;         // kmalloc: bytes_alloc (the size class); 0 for a named cache
    u32 flags;        // kmalloc: KMALLOC_CG, KMALLOC_RCL or 0
    char name[CACHE_NAME];  // kmem_cache_alloc: the cache's name
};

struct stat_t {
    u64 allocs;
    u64 bytes;
    u64 frees;
};

BPF_HASH(sites, struct site_t, struct stat_t, MAX_SITES);
#ifdef STACKS
BPF_STACK_TRACE(slab_stacks, MAX_SITES);
#endif

static __always_inline s64 stack_of(void *ctx) {
#ifdef STACKS
    return slab_stacks.get_stackid(ctx, 0);
#else
    return -1;
#endif
}
#ifdef FREES
BPF_TABLE("lru_hash", u64, struct site_t, live, MAX_LIVE);
#endif
BPF_PERCPU_ARRAY(slab_counters, u64, NR_SLAB_COUNTERS);

static __always_inline int sampled(void) {
#ifdef FLOOR
    return 0;  // the bench's floor: the tracepoints' own cost, programs that do nothing
#endif
    int i = SLAB_ALLOCS, j = SLAB_NEXT_SAMPLE;
    u64 *c = slab_counters.lookup(&i);
    u64 *left = slab_counters.lookup(&j);
    if (!c || !left)
        return 0;
    *c += 1;
    if (*left > 1) {
        *left -= 1;
        return 0;
    }
    // The gap to the next sample is random, uniform in 1 .. 2*SAMPLE-1 (mean SAMPLE): every
    // SAMPLE-th allocation exactly would alias with a loop that allocates a fixed number of
    // objects per iteration, and sample one of them always and another never (a stat() loop once
    // showed its dentry allocations under a tenth of their share).
    *left = 1 + bpf_get_prandom_u32() % (2 * SAMPLE - 1);
    return 1;
}

static __always_inline void slab_count(int i) {
    memtop_bump(slab_counters.lookup(&i));
}

static __always_inline void record(struct site_t *k, u64 ptr, u64 bytes) {
    struct stat_t zero = {}, *st;
    st = sites.lookup(k);
    if (!st) {
        if (sites.insert(k, &zero) != 0) {
            slab_count(SLAB_DROPPED);
            return;
        }
        st = sites.lookup(k);
        if (!st)
            return;
    }
    __sync_fetch_and_add(&st->allocs, 1);
    __sync_fetch_and_add(&st->bytes, bytes);
    slab_count(SLAB_SAMPLED);
#ifdef FREES
    live.update(&ptr, k);
#endif
}

#ifdef FREES
static __always_inline void freed(u64 ptr) {
#ifdef FLOOR
    return;
#endif
    slab_count(SLAB_FREES);
    struct site_t *k = live.lookup(&ptr);
    if (!k)
        return;
    struct stat_t *st = sites.lookup(k);
    if (st)
        __sync_fetch_and_add(&st->frees, 1);
    live.delete(&ptr);
    slab_count(SLAB_FREES_MATCHED);
}
#endif

#ifdef RAW
// prototypes (include/trace/events/kmem.h, checked against the kernel's btf_trace_* typedefs):
// kmem_cache_alloc(call_site, ptr, struct kmem_cache *s, gfp_flags, node)
// kmalloc(call_site, ptr, bytes_req, bytes_alloc, gfp_flags, node)
// kfree(call_site, ptr); kmem_cache_free(call_site, ptr, const struct kmem_cache *s)
RAW_TRACEPOINT_PROBE(kmem_cache_alloc) {
    if (!sampled())
        return 0;
    struct site_t k = {};
    k.site = ctx->args[0];
    k.stack = stack_of(ctx);
    u64 s = ctx->args[2];
    u64 name = 0;
    u32 size = 0;
    bpf_probe_read_kernel(&name, sizeof(name), (void *)(s + KC_NAME_OFF));
    bpf_probe_read_kernel_str(k.name, sizeof(k.name), (void *)name);
    bpf_probe_read_kernel(&size, sizeof(size), (void *)(s + KC_SIZE_OFF));
    record(&k, ctx->args[1], size);
    return 0;
}

RAW_TRACEPOINT_PROBE(kmalloc) {
    if (!sampled())
        return 0;
    struct site_t k = {};
    k.site = ctx->args[0];
    k.stack = stack_of(ctx);
    k.size = ctx->args[3];
    unsigned long gfp = ctx->args[4];
    k.flags = (gfp & GFP_ACCOUNT) ? KMALLOC_CG : ((gfp & GFP_RECLAIMABLE) ? KMALLOC_RCL : 0);
    record(&k, ctx->args[1], k.size);
    return 0;
}

#ifdef FREES
RAW_TRACEPOINT_PROBE(kfree) {
    freed(ctx->args[1]);
    return 0;
}

RAW_TRACEPOINT_PROBE(kmem_cache_free) {
    freed(ctx->args[1]);
    return 0;
}
#endif
#else
TRACEPOINT_PROBE(kmem, kmem_cache_alloc) {
    if (!sampled())
        return 0;
    struct site_t k = {};
    k.site = args->call_site;
    k.stack = stack_of(args);
    TP_DATA_LOC_READ_CONST(k.name, name, CACHE_NAME);
    record(&k, (u64)args->ptr, args->bytes_alloc);
    return 0;
}

TRACEPOINT_PROBE(kmem, kmalloc) {
    if (!sampled())
        return 0;
    struct site_t k = {};
    k.site = args->call_site;
    k.stack = stack_of(args);
    k.size = args->bytes_alloc;
    unsigned long gfp = args->gfp_flags;
    k.flags = (gfp & GFP_ACCOUNT) ? KMALLOC_CG : ((gfp & GFP_RECLAIMABLE) ? KMALLOC_RCL : 0);
    record(&k, (u64)args->ptr, args->bytes_alloc);
    return 0;
}

#ifdef FREES
TRACEPOINT_PROBE(kmem, kfree) {
    freed((u64)args->ptr);
    return 0;
}

TRACEPOINT_PROBE(kmem, kmem_cache_free) {
    freed((u64)args->ptr);
    return 0;
}
#endif
#endif
