/* Threads that run microseconds at a time, as a busy event-loop server's do (Redis's
 * main thread runs ~45 us slices): each of N threads spins about SPIN_US, then
 * sleeps SLEEP_US, over and over. Prints "ready" once all are started; runs until
 * killed.
 *
 * usage: slivers N SPIN_US SLEEP_US */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long spin_us, sleep_us;
static volatile unsigned long sink;

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

__attribute__((noinline)) static void sliver(void) {
    long long end = now_ns() + spin_us * 1000;
    while (now_ns() < end) sink++;
}

static void *loop(void *arg) {
    (void)arg;
    for (;;) {
        sliver();
        usleep((useconds_t)sleep_us);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: slivers N SPIN_US SLEEP_US\n");
        return 2;
    }
    int n = atoi(argv[1]);
    spin_us = atol(argv[2]);
    sleep_us = atol(argv[3]);
    for (int i = 0; i < n; i++) {
        pthread_t t;
        pthread_create(&t, NULL, loop, NULL);
    }
    printf("ready\n");
    fflush(stdout);
    for (;;) pause();
}
