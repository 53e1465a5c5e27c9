// fakefp: allocations made while rbp holds no frame pointer but the address of readable memory
// below the stack, as code built without frame pointers may leave it (rbp is just a register
// there), for tests/kernel/test_leaks_stacks.py: the leaks program's own walk must not take that
// memory for a frame; the kernel's walker (bpf_get_stackid) does, which shows rbp was set.
//
// Prints "ready", waits for a line on stdin (the tracers are attached), leaks N blocks from
// ff_leak, prints "case ff_leak <count> <bytes>", then "done", and sleeps.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define N 5
#define SIZE 500
static void *volatile keep[N];

// rbp := fake (a heap "frame": saved rbp 0, return address 0x5eed0000beef) around the call
__attribute__((noinline)) void *ff_leak(unsigned long *fake, unsigned long n) {
    void *p;
    __asm__ volatile(
        "push %%rbp\n\t"
        "mov %%rsp, %%r12\n\t"
        "and $-16, %%rsp\n\t"
        "mov %[fake], %%rbp\n\t"
        "call malloc@PLT\n\t"
        "mov %%r12, %%rsp\n\t"
        "pop %%rbp\n\t"
        : "=a"(p), "+D"(n)
        : [fake] "b"(fake)
        : "rcx", "rdx", "rsi", "r8", "r9", "r10", "r11", "r12", "memory", "cc");
    return p;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    unsigned long *fake = malloc(2 * sizeof(unsigned long));
    if (!fake)
        return 1;
    fake[0] = 0;
    fake[1] = 0x5eed0000beefUL;
    printf("ready\n");
    char line[16];
    if (!fgets(line, sizeof line, stdin))
        return 1;
    for (int i = 0; i < N; i++)
        keep[i] = ff_leak(fake, SIZE);
    printf("case ff_leak %d %d\n", N, N * SIZE);
    printf("done\n");
    for (;;)
        pause();
}
