// reclaim: touch MIB of anonymous memory, then read it all back PASSES times; run inside a
// memory cgroup smaller than MIB so every pass reclaims and swaps in. usage: reclaim MIB PASSES
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv) {
    long mib = argc > 1 ? atol(argv[1]) : 300;
    int passes = argc > 2 ? atoi(argv[2]) : 2;
    size_t len = (size_t)mib << 20;
    long page = sysconf(_SC_PAGESIZE);
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); return 1; }
    for (size_t off = 0; off < len; off += page) p[off] = (char)(off >> 12) | 1;
    volatile long sum = 0;
    for (int i = 0; i < passes; i++)
        for (size_t off = 0; off < len; off += page) sum += p[off];
    printf("sum=%ld\n", (long)sum);
    return 0;
}
