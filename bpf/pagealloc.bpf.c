// pagealloc: page allocations by order from kmem:mm_page_alloc, counted exactly in a per-CPU array
// (one increment per allocation; no map grows). Read once per tick. Configured with
// -DMAX_ORDER_SLOTS=<n> (PageAllocProbe.defines: the value below is only a default); orders at or
// above its last slot are counted there.

#include "common.h"

#ifndef MAX_ORDER_SLOTS
#define MAX_ORDER_SLOTS 16
#endif

BPF_PERCPU_ARRAY(page_orders, u64, MAX_ORDER_SLOTS);

TRACEPOINT_PROBE(kmem, mm_page_alloc) {
    int order = args->order;
    if (order < 0 || order >= MAX_ORDER_SLOTS)
        order = MAX_ORDER_SLOTS - 1;
    memtop_bump(page_orders.lookup(&order));
    return 0;
}
