// shmwork: shared memory and huge pages on command, one per line on stdin, for the Shared pane's
// kernel tests. Each command answers one line ("ok ..." or "err ...").
//   get KEY SIZE        shmget(KEY, SIZE, IPC_CREAT|0600)      -> ok SHMID
//   at SHMID            shmat, touch every page               -> ok ADDR
//   dt SHMID            shmdt of the address at gave          -> ok
//   rm SHMID            shmctl(IPC_RMID)                       -> ok
//   huge N              mmap N 2 MiB pages MAP_HUGETLB, touch  -> ok ADDR
//   thp MIB             2 MiB-aligned anonymous region, madvise(MADV_HUGEPAGE), touch -> ok START LEN
//   memfd NAME SIZE MAP memfd_create, write SIZE bytes, mmap it when MAP is 1 -> ok FD
//   frag MIB            MIB of anonymous memory touched, every other page given back (MADV_DONTNEED): work for compaction -> ok
//   unmap               munmap every huge, thp and memfd mapping
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#define MAX_SEGS 64
#define MAX_MAPS 64

static struct {
    int shmid;
    void *addr;
} segs[MAX_SEGS];
static struct {
    void *addr;
    size_t len;
} maps[MAX_MAPS];
static int nsegs, nmaps;

static void touch(char *p, size_t len) {
    for (size_t off = 0; off < len; off += 4096) p[off] = 1;
}

static void remember(void *addr, size_t len) {
    if (nmaps < MAX_MAPS) {
        maps[nmaps].addr = addr;
        maps[nmaps].len = len;
        nmaps++;
    }
}

int main(void) {
    char line[512];
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready %d\n", getpid());
    while (fgets(line, sizeof(line), stdin)) {
        char cmd[32] = "", name[256] = "";
        long long a = 0, b = 0, c = 0;
        if (sscanf(line, "%31s", cmd) != 1) continue;
        if (!strcmp(cmd, "get") && sscanf(line, "%*s %lli %lli", &a, &b) == 2) {
            int id = shmget((key_t)a, (size_t)b, IPC_CREAT | 0600);
            if (id < 0) { printf("err %m\n"); continue; }
            printf("ok %d\n", id);
        } else if (!strcmp(cmd, "at") && sscanf(line, "%*s %lli", &a) == 1) {
            struct shmid_ds ds;
            void *p = shmat((int)a, NULL, 0);
            if (p == (void *)-1 || shmctl((int)a, IPC_STAT, &ds) < 0) { printf("err %m\n"); continue; }
            touch(p, ds.shm_segsz);
            if (nsegs < MAX_SEGS) { segs[nsegs].shmid = (int)a; segs[nsegs].addr = p; nsegs++; }
            printf("ok %lu\n", (unsigned long)p);
        } else if (!strcmp(cmd, "dt") && sscanf(line, "%*s %lli", &a) == 1) {
            int done = 0;
            for (int i = 0; i < nsegs; i++)
                if (segs[i].shmid == (int)a && segs[i].addr) {
                    done = shmdt(segs[i].addr) == 0;
                    segs[i].addr = NULL;
                    break;
                }
            printf(done ? "ok\n" : "err not attached\n");
        } else if (!strcmp(cmd, "rm") && sscanf(line, "%*s %lli", &a) == 1) {
            if (shmctl((int)a, IPC_RMID, NULL) < 0) printf("err %m\n");
            else printf("ok\n");
        } else if (!strcmp(cmd, "huge") && sscanf(line, "%*s %lli", &a) == 1) {
            size_t len = (size_t)a << 21;
            void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
            if (p == MAP_FAILED) { printf("err %m\n"); continue; }
            touch(p, len);
            remember(p, len);
            printf("ok %lu\n", (unsigned long)p);
        } else if (!strcmp(cmd, "thp") && sscanf(line, "%*s %lli", &a) == 1) {
            size_t len = (size_t)a << 20, huge = 2 << 20;
            char *raw = mmap(NULL, len + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (raw == MAP_FAILED) { printf("err %m\n"); continue; }
            char *p = (char *)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
            if (madvise(p, len, MADV_HUGEPAGE) < 0) { printf("err %m\n"); continue; }
            touch(p, len);
            remember(raw, len + huge);
            printf("ok %lu %zu\n", (unsigned long)p, len);
        } else if (!strcmp(cmd, "memfd") && sscanf(line, "%*s %255s %lli %lli", name, &b, &c) == 3) {
            int fd = memfd_create(name, 0);
            if (fd < 0 || ftruncate(fd, (off_t)b) < 0) { printf("err %m\n"); continue; }
            char page[4096];
            memset(page, 7, sizeof(page));
            for (long long off = 0; off < b; off += (long long)sizeof(page))
                if (pwrite(fd, page, sizeof(page), (off_t)off) < 0) break;
            if (c) {
                void *p = mmap(NULL, (size_t)b, PROT_READ, MAP_SHARED, fd, 0);
                if (p == MAP_FAILED) { printf("err %m\n"); continue; }
                volatile char sum = 0;
                for (long long off = 0; off < b; off += 4096) sum += ((char *)p)[off];  // resident: RssShmem
                remember(p, (size_t)b);
            }
            printf("ok %d\n", fd);
        } else if (!strcmp(cmd, "frag") && sscanf(line, "%*s %lli", &a) == 1) {
            size_t len = (size_t)a << 20;
            char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) { printf("err %m\n"); continue; }
            madvise(p, len, MADV_NOHUGEPAGE);  // 4 KiB pages, whatever THP's mode
            touch(p, len);
            for (size_t off = 0; off < len; off += 8192) madvise(p + off, 4096, MADV_DONTNEED);
            remember(p, len);
            printf("ok\n");
        } else if (!strcmp(cmd, "unmap")) {
            for (int i = 0; i < nmaps; i++) munmap(maps[i].addr, maps[i].len);
            nmaps = 0;
            printf("ok\n");
        } else {
            printf("err unknown command\n");
        }
    }
    return 0;
}
