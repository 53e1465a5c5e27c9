// allocfamily: every allocator memleak traces, with known outcomes, for tests/test_leaks.py.
//
// Waits for the tracer's uprobe on malloc (int3 in its first byte), then from one function per
// case: leaks through calloc, realloc chains, posix_memalign, aligned_alloc, valloc, direct mmap,
// large mallocs (glibc serves them with its own internal mmap: must count once); frees what
// fam_freed allocates (free, realloc(p, 0), munmap); makes allocations that fail (must not count).
// Prints "case <name> <count> <requested bytes>" for what each case leaves outstanding, then
// "done" and sleeps.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define N 5
static void *volatile keep[64];
static int nkeep;

static void hold(void *p) { keep[nkeep++ & 63] = p; }

__attribute__((noinline)) void fam_calloc(void) {
    for (int i = 0; i < N; i++)
        hold(calloc(10, 100));
    printf("case fam_calloc %d %d\n", N, N * 1000);
}

__attribute__((noinline)) void fam_realloc(void) {
    for (int i = 0; i < N; i++) {
        char *p = malloc(100);
        p = realloc(p, 5000);
        p = realloc(p, 300000);  // moves into an mmapped chunk (glibc's own mmap inside)
        hold(p);
    }
    printf("case fam_realloc %d %d\n", N, N * 300000);
}

__attribute__((noinline)) void fam_memalign(void) {
    for (int i = 0; i < N; i++) {
        void *p = NULL;
        if (posix_memalign(&p, 64, 1000) == 0)
            hold(p);
    }
    printf("case fam_memalign %d %d\n", N, N * 1000);
}

__attribute__((noinline)) void fam_aligned(void) {
    for (int i = 0; i < N; i++)
        hold(aligned_alloc(256, 2048));
    printf("case fam_aligned %d %d\n", N, N * 2048);
}

__attribute__((noinline)) void fam_valloc(void) {
    for (int i = 0; i < N; i++)
        hold(valloc(3000));
    printf("case fam_valloc %d %d\n", N, N * 3000);
}

__attribute__((noinline)) void fam_mmap(void) {
    for (int i = 0; i < N; i++)
        hold(mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    printf("case fam_mmap %d %d\n", N, N << 20);
}

__attribute__((noinline)) void fam_big(void) {
    for (int i = 0; i < N; i++)
        hold(malloc(1 << 20));
    printf("case fam_big %d %d\n", N, N << 20);
}

__attribute__((noinline)) void fam_freed(void) {
    for (int i = 0; i < N; i++) {
        free(malloc(500));
        free(calloc(3, 300));
        realloc(malloc(700), 0);
        void *p = NULL;
        if (posix_memalign(&p, 128, 900) == 0)
            free(p);
        free(malloc(1 << 20));
        munmap(mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), 1 << 16);
    }
    printf("case fam_freed 0 0\n");
}

__attribute__((noinline)) void fam_failed(void) {
    for (int i = 0; i < N; i++) {
        hold(malloc(SIZE_MAX / 2));  // NULL
        hold(calloc(SIZE_MAX / 8, 16));  // NULL: overflow
        void *p = NULL;
        if (posix_memalign(&p, 3, 100) == 0)  // EINVAL: not a power of two
            hold(p);
        void *m = mmap(NULL, 1 << 20, PROT_READ, MAP_PRIVATE | MAP_FIXED, -1, 0);  // MAP_FAILED
        if (m != MAP_FAILED)
            hold(m);
    }
    printf("case fam_failed 0 0\n");
}

int main(void) {
    volatile unsigned char *m = (volatile unsigned char *)dlsym(RTLD_DEFAULT, "malloc");
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    for (int i = 0; i < 120000 && *m != 0xcc; i++)
        usleep(1000);
    usleep(20000);
    fam_calloc();
    fam_realloc();
    fam_memalign();
    fam_aligned();
    fam_valloc();
    fam_mmap();
    fam_big();
    fam_freed();
    fam_failed();
    printf("done\n");
    fflush(stdout);
    sleep(60);
    return 0;
}
