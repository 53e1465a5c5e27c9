// grower: grow anonymous memory STEP_MIB every STEP_MS up to TOTAL_MIB, then hold it until killed.
// Prints "held N" (MiB) after each step. With "stubborn" it ignores SIGTERM (only SIGKILL ends
// it); with "adj" it sets its own oom_score_adj to 1000, so that a killer choosing by oom_score
// picks it over anything else on the machine ("adj=N": N); with "wait" it starts growing on a line on stdin
// (the test places it in a cgroup first); with "steady" each step is due at a fixed deadline
// (STEP_MS after the previous one was due): a step delayed by others' load is caught up, so the
// growth over a few steps averages STEP_MIB per STEP_MS whatever the load.
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    size_t total = argc > 1 ? strtoul(argv[1], NULL, 10) : 256;
    size_t step = argc > 2 ? strtoul(argv[2], NULL, 10) : 8;
    long step_ms = argc > 3 ? atol(argv[3]) : 100;
    int wait = 0, steady = 0;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "wait"))
            wait = 1;
        if (!strcmp(argv[i], "steady"))
            steady = 1;
        if (!strcmp(argv[i], "stubborn"))
            signal(SIGTERM, SIG_IGN);
        if (!strcmp(argv[i], "adj") || !strncmp(argv[i], "adj=", 4)) {
            const char *adj = argv[i][3] == '=' ? argv[i] + 4 : "1000";
            int fd = open("/proc/self/oom_score_adj", O_WRONLY);
            if (fd < 0 || write(fd, adj, strlen(adj)) != (ssize_t)strlen(adj))
                return 3;
            close(fd);
        }
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    struct timespec pause_ts = {step_ms / 1000, (step_ms % 1000) * 1000000L};
    printf("ready %d\n", getpid());
    fflush(stdout);
    char line[64];
    if (wait && !fgets(line, sizeof(line), stdin))
        return 1;
    struct timespec due;
    clock_gettime(CLOCK_MONOTONIC, &due);
    for (size_t held = 0; held < total;) {
        size_t n = step < total - held ? step : total - held;
        char *p = mmap(NULL, n << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return 2;
        for (size_t i = 0; i < (n << 20); i += page)
            p[i] = 1;
        held += n;
        printf("held %zu\n", held);
        fflush(stdout);
        if (held < total && steady) {
            due.tv_sec += pause_ts.tv_sec;
            due.tv_nsec += pause_ts.tv_nsec;
            if (due.tv_nsec >= 1000000000L) {
                due.tv_nsec -= 1000000000L;
                due.tv_sec++;
            }
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, NULL);
        } else if (held < total)
            nanosleep(&pause_ts, NULL);
    }
    for (;;)
        pause();
}
