// leaks: outstanding user allocations by stack, aggregated in the kernel.
//
// On demand only (malloc is the hottest path there is): uprobes on libc's allocator family,
// attached per pid by memtop/probes/leaks.py. Nothing goes to user space per event; user space
// reads three maps once per tick:
//   stats   (pid, stack id) -> cumulative bytes/count allocated and freed (outstanding = alloc - free)
//   alloc_addr, alloc_info  the address table: (pid, address) -> size, birth time, stack id
//           (bounded; an allocation it cannot hold is counted)
//   stacks  user stacks (stack id -> STACK_DEPTH return addresses, 0-terminated)
//
// Cost choices (see bench/leaks_cost.py):
//  * SIZE_FROM_HEADER=1 (glibc): malloc/calloc/memalign/valloc/pvalloc get only a return probe;
//    the size is the allocator's usable size, read from the chunk header at ptr-8
//    (what malloc_usable_size() returns), so no entry program and no per-thread size slot.
//  * free/munmap get only an entry probe, placed by user space on an instruction the kernel
//    emulates (no single-step trap) when the function begins with a flags-only test.
//  * per-stack counters are updated with atomic adds on an existing entry (two threads on one
//    stack must not lose updates, bcc#4970).
//  * the user stack is walked here (KERNEL_STACKS=0, the default), not by bpf_get_stackid():
//    one bulk read from the first frame up (to the end of its page, at most WALK_BYTES), then
//    the frame-pointer chain followed inside that copy (copied again from the first frame
//    beyond it), stopping where the chain stops going up.
//    The kernel's walker (KERNEL_STACKS=1) reads each frame with two user copies (each kernel
//    `ret` is costly on a CPU with AMD SRSO "safe RET"), and stops only when a read fails: past
//    main (glibc keeps no frame pointers) or at _start's null one it takes a page fault to learn
//    the chain has ended, unless the map's depth is exactly the frames there are. Same frames,
//    same order (the frame-pointer chain from the return probe's registers); the id is a hash of
//    them, and a different stack already under that id is a collision, counted as the kernel's
//    stack map counts one. bench/leaks_stacks.py measures both walks and the kernel's variants
//    (depth, flags, buckets, at malloc's entry); bench/leaks_cost.py --stacks end to end.
// Correctness choices:
//  * failed allocations (NULL, MAP_FAILED, posix_memalign error) are not recorded (bcc#3085);
//  * an address handed out again replaces what was recorded there (the old block must have been
//    freed, maybe by a path we do not see), so nothing is counted twice;
//  * entry arguments (realloc, posix_memalign, mmap) are kept in a per-thread stack of slots
//    keyed by the stack pointer, so an allocator calling another allocator does not overwrite
//    its caller's saved arguments (per-tid depth); a missed return heals itself;
//  * mmap/munmap called from inside libc (malloc's own large chunks) are not counted: the
//    malloc/free probes already account for those blocks.
// Helpers only: no kernel struct is dereferenced.
//
// Configured with -DMAX_ALLOCS -DMAX_STACKS -DSTACK_DEPTH -DMAX_STACK_TRACES -DMAX_TIDS
// -DSIZE_FROM_HEADER -DMAX_PIDS -DKERNEL_STACKS (and the bench's -DSTACK_NONE -DSTACK_FLAGS
// -DSTACK_AT_ENTRY), and the counter slots and address-table marks memtop/probes/leaks.py reads
// by (LeaksProbe.defines: Python is their one definition, the values below are only defaults).

#include <uapi/linux/ptrace.h>
#include "common.h"

