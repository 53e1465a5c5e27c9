// hold: touch MIB mebibytes of anonymous memory, say so, then hold it until killed. Statically
// linked, it is the whole root filesystem of a test container (no image registry is reachable).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 16;
    size_t len = mib << 20;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return 2;
    memset(p, 1, len);
    printf("held %zu\n", mib);
    fflush(stdout);
    for (;;)
        pause();
}
