// Prototype: a cgroup iterator over the v1 memory hierarchy. Per memcg: the
// cgroup's kernfs id, the page counters memory.usage_in_bytes / memsw read
// (non-root: page_counter_read() * PAGE_SIZE), and the raw vmstats->state[]
// after css_rstat_flush() (a sleepable kfunc, hence iter.s).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

extern void css_rstat_flush(struct cgroup_subsys_state *css) __ksym __weak;

#ifndef NSTATE
#define NSTATE 40 /* memcg_vmstats.state[] length here; -DNSTATE=1 for a compact row */
#endif

struct rec {
	__u64 ino;
	__s64 usage;   /* pages */
	__s64 memsw;   /* pages */
	__s64 state[NSTATE];
};

SEC("iter.s/cgroup")
int dump_memcg(struct bpf_iter__cgroup *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct cgroup *cgrp = ctx->cgroup;
	struct cgroup_subsys_state *css;
	struct mem_cgroup *memcg;
	struct memcg_vmstats *vs;
	struct rec r = {};
	int mid = bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id);

	if (!cgrp)
		return 0;
	css = cgrp->subsys[mid & 15];
	if (!css)
		return 0;
	memcg = container_of(css, struct mem_cgroup, css);
#ifdef FLUSH
	if (css_rstat_flush)
		css_rstat_flush(css);
#endif
	r.ino = cgrp->kn->id;
	r.usage = BPF_CORE_READ(memcg, memory.usage.counter);
	r.memsw = BPF_CORE_READ(memcg, memsw.usage.counter);
	vs = BPF_CORE_READ(memcg, vmstats);
	if (vs)
		bpf_probe_read_kernel(r.state, sizeof(r.state), &vs->state);
	/* one read() only: the cgroup iterator cannot resume a walk in a
	 * second read (-EOPNOTSUPP), so all rows must fit the seq buffer */
	bpf_seq_write(seq, &r, sizeof(r));
	return 0;
}
