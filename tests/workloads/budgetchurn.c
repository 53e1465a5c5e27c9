// budgetchurn: allocation churn across ten stacks with an optional slow leak from one more, for
// leak hunting on a CPU budget (tests/kernel/test_leaks_budget.py, bench/leaks_budget.py).
//
// Every millisecond (absolute deadlines) it does CALLS/1000 malloc+free pairs, spread over
// churn_0() .. churn_9(), each keeping its last RING blocks (a block lives RING of its stack's
// calls: in flight when a window ends, freed soon after), and leaks LEAK_BPS bytes per second
// from leak_here() in LEAK_SIZE blocks (0: no leak). Waits for a uprobe on malloc first (not with
// "nowait": a bench's untraced run), prints "start", then "leaked <bytes> <count>" every second,
// and exits after DURATION_S seconds. Each SIGUSR1 multiplies CALLS_PER_S by ten (a rate jump).
//
// usage: budgetchurn CALLS_PER_S LEAK_BPS LEAK_SIZE DURATION_S [nowait]
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RING 16
#define STACKS 10

static void *volatile keep;
static void *ring[STACKS][RING];
static unsigned pos[STACKS];
static size_t leaked_bytes, leaked_count;
static volatile sig_atomic_t jumps;

static void on_usr1(int sig) {
    (void)sig;
    jumps++;
}

#define CHURN(i)                                            \
    __attribute__((noinline)) void churn_##i(void) {        \
        void **slot = &ring[i][pos[i]++ % RING];            \
        free(*slot);                                        \
        *slot = malloc(32 + 48 * (i));                      \
        ((char *)*slot)[0] = (char)(i);                     \
    }
CHURN(0) CHURN(1) CHURN(2) CHURN(3) CHURN(4) CHURN(5) CHURN(6) CHURN(7) CHURN(8) CHURN(9)

static void (*const churns[STACKS])(void) = {churn_0, churn_1, churn_2, churn_3, churn_4,
                                              churn_5, churn_6, churn_7, churn_8, churn_9};

__attribute__((noinline)) void leak_here(size_t size) {
    char *p = malloc(size);
    memset(p, 1, size);
    keep = p;  // dropped on the next call: a leak
    leaked_bytes += size;
    leaked_count++;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: budgetchurn CALLS_PER_S LEAK_BPS LEAK_SIZE DURATION_S\n");
        return 2;
    }
    double calls = atof(argv[1]), leak_bps = atof(argv[2]), duration = atof(argv[4]);
    size_t leak_size = (size_t)atol(argv[3]);
    volatile unsigned char *m = (volatile unsigned char *)dlsym(RTLD_DEFAULT, "malloc");
    signal(SIGUSR1, on_usr1);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    double give_up = now_s() + 120;
    int wait = !(argc > 5 && strcmp(argv[5], "nowait") == 0);
    while (wait && *m != 0xcc && now_s() < give_up) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    printf("start\n");
    fflush(stdout);
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    double t0 = now_s(), end = t0 + duration, report = t0 + 1, owed = 0, carry = 0;
    unsigned k = 0;
    while (now_s() < end) {
        for (; jumps > 0; jumps--)
            calls *= 10;
        carry += calls / 1000.0;
        for (; carry >= 1; carry -= 1)
            churns[k++ % STACKS]();
        if (leak_size) {
            owed += leak_bps / 1000.0;
            for (; owed >= (double)leak_size; owed -= (double)leak_size)
                leak_here(leak_size);
        }
        if (now_s() >= report) {
            printf("leaked %zu %zu\n", leaked_bytes, leaked_count);
            fflush(stdout);
            report += 1;
        }
        next.tv_nsec += 1000000;
        if (next.tv_nsec >= 1000000000L) {
            next.tv_nsec -= 1000000000L;
            next.tv_sec++;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    }
    return 0;
}
