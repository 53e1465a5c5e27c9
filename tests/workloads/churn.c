// churn: fork N children that exit at once, M at a time; prints "done N".
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 10000;
    for (long i = 0; i < n; i++) {
        pid_t p = fork();
        if (p == 0) _exit(0);
        if (p < 0) { perror("fork"); return 1; }
        waitpid(p, NULL, 0);
    }
    printf("done %ld\n", n);
    return 0;
}
