/* manymaps N: a process with N separate mappings (bench/large_maps.py).
 *
 * One anonymous reservation of N pages, each page written once, and every other page made
 * read-only: neighbouring pages differ in protection, so the kernel cannot merge them and
 * /proc/PID/maps lists about N mappings (plus the program's own). Prints "ready N" and sleeps
 * until killed. N must stay below vm.max_map_count (65530 by default). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 60000;
    long page = sysconf(_SC_PAGESIZE);
    char *base = mmap(NULL, n * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    for (long i = 0; i < n; i++) {
        base[i * page] = 1;
        if (i % 2 && mprotect(base + i * page, page, PROT_READ) != 0) {
            perror("mprotect");
            return 1;
        }
    }
    printf("ready %ld\n", n);
    fflush(stdout);
    for (;;)
        pause();
}
