// pagecache: pages added to and deleted from the page cache, per file (device + inode) and per
// process, from filemap:mm_filemap_add_to_page_cache and mm_filemap_delete_from_page_cache (one
// event per folio; `order` gives its size in pages). Counted in kernel maps that user space reads
// once per tick: nothing goes through a ring buffer. Both maps are LRU hashes: a file or process
// pushed out takes its counts with it (the totals array keeps every page, and the records say
// how many the maps keep). The process is the task current at the tracepoint: the reader for
// additions; for deletions often kswapd, or whoever's allocation reclaimed, or who truncated.
//
// Configured with -DPC_MAX_FILES, -DPC_MAX_PIDS and the totals' slots (PagecacheProbe.defines in
// memtop/probes/pagecache.py is their one definition; the values below are only defaults).

#include "common.h"

#ifndef PC_MAX_FILES
#define PC_MAX_FILES 16384
#endif
#ifndef PC_MAX_PIDS
#define PC_MAX_PIDS 4096
#endif
#ifndef PC_ADDED
#define PC_ADDED 0
#endif
#ifndef PC_DELETED
#define PC_DELETED 1
#endif

struct pc_file_key_t {
    u64 ino;
    u32 dev;    // the kernel's dev_t (major << 20 | minor), as the tracepoint gives it
    u32 pad;
};

struct pc_counts_t {
    u64 added;    // pages
    u64 deleted;  // pages
};

struct pc_pid_counts_t {
    u64 added;
    u64 deleted;
    char comm[16];
};

BPF_TABLE("lru_hash", struct pc_file_key_t, struct pc_counts_t, pc_files, PC_MAX_FILES);
BPF_TABLE("lru_hash", u32, struct pc_pid_counts_t, pc_pids, PC_MAX_PIDS);
BPF_PERCPU_ARRAY(pc_totals, u64, 2);

static __always_inline void pc_count(u64 ino, u32 dev, u32 order, int deleted) {
    u64 pages = 1ULL << (order & 31);
    u32 slot = deleted ? PC_DELETED : PC_ADDED;
    memtop_add(pc_totals.lookup(&slot), pages);

    struct pc_file_key_t fk = {.ino = ino, .dev = dev};
    struct pc_counts_t *fc = pc_files.lookup(&fk);
    if (!fc) {
        struct pc_counts_t zero = {};
        pc_files.update(&fk, &zero);
        fc = pc_files.lookup(&fk);
    }
    if (fc) {
        if (deleted)
            __sync_fetch_and_add(&fc->deleted, pages);
        else
            __sync_fetch_and_add(&fc->added, pages);
    }

    u32 pid = bpf_get_current_pid_tgid() >> 32;
    struct pc_pid_counts_t *pc = pc_pids.lookup(&pid);
    if (!pc) {
        struct pc_pid_counts_t zero = {};
        bpf_get_current_comm(&zero.comm, sizeof(zero.comm));
        pc_pids.update(&pid, &zero);
        pc = pc_pids.lookup(&pid);
    }
    if (pc) {
        if (deleted)
            __sync_fetch_and_add(&pc->deleted, pages);
        else
            __sync_fetch_and_add(&pc->added, pages);
    }
}

TRACEPOINT_PROBE(filemap, mm_filemap_add_to_page_cache) {
    pc_count(args->i_ino, args->s_dev, args->order, 0);
    return 0;
}

TRACEPOINT_PROBE(filemap, mm_filemap_delete_from_page_cache) {
    pc_count(args->i_ino, args->s_dev, args->order, 1);
    return 0;
}
