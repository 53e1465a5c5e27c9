// rec_leak: a leaking process for the screenshots recording. Every 50 ms it mallocs BYTES through
// two different call paths, frees a third of them and keeps the rest forever.
// usage: rec_leak [BYTES]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *keep[1 << 20];
static long kept;

__attribute__((noinline)) void *parse_request(size_t n) { void *p = malloc(n); memset(p, 1, n); return p; }
__attribute__((noinline)) void *cache_entry(size_t n) { void *p = malloc(n); memset(p, 2, n); return p; }

int main(int argc, char **argv) {
    size_t n = argc > 1 ? (size_t)atol(argv[1]) : 64 * 1024;
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready %d\n", getpid());
    for (long i = 0;; i++) {
        void *a = parse_request(n);
        void *b = cache_entry(n / 2);
        if (i % 3 == 0) free(a); else if (kept < (1 << 20)) keep[kept++] = a;
        if (kept < (1 << 20)) keep[kept++] = b;
        usleep(50000);
    }
}
