// Prototype: one bpf_iter/task read dumps every thread's fault counters and,
// for thread-group leaders, the mm's RSS counters (as /proc/PID/status reads
// them), the signal struct's fault totals of dead threads, comm and the id of
// the task's memory-controller cgroup. CO-RE against the running kernel's BTF.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#define MAX_CPUS 64

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} pcpu SEC(".maps");

/* each cpu's per-cpu offset, learned at the first task of a read */
__u64 offs[MAX_CPUS];
int ncpu;

#ifdef LEADERS_ONLY
extern int bpf_iter_task_new(struct bpf_iter_task *it, struct task_struct *task,
			     unsigned int flags) __weak __ksym;
extern struct task_struct *bpf_iter_task_next(struct bpf_iter_task *it) __weak __ksym;
extern void bpf_iter_task_destroy(struct bpf_iter_task *it) __weak __ksym;
#endif

char LICENSE[] SEC("license") = "GPL";

struct rec {
	__u32 tgid;
	__u32 pid;
	__u64 min_flt;
	__u64 maj_flt;
	__s64 rss[4];      /* MM_FILEPAGES, MM_ANONPAGES, MM_SWAPENTS, MM_SHMEMPAGES: pages */
	__u64 sig_min_flt; /* leader only: faults of exited threads */
	__u64 sig_maj_flt;
	__u64 memcg_ino;   /* kernfs id of the task's memory cgroup dir (= its st_ino) */
	char comm[16];
};

SEC("iter/task")
int dump_task(struct bpf_iter__task *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct *t = ctx->task;
	struct rec r = {};
	struct mm_struct *mm;
	int i;

	__u64 pptr = 0;
	__u32 zero = 0;

	if (!t)
		return 0;
	if (ctx->meta->seq_num == 0) {
	ncpu = 0;
	{
		/* the map's address as a plain number (spilled and read
		 * back), then its first percpu pointer after struct bpf_array */
		void *volatile mp = &pcpu;
		__u64 addr = 0;

		bpf_probe_read_kernel(&addr, sizeof(addr), (void *)&mp);
		bpf_probe_read_kernel(&pptr, sizeof(pptr),
				      (void *)(addr + bpf_core_type_size(struct bpf_array)));
	}
	for (i = 0; i < MAX_CPUS; i++) {
		void *inst = bpf_map_lookup_percpu_elem(&pcpu, &zero, i);
		if (!inst)
			break;
		void *volatile ip = inst;
		__u64 ia = 0;

		bpf_probe_read_kernel(&ia, sizeof(ia), (void *)&ip);
		offs[i] = ia - pptr;
		ncpu++;
	}
	}
#ifdef LEADERS_ONLY
	/* one row per process: its threads' faults summed here */
	if (t->pid != t->tgid)
		return 0;
	{
		struct bpf_iter_task it;
		struct task_struct *th;
		__u64 mn = 0, mj = 0;

		bpf_iter_task_new(&it, t, BPF_TASK_ITER_PROC_THREADS);
		while ((th = bpf_iter_task_next(&it))) {
			if (th == t)
				continue;
			mn += th->min_flt;
			mj += th->maj_flt;
		}
		bpf_iter_task_destroy(&it);
		r.sig_min_flt = mn; /* folded into sig_* below */
		r.sig_maj_flt = mj;
	}
#endif
	r.tgid = t->tgid;
	r.pid = t->pid;
	r.min_flt = t->min_flt;
	r.maj_flt = t->maj_flt;
	if (r.pid == r.tgid) {
		mm = t->mm;
		if (mm) {
			/* /proc/PID/status sums the per-cpu deltas too
			 * (get_mm_counter_sum(), percpu_counter_sum_positive) */
			for (i = 0; i < 4; i++) {
				struct percpu_counter *c = &mm->rss_stat[i];
				__s64 v = c->count;
				int cpu;

				/* this BTF has no __percpu type tags (so no
				 * bpf_per_cpu_ptr on c->counters) and kallsyms
				 * has no data symbols (so no typed __ksym of
				 * this_cpu_off): each cpu's per-cpu offset is
				 * learned from a per-cpu array of our own, its
				 * percpu pointer vs bpf_map_lookup_percpu_elem's
				 * instance address; then bpf_probe_read_kernel */
				__u64 base = (__u64)BPF_CORE_READ(c, counters);

#ifndef NO_PCPU_SUM
				for (cpu = 0; cpu < MAX_CPUS && cpu < ncpu; cpu++) {
					__s32 d = 0;

					bpf_probe_read_kernel(&d, sizeof(d), (void *)(base + offs[cpu]));
					v += d;
				}
#endif
				r.rss[i] = v < 0 ? 0 : v;
			}
		}
		r.sig_min_flt += BPF_CORE_READ(t, signal, min_flt);
		r.sig_maj_flt += BPF_CORE_READ(t, signal, maj_flt);
		__builtin_memcpy(r.comm, t->comm, sizeof(r.comm));
		int mid = bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id);
		r.memcg_ino = BPF_CORE_READ(t, cgroups, subsys[mid], cgroup, kn, id);
	}
	bpf_seq_write(seq, &r, sizeof(r));
	return 0;
}
