/* Two threads, "ping" and "pong", pass a byte back and forth through two pipes
 * ROUNDS times (argv[1], default 10000), each spinning WORK_US microseconds (argv[2],
 * default 50) before it answers: each blocks in read() on its pipe and is woken by
 * the other some thousands of times a second, more often than the off-CPU stack
 * event samples (1,000 a second): the switch-outs it leaves unsampled are named by
 * their site's state. tests/it/offcpu.rs. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static int to_pong[2], to_ping[2];
static long rounds = 10000, work_us = 50;

/* Spins for work_us microseconds of this thread's CPU time. */
static void work(void) {
    struct timespec a, b;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    do
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < work_us * 1000);
}

static void *pong(void *a) {
    (void)a;
    prctl(PR_SET_NAME, "pong");
    char c;
    while (read(to_pong[0], &c, 1) == 1) {
        work();
        if (write(to_ping[1], &c, 1) != 1) break;
    }
    return 0;
}

static void *ping(void *a) {
    (void)a;
    prctl(PR_SET_NAME, "ping");
    char c = 'x';
    for (long i = 0; i < rounds; i++) {
        work();
        if (write(to_pong[1], &c, 1) != 1 || read(to_ping[0], &c, 1) != 1) break;
    }
    close(to_pong[1]);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1) rounds = atol(argv[1]);
    if (argc > 2) work_us = atol(argv[2]);
    if (pipe(to_pong) || pipe(to_ping)) return 1;
    pthread_t a, b;
    pthread_create(&b, 0, pong, 0);
    pthread_create(&a, 0, ping, 0);
    pthread_join(a, 0);
    pthread_join(b, 0);
    return 0;
}
