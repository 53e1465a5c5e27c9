// pipe_churn: pipe() then close() both ends, ROUNDS times: slab-heavy (two files, a dentry, an
// inode, pipe_inode_info and its buffer array allocated and freed per round), no faults. Shows
// what programs on the kmem allocation and free tracepoints cost. Prints ns per round, wall clock
// and CPU time (the process's own: what a tracer's hooks add to it, without the time other load
// on a shared machine preempted it).
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 200000;
    int p[2];
    struct timespec a, b, ca, cb;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ca);
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < rounds; i++) {
        if (pipe(p))
            return 1;
        close(p[0]);
        close(p[1]);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cb);
    double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    double cpu = (cb.tv_sec - ca.tv_sec) * 1e9 + (cb.tv_nsec - ca.tv_nsec);
    printf("ns_per_op=%.1f cpu_ns_per_op=%.1f\n", ns / rounds, cpu / rounds);
    return 0;
}
