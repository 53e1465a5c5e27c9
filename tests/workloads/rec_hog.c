// rec_hog: the recording tests' pressure. Touch TOTAL_MIB of anonymous memory (more than its
// cgroup allows, so it swaps), then sweep it again and again until killed: steady reclaim,
// swap-outs and swap-in waits. Prints "ready PID" once everything was touched once.
// usage: rec_hog TOTAL_MIB
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv) {
    long total = argc > 1 ? atol(argv[1]) : 300;
    size_t len = (size_t)total << 20;
    long page = sysconf(_SC_PAGESIZE);
    setvbuf(stdout, NULL, _IOLBF, 0);
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); return 1; }
    for (size_t i = 0; i < len; i += page)
        p[i] = (char)i;
    printf("ready %d\n", getpid());
    for (unsigned long round = 1;; round++) {
        for (size_t i = 0; i < len; i += page)
            p[i] += (char)round;
        usleep(20000);
    }
}
