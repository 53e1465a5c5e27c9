// laneleak: a leak through whatever allocator the program is linked or preloaded with (issue 25's
// allocator lanes: glibc, musl dynamic and static, jemalloc, tcmalloc, a C++ operator new).
//
// Waits until a uprobe is on the allocation function it will call (the kernel writes int3, 0xcc,
// into this process's copy of its first instruction): WAIT_SYMBOL looked up with dlsym, or, built
// with -DSTATIC (no dlsym in a static musl), malloc's own address. Then leaks 4 KiB every 10 ms for
// LEAK_S seconds from leak_here() and churns 100 small blocks a tick from churn_here(); prints
// "leaked <bytes> <count>" and churns on for TAIL_S seconds.
//
// Built with -DDLOPEN_LOCAL='"libtcmalloc.so.4"' it first dlopens that library RTLD_LOCAL (as a
// plugin bringing its own allocator would) and allocates and frees once through its malloc, found
// with dlsym: the program's own malloc calls still go to the global scope's (libc).
//
// Given a program after TAIL_S, once it has leaked it waits for SIGUSR1 and execs that program
// (with the arguments that follow) instead of churning on: the same pid, a new image with the old
// one's allocations gone.
//
// usage: laneleak [LEAK_S] [TAIL_S] [PROGRAM ARGS...]  (-DUSE_NEW: leaks and churns with new/delete)
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifndef STATIC
#include <dlfcn.h>
#endif

#define LEAK_BYTES 4096
#define TICK_NS 10000000L
#define CHURN 100

#ifdef USE_NEW
void *alloc_new(size_t n);  // laneleak_new.cc: operator new / delete
void free_delete(void *p);
#define ALLOC(n) alloc_new(n)
#define FREE(p) free_delete(p)
#define WAIT_SYMBOL "_Znwm"
#else
#define ALLOC(n) malloc(n)
#define FREE(p) free(p)
#define WAIT_SYMBOL "malloc"
#endif

static void *volatile keep;
static size_t leaked_bytes, leaked_count;

__attribute__((noinline)) void leak_here(void) {
    char *p = ALLOC(LEAK_BYTES);
    memset(p, 1, LEAK_BYTES);
    keep = p;  // dropped on the next call: a leak
    leaked_bytes += LEAK_BYTES;
    leaked_count++;
}

__attribute__((noinline)) void churn_here(void) {
    for (int i = 0; i < CHURN; i++) {
        char *p = ALLOC(64 + (i & 7) * 32);
        p[0] = (char)i;
        keep = p;
        FREE(p);
    }
    keep = 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void tick(struct timespec *next) {
    next->tv_nsec += TICK_NS;
    if (next->tv_nsec >= 1000000000L) {
        next->tv_nsec -= 1000000000L;
        next->tv_sec++;
    }
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, next, NULL);
}

int main(int argc, char **argv) {
    sigset_t usr1;  // blocked from the start: a SIGUSR1 before the wait is kept, not fatal
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_BLOCK, &usr1, NULL);
    double leak_s = argc > 1 ? atof(argv[1]) : 2.0;
    double tail_s = argc > 2 ? atof(argv[2]) : 60.0;
#ifdef DLOPEN_LOCAL
    void *lib = dlopen(DLOPEN_LOCAL, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "laneleak: %s\n", dlerror());
        return 1;
    }
    void *(*lib_malloc)(size_t) = (void *(*)(size_t))dlsym(lib, "malloc");
    void (*lib_free)(void *) = (void (*)(void *))dlsym(lib, "free");
    if (!lib_malloc || !lib_free) {
        fprintf(stderr, "laneleak: no malloc/free in %s\n", DLOPEN_LOCAL);
        return 1;
    }
    lib_free(lib_malloc(100));
#endif
#ifdef STATIC
    volatile unsigned char *m = (volatile unsigned char *)(uintptr_t)&malloc;
#else
    volatile unsigned char *m = (volatile unsigned char *)dlsym(RTLD_DEFAULT, WAIT_SYMBOL);
#endif
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    double give_up = now_s() + 120;
    while (*m != 0xcc && now_s() < give_up) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    struct timespec ms = {0, 50000000};  // let the last probes land
    nanosleep(&ms, NULL);
    printf("start\n");
    fflush(stdout);
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    double end = now_s() + leak_s;
    while (now_s() < end) {
        leak_here();
        churn_here();
        tick(&next);
    }
    printf("leaked %zu %zu\n", leaked_bytes, leaked_count);
    fflush(stdout);
#ifndef STATIC
    if (argc > 3) {
        int sig = 0;
        sigwait(&usr1, &sig);
        execv(argv[3], &argv[3]);
        perror("laneleak: execv");
        return 1;
    }
#endif
    end = now_s() + tail_s;
    while (now_s() < end) {
        churn_here();
        tick(&next);
    }
    return 0;
}
