// symtarget_cxx: a C++ function whose name is mangled (_ZN11memtop_test5twiceEi), for the
// demangling test in tests/unit/test_symbols.py. Prints its address, then pauses.
#include <cstdio>
#include <unistd.h>

namespace memtop_test {
__attribute__((noinline)) int twice(int x) {
    return 2 * x;
}
}  // namespace memtop_test

int main() {
    std::printf("%p %d\n", reinterpret_cast<void *>(&memtop_test::twice), memtop_test::twice(2));
    std::fflush(stdout);
    for (;;)
        pause();
}
