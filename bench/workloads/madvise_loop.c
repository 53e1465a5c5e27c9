// madvise_loop: N madvise calls on one page with ADVICE, timed: what a madvise-heavy program pays
// for memtop's in-kernel filter on syscalls:sys_enter_madvise (bench/shared_cost.py).
// ADVICE -1: getppid instead, the cost any syscall pays once a syscall tracepoint is enabled.
// usage: madvise_loop [N=200000] [ADVICE=0 (MADV_NORMAL)]; prints "calls=N ns_per_call=X"
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 200000;
    int advice = argc > 2 ? atoi(argv[2]) : MADV_NORMAL;
    size_t len = 2 << 20;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); return 1; }
    p[0] = 1;
    long failed = 0;
    long long t0 = now_ns();
    if (advice < 0)
        for (long i = 0; i < n; i++) failed += syscall(SYS_getppid) < 0;
    else
        for (long i = 0; i < n; i++)
            if (madvise(p, 4096, advice) != 0) failed++;
    long long el = now_ns() - t0;
    printf("calls=%ld ns_per_call=%.1f failed=%ld\n", n, (double)el / n, failed);
    return 0;
}
