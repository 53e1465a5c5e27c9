// malloc_churn: a malloc-heavy workload for bench/leaks_cost.py.
//
// Each op is one malloc (or calloc) and one free, called from a stack a few frames deep (as real
// programs do: the stack walk is part of a tracer's cost). Every 100 ms it prints
// "<CLOCK_MONOTONIC ns> <ops so far>" so a bench can measure ns/op for any window while tracers
// attach and detach around the same running process.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile uint64_t ops;
static volatile int sink;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static void churn_op(unsigned i) {
    size_t size = 16 + (i & 7) * 24;
    char *p = (i & 15) == 0 ? calloc(1, size) : malloc(size);
    if (p) {
        p[0] = (char)i;
        sink += p[0];
    }
    free(p);
}

__attribute__((noinline)) static void churn_loop(double seconds) {
    uint64_t end = now_ns() + (uint64_t)(seconds * 1e9), next = now_ns();
    unsigned i = 0;
    for (;;) {
        for (int k = 0; k < 256; k++)
            churn_op(i++);
        ops += 256;
        uint64_t t = now_ns();
        if (t >= next) {
            printf("%llu %llu\n", (unsigned long long)t, (unsigned long long)ops);
            fflush(stdout);
            next = t + 100000000ull;
        }
        if (t >= end)
            return;
    }
}

// a few frames of depth, as in a real program
__attribute__((noinline)) static void deeper(int depth, double seconds) {
    if (depth == 0) {
        churn_loop(seconds);
        return;
    }
    deeper(depth - 1, seconds);
    sink++;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 60.0;
    deeper(6, seconds);
    return 0;
}
