/* reclaim_hog: anonymous memory pressure for the vmscan/reclaim tests.
 *
 * usage: reclaim_hog MIB PASSES [SECONDS]
 * Maps MIB MiB of anonymous memory and writes one byte per page, PASSES times (or, with SECONDS,
 * pass after pass until that many seconds have gone by). In a memory cgroup whose limit is below
 * MIB every pass forces the kernel to reclaim (swap out) what the previous pass touched, so each
 * page charge beyond the limit runs a short memcg reclaim in this process's context.
 * Prints "ready PID" once mapped so a test knows whom to look for.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MIB PASSES [SECONDS]\n", argv[0]);
        return 2;
    }
    size_t bytes = (size_t)atol(argv[1]) << 20;
    long passes = atol(argv[2]);
    double seconds = argc > 3 ? atof(argv[3]) : 0.0;
    long page = sysconf(_SC_PAGESIZE);
    char *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    double deadline = now_s() + seconds;
    for (long pass = 0; pass < passes || (seconds > 0 && now_s() < deadline); pass++) {
        for (size_t off = 0; off < bytes; off += (size_t)page)
            buf[off] = (char)(pass + 1);
    }
    munmap(buf, bytes);
    return 0;
}
