// Helpers every memtop BPF program shares, written once (`#include "common.h"`).
//
// memtop/probes/unit.py pastes this file in place from memtop's own bpf/ directory; when several
// programs compile as one unit, the include guard keeps one copy of each helper, so the helpers
// take values and pointers, never a macro of the program that includes them (another section's
// -D flags are undefined by the time a later section's code is compiled). A map is passed as the
// pointer its lookup returned: BCC rewrites `map.lookup(&key)` only where the program names the
// map itself.
#ifndef MEMTOP_COMMON_H
#define MEMTOP_COMMON_H

// Index of the highest set bit of v (0 for 0 and 1): the log2 bucket of a latency or a size; bucket
// i holds [2**i, 2**(i+1) - 1] (memtop.state.base.log2_le). Branches, not a loop: the verifier
// checks it in one pass.
static __always_inline u32 memtop_log2(u64 v) {
    u32 r = 0;
    if (v >> 32) {
        v >>= 32;
        r += 32;
    }
    if (v >> 16) {
        v >>= 16;
        r += 16;
    }
    if (v >> 8) {
        v >>= 8;
        r += 8;
    }
    if (v >> 4) {
        v >>= 4;
        r += 4;
    }
    if (v >> 2) {
        v >>= 2;
        r += 2;
    }
    if (v >> 1)
        r += 1;
    return r;
}

// Adds n to a counter slot of a per-CPU array (what its lookup returned; NULL: nothing to do).
// Per-CPU data needs no atomic add: only this CPU writes it, and user space sums the CPUs.
static __always_inline void memtop_add(u64 *slot, u64 n) {
    if (slot)
        *slot += n;
}

// One more in a per-CPU counter slot: an event counted, or one lost (a full map, a ring buffer
// with no room), which every probe reports as a `Lost` record.
static __always_inline void memtop_bump(u64 *slot) {
    memtop_add(slot, 1);
}

// A program's generation: one more in its per-CPU slot, taken AFTER every update of the maps its
// probe reads (and before a ring-buffer submit), so that a poll that reads the slot first and
// finds the sum where it was at the last poll knows those maps are as it last read them
// (memtop.probes.base.Generation has the argument). Atomic although the slot is this CPU's: a
// program preempted on this CPU between the load and the store of a plain add could write back a
// value a poll already saw, and its update would not show until the next bump.
static __always_inline void memtop_generation(u64 *slot) {
    if (slot)
        __sync_fetch_and_add(slot, 1);
}

#endif
