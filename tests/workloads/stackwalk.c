// stackwalk: allocations from stacks the leaks program's own frame-pointer walk must follow as
// bpf_get_stackid() does, for tests/kernel/test_leaks_stacks.py.
//
// Prints "ready", waits for a line on stdin (the tracers are attached), then leaks N blocks from
// each case and prints "case <name> <count> <bytes>", then "done", and sleeps:
//   sw_shallow  main -> sw_shallow -> malloc
//   sw_deep     four frames of 3000-byte locals in between: frames beyond the walk's bulk copy
//   sw_thread   on a thread's stack
//   sw_edge     on a stack whose top is 512 bytes above the call, a guard page above it: the bulk
//               copy fails and every frame is read on its own
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#define N 7
static void *volatile keep[256];
static int nkeep;
static volatile int sink;

static void hold(void *p) { keep[nkeep++ & 255] = p; }

__attribute__((noinline)) void sw_shallow(void) {
    for (int i = 0; i < N; i++)
        hold(malloc(100));
    printf("case sw_shallow %d %d\n", N, N * 100);
}

__attribute__((noinline)) void sw_deep_leak(void) {
    for (int i = 0; i < N; i++)
        hold(malloc(200));
}

__attribute__((noinline)) void sw_deep(int depth) {
    volatile char big[3000];
    big[0] = (char)depth;
    big[2999] = (char)depth;
    if (depth == 0)
        sw_deep_leak();
    else
        sw_deep(depth - 1);
    sink += big[0] + big[2999];
}

__attribute__((noinline)) void sw_thread_leak(void) {
    for (int i = 0; i < N; i++)
        hold(malloc(300));
}

static void *sw_thread(void *arg) {
    (void)arg;
    sw_thread_leak();
    return NULL;
}

__attribute__((noinline)) void sw_edge_leak(void) {
    for (int i = 0; i < N; i++)
        hold(malloc(400));
}

static ucontext_t main_ctx, edge_ctx;

static void sw_edge(void) { sw_edge_leak(); }

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    long page = sysconf(_SC_PAGESIZE);
    // two pages of stack with a guard page above: the context starts 512 bytes below the guard
    char *area = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED || mprotect(area + 2 * page, page, PROT_NONE) != 0)
        return 1;
    printf("ready\n");
    char line[16];
    if (!fgets(line, sizeof line, stdin))
        return 1;
    sw_shallow();
    sw_deep(4);
    printf("case sw_deep_leak %d %d\n", N, N * 200);
    pthread_t t;
    pthread_create(&t, NULL, sw_thread, NULL);
    pthread_join(t, NULL);
    printf("case sw_thread_leak %d %d\n", N, N * 300);
    getcontext(&edge_ctx);
    edge_ctx.uc_stack.ss_sp = area + 2 * page - 512 - page;
    edge_ctx.uc_stack.ss_size = page;
    edge_ctx.uc_link = &main_ctx;
    makecontext(&edge_ctx, sw_edge, 0);
    swapcontext(&main_ctx, &edge_ctx);
    printf("case sw_edge_leak %d %d\n", N, N * 400);
    printf("done\n");
    for (;;)
        pause();
}
