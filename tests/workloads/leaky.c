// leaky: a purpose-built leak for tests/test_leaks.py.
//
// Waits until a uprobe is on libc's malloc (the kernel writes int3, 0xcc, into this process's
// copy of malloc's first instruction), so every allocation it reports happens under the tracer.
// Then, for LEAK_S seconds, leaks 4 KiB every 10 ms (absolute deadlines: a steady 400 KiB/s)
// from leak_here() (or leak_there() with mode "b"), and mallocs/frees CHURN blocks per tick from
// churn_here(). Prints "start", then "leaked <bytes> <count>" when it stops leaking, then keeps
// churning (no more leaks) for TAIL_S seconds and exits.
//
// usage: leaky [a|b] [LEAK_S] [TAIL_S]
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LEAK_BYTES 4096
#define TICK_NS 10000000L
#define CHURN 100

static void *volatile keep;
static size_t leaked_bytes, leaked_count;

__attribute__((noinline)) void leak_here(void) {
    char *p = malloc(LEAK_BYTES);
    memset(p, 1, LEAK_BYTES);
    keep = p;  // dropped on the next call: a leak
    leaked_bytes += LEAK_BYTES;
    leaked_count++;
}

__attribute__((noinline)) void leak_there(void) {
    char *p = malloc(LEAK_BYTES);
    memset(p, 2, LEAK_BYTES);
    keep = p;
    leaked_bytes += LEAK_BYTES;
    leaked_count++;
}

__attribute__((noinline)) void churn_here(void) {
    for (int i = 0; i < CHURN; i++) {
        char *p = malloc(64 + (i & 7) * 32);
        p[0] = (char)i;
        keep = p;
        free(p);
    }
    keep = 0;
}

static void tick(struct timespec *next) {
    next->tv_nsec += TICK_NS;
    if (next->tv_nsec >= 1000000000L) {
        next->tv_nsec -= 1000000000L;
        next->tv_sec++;
    }
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, next, NULL);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    int mode_b = argc > 1 && argv[1][0] == 'b';
    double leak_s = argc > 2 ? atof(argv[2]) : 5.0;
    double tail_s = argc > 3 ? atof(argv[3]) : 60.0;
    volatile unsigned char *m = (volatile unsigned char *)dlsym(RTLD_DEFAULT, "malloc");
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    double give_up = now_s() + 120;
    while (*m != 0xcc && now_s() < give_up) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    struct timespec ms = {0, 20000000};  // let the last probes land
    nanosleep(&ms, NULL);
    printf("start\n");
    fflush(stdout);
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    double end = now_s() + leak_s;
    while (now_s() < end) {
        if (mode_b)
            leak_there();
        else
            leak_here();
        churn_here();
        tick(&next);
    }
    printf("leaked %zu %zu\n", leaked_bytes, leaked_count);
    fflush(stdout);
    end = now_s() + tail_s;
    while (now_s() < end) {
        churn_here();
        tick(&next);
    }
    return 0;
}
