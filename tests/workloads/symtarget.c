// symtarget: functions at known places for the symbol tests (tests/unit/test_symbols.py).
// Prints "<address of outer_global> <address of inner_static> <a result>", then pauses.
#include <stdio.h>
#include <unistd.h>

__attribute__((noinline)) static int inner_static(int x) {
    return x * 3 + 1;
}

__attribute__((noinline)) int outer_global(int x) {
    return inner_static(x) + 2;
}

int main(void) {
    printf("%p %p %d\n", (void *)outer_global, (void *)inner_static, outer_global(1));
    fflush(stdout);
    for (;;)
        pause();
}