#ifndef MAX_ALLOCS
#define MAX_ALLOCS 262144
#endif
#ifndef MAX_STACKS
#define MAX_STACKS 16384
#endif
#ifndef MAX_STACK_TRACES
#define MAX_STACK_TRACES 16384
#endif
#ifndef STACK_DEPTH
#define STACK_DEPTH 32
#endif
#ifndef MAX_TIDS
#define MAX_TIDS 8192
#endif
#ifndef MAX_PIDS
#define MAX_PIDS 8
#endif
#ifndef SIZE_FROM_HEADER
#define SIZE_FROM_HEADER 1
#endif
#ifndef KERNEL_STACKS
#define KERNEL_STACKS 0
#endif
// bench/leaks_stacks.py only: STACK_NONE=1 takes no stack (what the rest of the program costs);
// STACK_FLAGS adds bpf_get_stackid() flags (BPF_F_FAST_STACK_CMP 1<<9, BPF_F_REUSE_STACKID
// 1<<10); STACK_AT_ENTRY=1 takes the stack in an entry program on malloc/calloc (enter_stack) and
// hands it to the return program through the per-thread slots
#ifndef STACK_NONE
#define STACK_NONE 0
#endif
#ifndef STACK_FLAGS
#define STACK_FLAGS 0
#endif
#ifndef STACK_AT_ENTRY
#define STACK_AT_ENTRY 0
#endif
// bytes of user stack copied at once for the walk (a power of two)
#define WALK_BYTES 2048
#define MAX_NEST 4

// counters (per-CPU array slots)
#ifndef C_ALLOCS_FULL
#define C_ALLOCS_FULL 0   // allocation not tracked: address map full
#endif
#ifndef C_STACK_ERR
#define C_STACK_ERR 1     // no stack id (collision or unreadable stack); counted under id -1
#endif
#ifndef C_STATS_FULL
#define C_STATS_FULL 2    // per-stack map full: allocation not attributed
#endif
#ifndef C_BAD_SIZE
#define C_BAD_SIZE 3      // chunk header unreadable or implausible: size recorded as 0
#endif
#ifndef C_NEST_FULL
#define C_NEST_FULL 4     // allocator nesting deeper than MAX_NEST: arguments not kept
#endif
#ifndef C_FAILED
#define C_FAILED 5        // failed allocations seen (not leaks)
#endif
#ifndef C_INTERNAL
#define C_INTERNAL 6      // mmap/munmap from inside libc, skipped
#endif
#ifndef C_CALLS
#define C_CALLS 7         // allocation calls seen (sampled or not): the target's allocation rate
#endif
#ifndef UPROBE_MULTI
// 1: memtop's compiler process also loads each program for uprobe_multi links (on a budget)
#define UPROBE_MULTI 0
#endif
#ifndef N_COUNTERS
#define N_COUNTERS 8
#endif

// one tracked block: what a slot of the address table holds beside its address
struct alloc_info_t {
    u32 pid;
    s32 stack_id;
    u64 size;
    u64 ts_ns;
};

struct stack_key_t {
    u32 pid;
    s32 stack_id;
};

struct stack_val_t {
    u64 alloc_bytes;
    u64 alloc_count;
    u64 free_bytes;
    u64 free_count;
};

struct slot_t {
    u64 sp;    // stack pointer at entry (return address slot)
    u64 arg0;
    u64 arg1;
    u64 fn;
};

struct nest_t {
    u32 depth;
    u32 pad;
    struct slot_t s[MAX_NEST];
};

struct range_t {
    u64 lo;
    u64 hi;
};

struct stack_ips_t {
    u64 ip[STACK_DEPTH];
};

