// hotset: map TOTAL_MIB of anonymous memory, touch all of it once, then touch the first HOT_MIB
// again and again (one byte a page, written) until killed, sleeping PAUSE_US between passes (so
// a test workload does not take a core of a shared machine). Prints "ready PID" once all is
// touched, then "passes N" about every second (N: passes over the hot set so far), so a test or
// a benchmark sees it run and at what pace.
// usage: hotset TOTAL_MIB HOT_MIB [PAUSE_US]
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    size_t total = (argc > 1 ? strtoul(argv[1], NULL, 10) : 1024) << 20;
    size_t hot = (argc > 2 ? strtoul(argv[2], NULL, 10) : 128) << 20;
    long pause_us = argc > 3 ? atol(argv[3]) : 100000;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (hot > total)
        hot = total;
    setvbuf(stdout, NULL, _IOLBF, 0);
    char *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return 2;
    madvise(p, total, MADV_NOHUGEPAGE);  // 4 KiB pages: the referenced bits are per page
    for (size_t i = 0; i < total; i += page)
        p[i] = (char)(i / page) | 1;  // not zero-filled: swap and zswap keep it
    printf("ready %d\n", getpid());
    unsigned long passes = 0;
    double last = now_s();
    for (;;) {
        for (size_t i = 0; i < hot; i += page)
            p[i]++;
        passes++;
        if (now_s() - last >= 1.0) {
            printf("passes %lu\n", passes);
            last = now_s();
        }
        if (pause_us > 0)
            usleep((useconds_t)pause_us);
    }
}
