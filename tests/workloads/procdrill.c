// Workload for the process drill-in tests. Commands on stdin, one per line; answers "ok ..." on
// stdout when done, so the test can bracket the kernel's counters around each step.
//   touch        touch_pages(): map 64 MiB (no THP) and write one byte per page
//   sbrk N K     grow_with_sbrk(): K calls of glibc's sbrk(N)
//   brk N K      grow_with_brk(): K brk() calls, each N bytes past the last
//   mmap N K     grow_with_mmap(): K anonymous mmaps of N bytes (kept)
//   unmap        release_mmaps(): munmap everything grow_with_mmap mapped
//
// grow_with_brk, grow_with_mmap and release_mmaps issue the syscall instruction themselves.
// glibc's wrappers are built without frame pointers, so a frame-pointer unwinder (the kernel's,
// for BPF user stacks) skips the function that called the wrapper, the same limitation bcc's
// brkstack and mmapsnoop have; grow_with_sbrk shows it. With the instruction inline, the named
// function is the innermost frame and the attribution can be checked exactly.
//   hold N       map N MiB (no THP), touch it with touch_pages() and keep it (for swap)
//   filemap PATH read_file_pages(): map PATH read-only, read one byte per page, keep it mapped
//   loop         touch_pages() forever, 64 MiB per round (for headless snapshots)
//   exit
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

extern void *__curbrk;  // glibc's idea of the break; kept in step after raw brk()

static inline __attribute__((always_inline)) long raw6(long nr, long a1, long a2, long a3, long a4,
                                                       long a5, long a6) {
    long ret;
    register long r10 __asm__("r10") = a4;
    register long r8 __asm__("r8") = a5;
    register long r9 __asm__("r9") = a6;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}

#define TOUCH_BYTES (64UL << 20)
#define MAX_MAPS 1024

static void *maps[MAX_MAPS];
static size_t map_len[MAX_MAPS];
static int nmaps;

__attribute__((noinline)) void touch_pages(char *p, size_t bytes) {
    long page = sysconf(_SC_PAGESIZE);
    for (size_t off = 0; off < bytes; off += (size_t)page)
        ((volatile char *)p)[off] = 1;
}

static char *map_touch_area(void) {
    char *p = mmap(NULL, TOUCH_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    madvise(p, TOUCH_BYTES, MADV_NOHUGEPAGE);  // one fault per 4 KiB page
    return p;
}

__attribute__((noinline)) void grow_with_sbrk(long n, int k) {
    for (int i = 0; i < k; i++)
        if (sbrk(n) == (void *)-1) {
            perror("sbrk");
            exit(1);
        }
}

__attribute__((noinline)) void grow_with_brk(long n, int k) {
    long cur = raw6(SYS_brk, 0, 0, 0, 0, 0, 0);
    for (int i = 0; i < k; i++) {
        long want = cur + n;
        cur = raw6(SYS_brk, want, 0, 0, 0, 0, 0);
        if (cur != want) {
            fprintf(stderr, "brk failed\n");
            exit(1);
        }
    }
    __curbrk = (void *)cur;
}

__attribute__((noinline)) void grow_with_mmap(size_t n, int k) {
    for (int i = 0; i < k && nmaps < MAX_MAPS; i++) {
        void *p = (void *)raw6(SYS_mmap, 0, (long)n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if ((unsigned long)p > -4096UL) {
            perror("mmap");
            exit(1);
        }
        maps[nmaps] = p;
        map_len[nmaps++] = n;
    }
}

__attribute__((noinline)) void release_mmaps(void) {
    for (int i = 0; i < nmaps; i++)
        raw6(SYS_munmap, (long)maps[i], (long)map_len[i], 0, 0, 0, 0);
    nmaps = 0;
}

__attribute__((noinline)) long read_file_pages(const char *path) {
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        perror(path);
        exit(1);
    }
    volatile char *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    close(fd);
    long sum = 0, page = sysconf(_SC_PAGESIZE);
    for (off_t off = 0; off < st.st_size; off += page)
        sum += p[off];
    return sum;
}

int main(void) {
    char line[256];
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready %d\n", getpid());
    while (fgets(line, sizeof line, stdin)) {
        long n = 0;
        int k = 0;
        if (strncmp(line, "touch", 5) == 0) {
            char *p = map_touch_area();
            touch_pages(p, TOUCH_BYTES);
            printf("ok touch\n");
            munmap(p, TOUCH_BYTES);
        } else if (sscanf(line, "sbrk %ld %d", &n, &k) == 2) {
            grow_with_sbrk(n, k);
            printf("ok sbrk\n");
        } else if (sscanf(line, "brk %ld %d", &n, &k) == 2) {
            grow_with_brk(n, k);
            printf("ok brk\n");
        } else if (sscanf(line, "mmap %ld %d", &n, &k) == 2) {
            grow_with_mmap((size_t)n, k);
            printf("ok mmap\n");
        } else if (strncmp(line, "unmap", 5) == 0) {
            release_mmaps();
            printf("ok unmap\n");
        } else if (sscanf(line, "hold %ld", &n) == 1) {
            size_t bytes = (size_t)n << 20;
            char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) {
                perror("mmap");
                exit(1);
            }
            madvise(p, bytes, MADV_NOHUGEPAGE);
            touch_pages(p, bytes);
            printf("ok hold\n");
        } else if (strncmp(line, "filemap ", 8) == 0) {
            line[strcspn(line, "\n")] = 0;
            read_file_pages(line + 8);
            printf("ok filemap\n");
        } else if (strncmp(line, "loop", 4) == 0) {
            printf("ok loop\n");
            for (;;) {
                char *p = map_touch_area();
                touch_pages(p, TOUCH_BYTES);
                munmap(p, TOUCH_BYTES);
                usleep(200 * 1000);
            }
        } else if (strncmp(line, "exit", 4) == 0) {
            break;
        }
    }
    return 0;
}