// The address table: MAX_ALLOCS blocks in ALLOC_SLOTS slots (a power of two, at least four times
// as many: a quarter full, ALLOC_WINDOW slots in a row all taken is about 1e-9), open addressing
// with linear probing over at most ALLOC_WINDOW slots from the address's home slot. A hash map
// took a bucket lock, a free-list pop and a push per malloc+free (about 350 ns of the 820 the
// programs cost a pair); this is array arithmetic and two atomic instructions. Two arrays by
// column: alloc_addr (searched, and scanned by user space for the blocks: a quarter of the
// bytes) and alloc_info (pid, stack, size, birth) of the same slot:
//  * a slot's address is A_EMPTY (never used), A_FREED (a tombstone: reusable, but a search goes
//    on past it) or A_BUSY (being written), else a block's address;
//  * claimed by compare-and-swap from A_EMPTY/A_FREED to A_BUSY, filled, then published by an
//    atomic exchange to the address (pid, stack and size are in place before the address is);
//  * freed by compare-and-swap from the address to A_FREED: of two CPUs freeing one block (a
//    double free in the target) one wins, and the block is counted out once;
//  * a slot never returns to A_EMPTY, so a search may stop at the first A_EMPTY slot: every
//    block of that home slot sits before it.
// One block's address belongs to one thread from malloc's return to free's entry, so no two CPUs
// insert or remove the same (pid, address) at once.
#ifndef ALLOC_SLOTS_LOG2
#define ALLOC_SLOTS_LOG2 20
#endif
#define ALLOC_SLOTS (1U << ALLOC_SLOTS_LOG2)
#define ALLOC_WINDOW 32
#ifndef A_EMPTY
#define A_EMPTY 0
#endif
#ifndef A_FREED
#define A_FREED 1
#endif
#ifndef A_BUSY
#define A_BUSY 2
#endif
// user space maps both (BPF_F_MMAPABLE, 1 << 10) to read blocks' ages without copying them
BPF_F_TABLE("array", int, u64, alloc_addr, ALLOC_SLOTS, 1 << 10);
BPF_F_TABLE("array", int, struct alloc_info_t, alloc_info, ALLOC_SLOTS, 1 << 10);
BPF_HASH(stats, struct stack_key_t, struct stack_val_t, MAX_STACKS);
#if KERNEL_STACKS
BPF_TABLE("stacktrace", int, struct stack_ips_t, stacks, MAX_STACK_TRACES);
#else
BPF_HASH(stacks, int, struct stack_ips_t, MAX_STACK_TRACES);
struct walk_t {
    u64 w[WALK_BYTES / 8];
    u64 base;  // the user address w[0] was copied from
    u64 len;   // the bytes copied (0: none)
};
// per-CPU scratch: the copied stack top and the stack being built (too big for the BPF stack)
BPF_PERCPU_ARRAY(walk_buf, struct walk_t, 1);
BPF_PERCPU_ARRAY(ips_buf, struct stack_ips_t, 1);
#endif
BPF_TABLE("lru_hash", u32, struct nest_t, nest, MAX_TIDS);
// libc's executable mapping per traced pid (filled by user space): mmap/munmap callers inside it
// are malloc's own
BPF_HASH(libc_text, u32, struct range_t, MAX_PIDS);
BPF_PERCPU_ARRAY(counters, u64, N_COUNTERS);

// TRAP_FLOOR=1 (bench/leaks_cost.py only): every program returns at once, so what remains is the
// cost of the traps themselves on the same probe points
#ifndef TRAP_FLOOR
#define TRAP_FLOOR 0
#endif
#define FLOOR_RETURN \
    if (TRAP_FLOOR)  \
        return 0

#ifndef SAMPLE_BYTES
#define SAMPLE_BYTES 0
#endif
#if SAMPLE_BYTES
// Byte sampling (tcmalloc's and jemalloc's scheme): each thread counts down an exponentially
// distributed number of bytes (mean SAMPLE_BYTES); the allocation that crosses zero is sampled, so
// one of size s is sampled with probability 1 - exp(-s/T) and stands for s / that probability
// bytes (an unbiased estimate). Unsampled allocations take no stack and no map entry.
BPF_TABLE("lru_hash", u32, s64, sample_left, MAX_TIDS);
// filled by user space: -ln(u) * 1024 for u = (k + 0.5) / 256; g(x) * 1024 for g(x) = x / (1 -
// e^-x), x = i / 8
BPF_ARRAY(exp_tab, u32, 256);
BPF_ARRAY(weight_tab, u32, 66);
#endif

#define FN_REALLOC 1
#define FN_MEMALIGN 2
#define FN_MMAP 3
#define FN_SIZED 4
#define FN_STACK 5

static __always_inline void leaks_count(int which) {
    memtop_bump(counters.lookup(&which));
}

static __always_inline void stat_sub(u32 pid, s64 stack_id, u64 size) {
    struct stack_key_t k = {.pid = pid, .stack_id = (s32)stack_id};
    struct stack_val_t *v = stats.lookup(&k);
    if (!v)
        return;
    __sync_fetch_and_add(&v->free_bytes, size);
    __sync_fetch_and_add(&v->free_count, 1);
}

