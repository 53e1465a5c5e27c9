// named: set our comm to argv[1] (prctl PR_SET_NAME), keep argv as given, print "ready", pause.
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc > 1) prctl(PR_SET_NAME, argv[1], 0, 0, 0);
    printf("ready\n");
    fflush(stdout);
    for (;;) pause();
}
