// hog: map and touch MiB of anonymous memory in steps, then sleep until killed.
// usage: hog TOTAL_MIB [STEP_MIB] [PAUSE_MS] [REREAD]
// Prints "step N" after each step and "done" when all is touched (line-buffered).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv) {
    long total = argc > 1 ? atol(argv[1]) : 256;
    long step = argc > 2 ? atol(argv[2]) : total;
    long pause_ms = argc > 3 ? atol(argv[3]) : 0;
    int reread = argc > 4 ? atoi(argv[4]) : 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    size_t len = (size_t)total << 20;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); return 1; }
    long page = sysconf(_SC_PAGESIZE);
    for (long done = 0; done < total; done += step) {
        long n = (done + step > total ? total - done : step) << 20;
        for (long off = 0; off < n; off += page)
            p[(done << 20) + off] = (char)off | 1;
        printf("step %ld\n", done + step);
        if (pause_ms) usleep(pause_ms * 1000);
    }
    volatile long sum = 0;
    for (int r = 0; r < reread; r++)
        for (size_t off = 0; off < len; off += page) sum += p[off];
    printf("done\n");
    for (;;) pause();
}
