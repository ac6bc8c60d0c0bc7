/* A pre-fork server in miniature: the master prints "ready", waits DELAY_MS, then
 * forks two workers that never exec (they keep the master's name, as PostgreSQL's
 * backends, gunicorn's or php-fpm's workers do); all three burn SECONDS of their own
 * CPU time (not wall time: the same work on a loaded machine) in functions of their
 * own, then the master waits for the workers and exits. Workers die with the
 * master (PR_SET_PDEATHSIG), so a test that kills the master leaves nothing behind.
 *
 * With DELAY_MS -1 the master forks when it gets SIGUSR1 instead (a test sends it once
 * the recorder has attached).
 *
 * usage: prefork DELAY_MS SECONDS */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static volatile sig_atomic_t go;

static void on_usr1(int sig) {
    (void)sig;
    go = 1;
}

/* This process's own CPU time (each process has one thread). */
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void worker_burn(double end) {
    while (now() < end)
        for (unsigned long i = 0; i < 100000; i++) sink += i * i;
}

__attribute__((noinline)) static void master_burn(double end) {
    while (now() < end)
        for (unsigned long i = 0; i < 100000; i++) sink += i ^ (i >> 3);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: prefork DELAY_MS SECONDS\n");
        return 2;
    }
    long delay_ms = atol(argv[1]);
    double seconds = atof(argv[2]);
    sigset_t usr1, old;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_BLOCK, &usr1, &old);
    signal(SIGUSR1, on_usr1);
    printf("ready\n");
    fflush(stdout);
    if (delay_ms < 0) {
        while (!go) sigsuspend(&old);
    } else {
        usleep(delay_ms * 1000);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    pid_t master = getpid();
    pid_t workers[2];
    for (int w = 0; w < 2; w++) {
        pid_t p = fork();
        if (p == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != master) _exit(0);
            /* A forked child's CPU clock starts from zero. */
            worker_burn(now() + seconds);
            _exit(0);
        }
        workers[w] = p;
    }
    master_burn(now() + seconds);
    for (int w = 0; w < 2; w++) waitpid(workers[w], NULL, 0);
    return 0;
}