static __always_inline void stat_add(u32 pid, s64 stack_id, u64 size) {
    struct stack_key_t k = {.pid = pid, .stack_id = (s32)stack_id};
    struct stack_val_t *v = stats.lookup(&k);
    if (!v) {
        struct stack_val_t zero = {};
        stats.insert(&k, &zero);  // BPF_NOEXIST: a racing insert by another CPU wins, fine
        v = stats.lookup(&k);
        if (!v) {
            leaks_count(C_STATS_FULL);
            return;
        }
    }
    __sync_fetch_and_add(&v->alloc_bytes, size);
    __sync_fetch_and_add(&v->alloc_count, 1);
}

// Fibonacci hashing: the product's top bits (its middle bits put blocks spaced evenly, as an
// allocator hands them out, into clusters that filled whole windows)
static __always_inline u32 a_home(u32 pid, u64 addr) {
    return (u32)(((addr ^ ((u64)pid << 40)) * 0x9E3779B97F4A7C15ULL) >> (64 - ALLOC_SLOTS_LOG2));
}

// slot j of the window from home slot h: its index in *i, its address word (NULL: none)
static __always_inline u64 *a_slot(u32 h, int j, u32 *i) {
    *i = (h + j) & (ALLOC_SLOTS - 1);
    return alloc_addr.lookup(i);
}

// the slot holding (pid, addr), or -1
static __always_inline int a_find(u32 pid, u64 addr) {
    u32 h = a_home(pid, addr);
    for (int j = 0; j < ALLOC_WINDOW; j++) {
        u32 i;
        u64 *a = a_slot(h, j, &i);
        if (!a)
            return -1;
        u64 v = *(volatile u64 *)a;
        if (v == addr) {
            struct alloc_info_t *e = alloc_info.lookup(&i);
            if (e && e->pid == pid)
                return (int)i;
        }
        if (v == A_EMPTY)
            return -1;
    }
    return -1;
}

// takes the block out of slot i; its size and stack in *size, *sid. 0 when this call took it
static __always_inline int a_take(int slot, u64 addr, u64 *size, s32 *sid) {
    u32 i = (u32)slot;
    u64 *a = alloc_addr.lookup(&i);
    struct alloc_info_t *e = alloc_info.lookup(&i);
    if (!a || !e)
        return -1;
    *size = e->size;
    *sid = e->stack_id;
    return __sync_val_compare_and_swap(a, addr, A_FREED) == addr ? 0 : -1;
}

// a new block into the first slot of its window that can be claimed: 0 recorded, -1 none
// (counted as the table being full). Every slot before it is taken, so a search from the home
// slot reaches it.
static __always_inline int a_claim(u32 h, u32 pid, u64 addr, u64 size, u64 ts, s32 sid) {
    for (int j = 0; j < ALLOC_WINDOW; j++) {
        u32 i;
        u64 *a = a_slot(h, j, &i);
        if (!a)
            return -1;
        u64 v = *(volatile u64 *)a;
        if (v != A_EMPTY && v != A_FREED)
            continue;
        if (__sync_val_compare_and_swap(a, v, A_BUSY) != v)
            continue;  // another CPU took it first
        struct alloc_info_t *e = alloc_info.lookup(&i);
        if (e) {
            e->pid = pid;
            e->stack_id = sid;
            e->size = size;
            e->ts_ns = ts;
        }
        __sync_lock_test_and_set(a, addr);  // published with all of it in place
        return 0;
    }
    return -1;
}

static __always_inline void on_free(u32 pid, u64 addr) {
    if (addr == 0)
        return;
    int slot = a_find(pid, addr);
    if (slot < 0)
        return;  // not ours (allocated before we attached, or not tracked)
    u64 size;
    s32 sid;
    if (a_take(slot, addr, &size, &sid) != 0)
        return;  // another CPU freed it first (double free in the target): count once
    stat_sub(pid, sid, size);
}

#if SAMPLE_BYTES
static __always_inline s64 next_interval(void) {
    u32 k = bpf_get_prandom_u32() & 255;
    u32 *e = exp_tab.lookup(&k);
    return e ? (s64)(((u64)SAMPLE_BYTES * *e) >> 10) + 1 : SAMPLE_BYTES;
}

