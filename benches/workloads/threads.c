/* The scale workloads. "many N": N threads that all spin until killed, so every one
 * of them uses CPU and gets sampled. "churn RATE": creates RATE threads a second,
 * each spinning for about 300 microseconds of CPU and then ending, until killed.
 * Both print "ready" once their threads exist, so the harness knows when to attach.
 *
 * usage: threads many N | threads churn RATE
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
}

__attribute__((noinline)) static uint64_t spin_for(uint64_t ns) {
    uint64_t x = 1, end = cpu_ns() + ns;
    while (cpu_ns() < end)
        for (int i = 0; i < 1000; i++) x = x * 6364136223846793005ULL + 1;
    return x;
}

static void *forever(void *arg) {
    (void)arg;
    for (;;) spin_for(1000000000);
    return NULL;
}

static void *brief(void *arg) {
    (void)arg;
    return (void *)(uintptr_t)spin_for(300000);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: threads many N | threads churn RATE\n");
        return 2;
    }
    long n = atol(argv[2]);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    if (strcmp(argv[1], "many") == 0) {
        for (long i = 0; i < n; i++) {
            pthread_t t;
            if (pthread_create(&t, &attr, forever, NULL) != 0) {
                perror("pthread_create");
                return 1;
            }
        }
        printf("ready\n");
        fflush(stdout);
        for (;;) pause();
    }
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    printf("ready\n");
    fflush(stdout);
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (;;) {
        pthread_t t;
        pthread_create(&t, &attr, brief, NULL);
        next.tv_nsec += 1000000000L / n;
        if (next.tv_nsec >= 1000000000L) {
            next.tv_sec++;
            next.tv_nsec -= 1000000000L;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    }
}
