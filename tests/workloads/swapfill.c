// swapfill: fill MIB mebibytes of anonymous memory, then read all of it back (inside a memory
// cgroup smaller than that, the read-back is swap-ins). Waits for a line on stdin before starting
// and after finishing, so the test can place it in a cgroup and read its counters before it exits.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 300;
    int passes = argc > 2 ? atoi(argv[2]) : 1;
    size_t len = mib << 20, page = (size_t)sysconf(_SC_PAGESIZE);
    char line[64];
    printf("ready %d\n", getpid());
    fflush(stdout);
    if (!fgets(line, sizeof(line), stdin))
        return 1;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return 2;
    madvise(p, len, MADV_NOHUGEPAGE);  // one fault per 4 KiB page, like the swap-in side
    for (size_t i = 0; i < len; i += page)
        p[i] = (char)(i / page) | 1;
    unsigned long sum = 0;
    for (int k = 0; k < passes; k++)
        for (size_t i = 0; i < len; i += page)
            sum += (unsigned char)p[i];
    printf("done %lu\n", sum);
    fflush(stdout);
    if (!fgets(line, sizeof(line), stdin))
        return 0;
    return 0;
}