// the bytes a sampled allocation of ``size`` stands for: T * g(size / T), interpolated
static __always_inline u64 sample_weight(u64 size) {
    u64 x1024 = (size << 13) / SAMPLE_BYTES;  // x in 1/1024ths of an eighth
    u64 i = x1024 >> 10;
    if (i >= 64)
        return size;  // g(x) = x within e^-8
    u32 lo_i = (u32)i, hi_i = (u32)i + 1;
    u32 *lo = weight_tab.lookup(&lo_i);
    u32 *hi = weight_tab.lookup(&hi_i);
    if (!lo || !hi)
        return size;
    u64 frac = x1024 & 1023;
    u64 g = ((u64)*lo * (1024 - frac) + (u64)*hi * frac) >> 10;
    return ((u64)SAMPLE_BYTES * g) >> 10;
}

// true when this allocation is sampled (then ``*size`` becomes the bytes it stands for)
static __always_inline int sampled(u64 *size) {
    u32 tid = (u32)bpf_get_current_pid_tgid();
    s64 *left = sample_left.lookup(&tid);
    if (!left) {
        s64 first = next_interval();
        sample_left.update(&tid, &first);
        left = sample_left.lookup(&tid);
        if (!left)
            return 0;
    }
    if ((s64)*size < *left) {
        *left -= (s64)*size;
        return 0;
    }
    *left = next_interval();
    *size = sample_weight(*size);
    return 1;
}
#endif

#if !KERNEL_STACKS
// copies the user stack from ``from`` up to the end of its page (at least a frame's 16 bytes, at
// most WALK_BYTES) into b; b->len: the bytes copied, 0 when the copy failed
static __always_inline void copy_stack(struct walk_t *b, u64 from) {
    u64 len = 4096 - (from & 4095);
    if (len < 16)
        len = 16;  // a frame across a page's end: the next page holds its return address
    if (len > WALK_BYTES)
        len = WALK_BYTES;
    b->base = from;
    // kept in the map value, not in a register: the verifier then need not tell one copy's
    // length from another's, and checks the walk's loop in a few states instead of hundreds
    b->len = bpf_probe_read_user(b->w, len, (void *)from) == 0 ? len : 0;
}

// The user stack's id (>= 0) as bpf_get_stackid(ctx, BPF_F_USER_STACK) would walk it: the
// interrupted ip, then the return address of each frame of the frame-pointer chain from rbp,
// until a frame cannot be read, a null return address, a frame pointer that does not go up the
// stack, or STACK_DEPTH entries. -1: no stack (map
// full); -EEXIST: another stack holds its id.
static __always_inline int user_stack_id(struct pt_regs *ctx) {
    u32 zero = 0;
    struct walk_t *b = walk_buf.lookup(&zero);
    struct stack_ips_t *ips = ips_buf.lookup(&zero);
    if (!b || !ips)
        return -1;
    u64 sp = PT_REGS_SP(ctx);
    u64 fp = PT_REGS_FP(ctx);
    // the caller's frame is above its stack pointer: an rbp below it is no frame pointer (code
    // built without them uses rbp for anything), and reading it would record a frame that is not
    // one, or cost a page fault (~0.6 us) where it is a small number; the loop stops on fp == 0
    if (fp < sp)
        fp = 0;
    // nothing copied yet: the walk copies from its first frame on (the stack below it is never
    // read). Copies stop at the end of the page they start in: the page holding a frame is
    // mapped, the next one may not be (past the top of the main thread's stack a copy fails,
    // after a page fault: a process whose first frames sat within WALK_BYTES of the top paid
    // ~1.5 us a call, bench/leaks_cost.py); no frame pointer, nothing to copy
    b->len = 0;
    u64 ip = PT_REGS_IP(ctx);
    ips->ip[0] = ip;
    u64 h = ip * 0x9E3779B97F4A7C15ULL;
    int n = 1;
    for (int i = 1; i < STACK_DEPTH; i++) {
        u64 next, ret;
        if (fp == 0)
            break;
        u64 base = b->base;
        if (fp < base || ((fp - base) & 7) != 0 || fp - base + 16 > b->len) {
            // the chain left the copy: copy again from this frame on
            copy_stack(b, fp);
            base = fp;
        }
        if (b->len == 0)
            break;  // not a frame: its page is not there
        u32 k = (u32)((fp - base) >> 3) & (WALK_BYTES / 8 - 1);
        next = b->w[k];
        ret = b->w[(k + 1) & (WALK_BYTES / 8 - 1)];
        if (ret == 0)
            break;
        ips->ip[i] = ret;
        n = i + 1;
        h = (h ^ ret) * 0x100000001B3ULL;
        // a caller's frame is above its callee's: a frame pointer at or below this one is not a
        // frame (code built without frame pointers left it in rbp), and following it, the
        // kernel's walker takes a page fault (~0.6 us here) to learn so
        if (next <= fp)
            break;
        fp = next;
    }
    for (int i = 1; i < STACK_DEPTH; i++) {
        if (i >= n)
            ips->ip[i] = 0;
    }
    int id = (int)((h ^ (h >> 31)) & 0x7fffffff);
    // looked up first: on a stack seen before (nearly every call) a failed insert would take the
    // bucket's lock for nothing
    struct stack_ips_t *have = stacks.lookup(&id);
    if (!have) {
        if (stacks.insert(&id, ips) == 0)
            return id;
        have = stacks.lookup(&id);  // another CPU inserted it first
        if (!have)
            return -1;  // map full
    }
    for (int i = 0; i < STACK_DEPTH; i++) {
        if (have->ip[i] != ips->ip[i])
            return -17;  // -EEXIST, as a stack map's bucket collision
    }
    return id;
}
#endif

