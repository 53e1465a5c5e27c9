// pagealloc: page allocations by order from kmem:mm_page_alloc, counted exactly in a per-CPU array
// (one increment per allocation; no map grows). Read once per tick.

#define MAX_ORDER_SLOTS 16

BPF_PERCPU_ARRAY(page_orders, u64, MAX_ORDER_SLOTS);

TRACEPOINT_PROBE(kmem, mm_page_alloc) {
    int order = args->order;
    if (order < 0 || order >= MAX_ORDER_SLOTS)
        order = MAX_ORDER_SLOTS - 1;
    u64 *c = page_orders.lookup(&order);
    if (c)
        *c += 1;
    return 0;
}
