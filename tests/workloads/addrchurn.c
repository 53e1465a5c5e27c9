// addrchurn: many distinct addresses through the leaks probe's address table, then a known leak.
//
// Waits until a uprobe is on libc's malloc (int3, 0xcc, at its first byte). Then ROUNDS rounds:
// BATCH blocks allocated and all freed from churn_here(), each round with another size (so the
// blocks land at new addresses: the table's slots fill with freed marks). Prints "churned N"
// (the blocks it churned), then leaks LEAK blocks of 256 bytes from leak_here(), prints "leaked
// <bytes> <count>" (bytes: malloc_usable_size's, what memtop records for glibc) and sleeps until
// killed.
//
// usage: addrchurn ROUNDS BATCH LEAK
#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void *volatile keep;
static size_t leaked_bytes;

__attribute__((noinline)) void churn_here(long batch, size_t size, void **blocks) {
    for (long i = 0; i < batch; i++) {
        blocks[i] = malloc(size);
        ((char *)blocks[i])[0] = 1;
    }
    for (long i = 0; i < batch; i++)
        free(blocks[i]);
}

__attribute__((noinline)) void leak_here(void) {
    char *p = malloc(256);
    p[0] = 2;
    leaked_bytes += malloc_usable_size(p);
    keep = p;  // dropped on the next call: a leak
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 40;
    long batch = argc > 2 ? atol(argv[2]) : 1000;
    long leak = argc > 3 ? atol(argv[3]) : 1000;
    void **blocks = calloc(batch, sizeof(void *));
    volatile unsigned char *m = (volatile unsigned char *)dlsym(RTLD_DEFAULT, "malloc");
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    for (int i = 0; i < 120000 && *m != 0xcc; i++)
        usleep(1000);
    usleep(20000);  // let the last probes land
    for (long r = 0; r < rounds; r++)
        churn_here(batch, 200 + 48 * (size_t)r, blocks);
    printf("churned %ld\n", rounds * batch);
    fflush(stdout);
    for (long i = 0; i < leak; i++)
        leak_here();
    printf("leaked %zu %ld\n", leaked_bytes, leak);
    fflush(stdout);
    pause();
    return 0;
}
