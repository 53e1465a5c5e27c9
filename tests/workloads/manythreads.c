/* manythreads: N idle threads that each take a known number of page faults on command.
 *
 *   manythreads N        starts N threads (plus the main one), prints "ready N"
 *   stdin "touch K"      every thread maps K fresh pages, writes one byte in each (K minor
 *                        faults per thread, THP off for the area) and unmaps them; "ok" once all
 *                        are done
 *   stdin "exit"         exits
 *
 * Between commands the threads sleep on a condition variable: they take no faults, so a thread's
 * /proc/PID/task/TID/stat minflt moves only under a command. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t go = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;
static long generation, finished, pages;

static void touch(long n) {
    long page = sysconf(_SC_PAGESIZE);
    char *p = mmap(NULL, n * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        abort();
    madvise(p, n * page, MADV_NOHUGEPAGE);
    for (long i = 0; i < n; i++)
        p[i * page] = 1;
    munmap(p, n * page);
}

static void *worker(void *arg) {
    (void)arg;
    long seen = 0;
    for (;;) {
        pthread_mutex_lock(&lock);
        while (generation == seen)
            pthread_cond_wait(&go, &lock);
        seen = generation;
        long n = pages;
        pthread_mutex_unlock(&lock);
        touch(n);
        pthread_mutex_lock(&lock);
        finished++;
        pthread_cond_signal(&done);
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    for (long i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, worker, NULL) != 0) {
            perror("pthread_create");
            return 1;
        }
    }
    printf("ready %ld\n", n);
    fflush(stdout);
    char line[128];
    while (fgets(line, sizeof line, stdin)) {
        long k;
        if (sscanf(line, "touch %ld", &k) == 1) {
            pthread_mutex_lock(&lock);
            pages = k;
            finished = 0;
            generation++;
            pthread_cond_broadcast(&go);
            while (finished < n)
                pthread_cond_wait(&done, &lock);
            pthread_mutex_unlock(&lock);
            printf("ok\n");
            fflush(stdout);
        } else if (strncmp(line, "exit", 4) == 0) {
            return 0;
        }
    }
    return 0;
}