static __always_inline int take_stack(struct pt_regs *ctx) {
#if STACK_NONE
    return 0;
#elif KERNEL_STACKS
    return stacks.get_stackid(ctx, BPF_F_USER_STACK | STACK_FLAGS);
#else
    return user_stack_id(ctx);
#endif
}

#define TAKE_HERE (-2)

// ctx is the return probe's: ip is the caller's return address, so the stack starts at the caller
// (sid: TAKE_HERE, or the stack an entry program took)
static __always_inline void on_alloc_sid(struct pt_regs *ctx, u32 pid, u64 addr, u64 size, int sid) {
    leaks_count(C_CALLS);
    // a block still recorded at this address was freed behind our back (by a path we do not
    // see): counted out first, so nothing is counted twice and nothing stale stays (with
    // sampling, an unsampled block may take its place)
    int prev = a_find(pid, addr);
    if (prev >= 0) {
        u64 old_size;
        s32 old_sid;
        if (a_take(prev, addr, &old_size, &old_sid) == 0)
            stat_sub(pid, old_sid, old_size);
    }
#if SAMPLE_BYTES
    if (!sampled(&size))
        return;
#endif
    u64 ts = bpf_ktime_get_ns();
    if (sid == TAKE_HERE)
        sid = take_stack(ctx);
    if (sid < 0) {
        leaks_count(C_STACK_ERR);
        sid = -1;
    }
    if (a_claim(a_home(pid, addr), pid, addr, size, ts, sid) != 0) {
        leaks_count(C_ALLOCS_FULL);
        return;
    }
    stat_add(pid, sid, size);
}

static __always_inline void on_alloc(struct pt_regs *ctx, u32 pid, u64 addr, u64 size) {
    on_alloc_sid(ctx, pid, addr, size, TAKE_HERE);
}

static __always_inline u64 usable_size(u64 ptr) {
    // glibc chunk header: size | IS_MMAPPED(2) | PREV_INUSE(1) | NON_MAIN_ARENA(4) at ptr-8;
    // malloc_usable_size() is chunksize - 8, or - 16 for mmapped chunks
    u64 hdr = 0;
    if (bpf_probe_read_user(&hdr, sizeof(hdr), (void *)(ptr - 8)) != 0) {
        leaks_count(C_BAD_SIZE);
        return 0;
    }
    u64 sz = hdr & ~7ULL;
    u64 overhead = (hdr & 2) ? 16 : 8;
    if (sz <= overhead || sz > (1ULL << 44)) {
        leaks_count(C_BAD_SIZE);
        return 0;
    }
    return sz - overhead;
}

static __always_inline int in_libc(u32 pid, u64 ip) {
    struct range_t *r = libc_text.lookup(&pid);
    return r && ip >= r->lo && ip < r->hi;
}

// ---- per-thread argument slots ----------------------------------------------------------------

