// pingpong: two processes bounce a byte over two pipes ROUNDS times: context-switch heavy, no
// faults. Shows what a sched_switch program costs (two switches per round trip).
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 100000;
    int ab[2], ba[2];
    char c = 0;
    if (pipe(ab) || pipe(ba))
        return 1;
    pid_t child = fork();
    if (child == 0) {
        for (long i = 0; i < rounds; i++) {
            if (read(ab[0], &c, 1) != 1 || write(ba[1], &c, 1) != 1)
                _exit(1);
        }
        _exit(0);
    }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < rounds; i++) {
        if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
            return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    waitpid(child, NULL, 0);
    long long el = (long long)(b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec);
    printf("roundtrips=%ld ns_per_roundtrip=%.1f elapsed_ns=%lld\n", rounds, (double)el / rounds, el);
    return 0;
}
