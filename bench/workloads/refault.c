// refault: fault-heavy workload with stable timings on a VM. Re-faults one region with
// MADV_DONTNEED between rounds, so the host does not have to hand out fresh memory each time.
// usage: refault [MIB=64] [ROUNDS=32] [HOLD_S=0] [write|read]; prints "faults=N ns_per_fault=X elapsed_ns=Y"
// REFAULT_WAIT=1 in the environment: print "ready PID" and wait for a line on stdin before the first
// fault (an observer attaches to the pid first: bench/drill_fault_cost.py).
// "read" reads each page instead of writing it: the fault maps the shared zero page (no allocation,
// no zeroing), ~0.7 us per fault here, so two of them make > 2 M faults/s on 2 vCPUs.
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
    long mib = argc > 1 ? atol(argv[1]) : 64;
    long rounds = argc > 2 ? atol(argv[2]) : 32;
    size_t len = (size_t)mib << 20;
    long page = sysconf(_SC_PAGESIZE);
    int reading = argc > 4 && argv[4][0] == 'r';
    volatile char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); return 1; }
    madvise((void *)p, len, MADV_NOHUGEPAGE);
    const char *wait = getenv("REFAULT_WAIT");
    if (wait && wait[0] == '1') {
        char line[16];
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
        if (!fgets(line, sizeof line, stdin)) return 1;
    }
    long long faults = 0, t0 = now_ns();
    long sum = 0;
    for (long r = 0; r < rounds; r++) {
        if (reading)
            for (size_t off = 0; off < len; off += page) { sum += p[off]; faults++; }
        else
            for (size_t off = 0; off < len; off += page) { p[off] = 1; faults++; }
        madvise((void *)p, len, MADV_DONTNEED);
    }
    long long el = now_ns() - t0;
    printf("faults=%lld ns_per_fault=%.1f elapsed_ns=%lld\n", faults, (double)el / faults, el);
    fflush(stdout);
    if (argc > 3) sleep((unsigned)atoi(argv[3]));  /* stay around so an observer can read totals */
    return sum != 0;  /* zero pages read as 0; using the sum keeps the reads */
}