static __always_inline void push_slot(struct pt_regs *ctx, u64 fn, u64 a0, u64 a1) {
    u32 tid = (u32)bpf_get_current_pid_tgid();
    u64 sp = PT_REGS_SP(ctx);
    struct nest_t *n = nest.lookup(&tid);
    if (!n) {
        struct nest_t zero = {};
        nest.update(&tid, &zero);
        n = nest.lookup(&tid);
        if (!n)
            return;
    }
    u32 d = n->depth;
    // slots at or below this stack pointer belong to calls that returned unseen: drop them
#pragma unroll
    for (int i = MAX_NEST - 1; i >= 0; i--) {
        if (i < d && n->s[i].sp <= sp)
            d = i;
    }
    if (d >= MAX_NEST) {
        n->depth = d;
        leaks_count(C_NEST_FULL);
        return;
    }
    // constant indices only: the verifier cannot bound a variable one into the slot array
#pragma unroll
    for (int i = 0; i < MAX_NEST; i++) {
        if (i == d) {
            n->s[i].sp = sp;
            n->s[i].fn = fn;
            n->s[i].arg0 = a0;
            n->s[i].arg1 = a1;
        }
    }
    n->depth = d + 1;
}

// finds this call's slot (entry sp == sp after return - 8), pops it and everything above it
static __always_inline int pop_slot(struct pt_regs *ctx, u64 fn, struct slot_t *out) {
    u32 tid = (u32)bpf_get_current_pid_tgid();
    struct nest_t *n = nest.lookup(&tid);
    if (!n)
        return -1;
    u64 sp = PT_REGS_SP(ctx) - 8;
    u32 d = n->depth;
    int found = -1;
#pragma unroll
    for (int i = 0; i < MAX_NEST; i++) {
        if (i < d && n->s[i].sp == sp && n->s[i].fn == fn) {
            found = i;
            out->arg0 = n->s[i].arg0;
            out->arg1 = n->s[i].arg1;
        }
    }
    if (found < 0)
        return -1;  // return without a seen entry (attached mid-call)
    n->depth = found;
    return 0;
}

// ---- programs ---------------------------------------------------------------------------------

// malloc, calloc, memalign/aligned_alloc, valloc, pvalloc: return probe only (SIZE_FROM_HEADER)
int ret_hdr(struct pt_regs *ctx) {
    FLOOR_RETURN;
    int sid = TAKE_HERE;
#if STACK_AT_ENTRY
    struct slot_t s = {};
    sid = pop_slot(ctx, FN_STACK, &s) == 0 ? (int)s.arg0 : -1;
#endif
    u64 addr = PT_REGS_RC(ctx);
    if (addr == 0) {
        leaks_count(C_FAILED);
        return 0;
    }
    on_alloc_sid(ctx, bpf_get_current_pid_tgid() >> 32, addr, usable_size(addr), sid);
    return 0;
}

#if STACK_AT_ENTRY
int enter_stack(struct pt_regs *ctx) {
    FLOOR_RETURN;
    push_slot(ctx, FN_STACK, (u64)(s64)take_stack(ctx), 0);
    return 0;
}
#endif

// exact requested sizes (non-glibc libc, or SIZE_FROM_HEADER=0): entry keeps the size
int enter_size1(struct pt_regs *ctx) {
    FLOOR_RETURN;
    push_slot(ctx, FN_SIZED, PT_REGS_PARM1(ctx), 0);
    return 0;
}

int enter_calloc(struct pt_regs *ctx) {
    FLOOR_RETURN;
    push_slot(ctx, FN_SIZED, PT_REGS_PARM1(ctx) * PT_REGS_PARM2(ctx), 0);
    return 0;
}

int enter_size2(struct pt_regs *ctx) {
    FLOOR_RETURN;
    push_slot(ctx, FN_SIZED, PT_REGS_PARM2(ctx), 0);
    return 0;
}

int ret_sized(struct pt_regs *ctx) {
    FLOOR_RETURN;
    struct slot_t s = {};
    if (pop_slot(ctx, FN_SIZED, &s) != 0)
        return 0;
    u64 addr = PT_REGS_RC(ctx);
    if (addr == 0) {
        leaks_count(C_FAILED);
        return 0;
    }
    on_alloc(ctx, bpf_get_current_pid_tgid() >> 32, addr, s.arg0);
    return 0;
}

