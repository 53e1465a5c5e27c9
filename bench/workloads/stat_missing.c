// stat_missing: stat() of names that do not exist, ROUNDS times over 1000 names in a directory
// (argv[2]): each lookup copies the name into a names_cache object (kmem_cache_alloc + free) and
// finds the negative dentry left by the first round. Prints ns per stat, wall clock and
// CPU time (the process's own: what a tracer's hooks add to it, without the time other load on
// a shared machine preempted it).
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 1000000;
    const char *dir = argc > 2 ? argv[2] : "/tmp";
    char path[4096];
    struct stat st;
    struct timespec a, b, ca, cb;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ca);
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < rounds; i++) {
        snprintf(path, sizeof path, "%s/memtop-missing-%ld", dir, i % 1000);
        stat(path, &st);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cb);
    double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    double cpu = (cb.tv_sec - ca.tv_sec) * 1e9 + (cb.tv_nsec - ca.tv_nsec);
    printf("ns_per_op=%.1f cpu_ns_per_op=%.1f\n", ns / rounds, cpu / rounds);
    return 0;
}
