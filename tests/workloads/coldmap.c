// coldmap: read a file through a private read-only mapping, one byte per page, after dropping
// its pages from the page cache (POSIX_FADV_DONTNEED): each miss is a file major fault.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2)
        return 1;
    char line[64];
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0)
        return 2;
    struct stat st;
    fstat(fd, &st);
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    printf("ready %d\n", getpid());
    fflush(stdout);
    if (!fgets(line, sizeof(line), stdin))
        return 1;
    char *p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
        return 3;
    madvise(p, st.st_size, MADV_RANDOM);  // no read-around: one major fault per page read
    unsigned long sum = 0;
    long page = sysconf(_SC_PAGESIZE);
    for (off_t i = 0; i < st.st_size; i += page)
        sum += (unsigned char)p[i];
    printf("done %lu\n", sum);
    fflush(stdout);
    if (!fgets(line, sizeof(line), stdin))
        return 0;
    return 0;
}
