// paced: malloc + free pairs at a steady rate, for the leaks preflight's tests.
//
// usage: paced PAIRS_PER_S SECONDS
// Every 1 ms (absolute deadlines) it does PAIRS_PER_S / 1000 malloc+free pairs from pair_here().
// Prints "ready", then every 50 ms "<CLOCK_MONOTONIC ns> <pairs so far>" (stdout's buffer is
// allocated once, at the first line, before any of these), and exits after SECONDS.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void *volatile keep;

__attribute__((noinline)) void pair_here(unsigned i) {
    char *p = malloc(32 + (i & 7) * 16);
    p[0] = (char)i;
    keep = p;
    free(p);
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv) {
    long per_s = argc > 1 ? atol(argv[1]) : 10000;
    double seconds = argc > 2 ? atof(argv[2]) : 10.0;
    long per_ms = per_s / 1000 > 0 ? per_s / 1000 : 1;
    printf("ready\n");
    fflush(stdout);
    uint64_t pairs = 0, end = now_ns() + (uint64_t)(seconds * 1e9), next_print = 0;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    unsigned i = 0;
    for (;;) {
        for (long k = 0; k < per_ms; k++)
            pair_here(i++);
        pairs += per_ms;
        uint64_t t = now_ns();
        if (t >= next_print) {
            printf("%llu %llu\n", (unsigned long long)t, (unsigned long long)pairs);
            fflush(stdout);
            next_print = t + 50000000ull;
        }
        if (t >= end)
            return 0;
        next.tv_nsec += 1000000L;
        if (next.tv_nsec >= 1000000000L) {
            next.tv_nsec -= 1000000000L;
            next.tv_sec++;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    }
}
