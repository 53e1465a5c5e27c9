/* reclaim_hog: anonymous memory pressure for the vmscan/reclaim tests.
 *
 * usage: reclaim_hog MIB PASSES [SECONDS [WAIT [DENTRIES]]]
 * Maps MIB MiB of anonymous memory (small pages: MADV_NOHUGEPAGE, so one reclaimed page is one
 * folio in every kernel counter) and writes one byte per page, PASSES times (or, with SECONDS > 0,
 * pass after pass until that many seconds have gone by). With WAIT=1 it waits for a line on stdin
 * before the first pass (so a test can take its baseline), and afterwards prints "done" and stays
 * alive until stdin closes (so the test can read its cgroup's counters while it still exists).
 * With DENTRIES > 0 it first looks up that many missing files: the negative dentries are charged
 * to its memory cgroup, so the cgroup's reclaim also runs the dentry/inode (superblock) shrinker. In a memory cgroup whose limit is below
 * MIB every pass forces the kernel to reclaim (swap out) what the previous pass touched, so each
 * page charge beyond the limit runs a short memcg reclaim in this process's context.
 * Prints "ready PID" once mapped so a test knows whom to look for.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MIB PASSES [SECONDS [WAIT [DENTRIES]]]\n", argv[0]);
        return 2;
    }
    size_t bytes = (size_t)atol(argv[1]) << 20;
    long passes = atol(argv[2]);
    double seconds = argc > 3 ? atof(argv[3]) : 0.0;
    int wait = argc > 4 ? atoi(argv[4]) : 0;
    long dentries = argc > 5 ? atol(argv[5]) : 0;
    char path[64];
    struct stat st;
    for (long i = 0; i < dentries; i++) {
        snprintf(path, sizeof(path), "/tmp/memtop-reclaim-hog-missing-%d-%ld", (int)getpid(), i);
        stat(path, &st);
    }
    long page = sysconf(_SC_PAGESIZE);
    char *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    madvise(buf, bytes, MADV_NOHUGEPAGE);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char c;
    if (wait)
        while (read(0, &c, 1) > 0 && c != '\n')
            ;
    double deadline = now_s() + seconds;
    for (long pass = 0; pass < passes || (seconds > 0 && now_s() < deadline); pass++) {
        for (size_t off = 0; off < bytes; off += (size_t)page)
            buf[off] = (char)(pass + 1);
    }
    if (wait) {
        printf("done\n");
        fflush(stdout);
        while (read(0, &c, 1) > 0)
            ;
    }
    munmap(buf, bytes);
    return 0;
}
