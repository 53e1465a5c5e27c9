// signal_loop: a signal-heavy program, timed (bench/signal_cost.py): what it pays for memtop's
// kills probe on signal:signal_generate, which returns at once for any signal but SIGKILL/SIGTERM.
// MODE kill0: N kill(getpid(), 0) (a permission check: no signal is generated);
// MODE usr1: N SIGUSR1 round trips between a parent and its child (two signals generated each).
// usage: signal_loop MODE [N]; prints "calls=N ns_per_call=X"
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "usr1";
    long n = argc > 2 ? atol(argv[2]) : 100000;
    long long t0, t1;
    if (!strcmp(mode, "kill0")) {
        pid_t self = getpid();
        t0 = now_ns();
        for (long i = 0; i < n; i++)
            kill(self, 0);
        t1 = now_ns();
    } else {
        // SIGUSR1 blocked and taken with sigwaitinfo: no handler, no lost signals
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGUSR1);
        sigprocmask(SIG_BLOCK, &set, NULL);
        pid_t parent = getpid();
        pid_t child = fork();
        if (child < 0) {
            perror("fork");
            return 1;
        }
        if (child == 0) {
            for (long i = 0; i < n; i++) {
                sigwaitinfo(&set, NULL);
                kill(parent, SIGUSR1);
            }
            _exit(0);
        }
        t0 = now_ns();
        for (long i = 0; i < n; i++) {
            kill(child, SIGUSR1);
            sigwaitinfo(&set, NULL);
        }
        t1 = now_ns();
        waitpid(child, NULL, 0);
    }
    printf("calls=%ld ns_per_call=%.1f\n", n, (double)(t1 - t0) / (double)n);
    return 0;
}