int enter_free(struct pt_regs *ctx) {
    FLOOR_RETURN;
    on_free(bpf_get_current_pid_tgid() >> 32, PT_REGS_PARM1(ctx));
    return 0;
}

int enter_realloc(struct pt_regs *ctx) {
    FLOOR_RETURN;
    push_slot(ctx, FN_REALLOC, PT_REGS_PARM1(ctx), PT_REGS_PARM2(ctx));
    return 0;
}

// realloc's return: the new block sized from glibc's chunk header (SIZE_FROM_HEADER) or as asked;
// ``exact`` asks in either mode (ret_realloc_exact: a pid whose allocator is not glibc, traced by a
// program in chunk-header mode after its exec)
static __always_inline int realloc_returned(struct pt_regs *ctx, int exact) {
    struct slot_t s = {};
    if (pop_slot(ctx, FN_REALLOC, &s) != 0)
        return 0;
    u32 pid = bpf_get_current_pid_tgid() >> 32;
    u64 addr = PT_REGS_RC(ctx);
    if (addr == 0) {
        if (s.arg1 == 0)
            on_free(pid, s.arg0);  // realloc(p, 0) frees p
        else
            leaks_count(C_FAILED);       // failed: the old block is still live
        return 0;
    }
    on_free(pid, s.arg0);
    on_alloc(ctx, pid, addr, SIZE_FROM_HEADER && !exact ? usable_size(addr) : s.arg1);
    return 0;
}

int ret_realloc(struct pt_regs *ctx) {
    FLOOR_RETURN;
    return realloc_returned(ctx, 0);
}

int ret_realloc_exact(struct pt_regs *ctx) {
    FLOOR_RETURN;
    return realloc_returned(ctx, 1);
}

int enter_posix_memalign(struct pt_regs *ctx) {
    FLOOR_RETURN;
    push_slot(ctx, FN_MEMALIGN, PT_REGS_PARM1(ctx), PT_REGS_PARM3(ctx));
    return 0;
}

static __always_inline int memalign_returned(struct pt_regs *ctx, int exact) {
    struct slot_t s = {};
    if (pop_slot(ctx, FN_MEMALIGN, &s) != 0)
        return 0;
    if (PT_REGS_RC(ctx) != 0) {
        leaks_count(C_FAILED);
        return 0;
    }
    u64 addr = 0;
    if (bpf_probe_read_user(&addr, sizeof(addr), (void *)s.arg0) != 0 || addr == 0)
        return 0;
    on_alloc(ctx, bpf_get_current_pid_tgid() >> 32, addr,
             SIZE_FROM_HEADER && !exact ? usable_size(addr) : s.arg1);
    return 0;
}

int ret_posix_memalign(struct pt_regs *ctx) {
    FLOOR_RETURN;
    return memalign_returned(ctx, 0);
}

int ret_posix_memalign_exact(struct pt_regs *ctx) {
    FLOOR_RETURN;
    return memalign_returned(ctx, 1);
}

int enter_mmap(struct pt_regs *ctx) {
    FLOOR_RETURN;
    push_slot(ctx, FN_MMAP, PT_REGS_PARM2(ctx), 0);
    return 0;
}

int ret_mmap(struct pt_regs *ctx) {
    FLOOR_RETURN;
    struct slot_t s = {};
    if (pop_slot(ctx, FN_MMAP, &s) != 0)
        return 0;
    u32 pid = bpf_get_current_pid_tgid() >> 32;
    u64 addr = PT_REGS_RC(ctx);
    if (addr == (u64)-1 || addr == 0) {
        leaks_count(C_FAILED);
        return 0;
    }
    if (in_libc(pid, PT_REGS_IP(ctx))) {
        leaks_count(C_INTERNAL);
        return 0;
    }
    on_alloc(ctx, pid, addr, s.arg0);
    return 0;
}

int enter_munmap(struct pt_regs *ctx) {
    FLOOR_RETURN;
    u32 pid = bpf_get_current_pid_tgid() >> 32;
    u64 ret = 0;
    bpf_probe_read_user(&ret, sizeof(ret), (void *)PT_REGS_SP(ctx));
    if (in_libc(pid, ret)) {
        leaks_count(C_INTERNAL);
        return 0;
    }
    on_free(pid, PT_REGS_PARM1(ctx));
    return 0;
}
