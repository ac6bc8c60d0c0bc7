/* Test target for exact per-thread CPU accounting: threads whose CPU time is known
 * from their own clock. Every thread (the main thread too) prints, just before it
 * ends, one line
 *
 *     cpu TID NS NAME
 *
 * with NS its own CLOCK_THREAD_CPUTIME_ID total: the truth a profile's per-thread CPU
 * time is compared with. Cases, run in the order given (each waits for the previous):
 *
 *   busy:N:MS        N threads ("busyK") started at once, each burning MS ms of CPU
 *   short:N:MS       N threads ("shortK") one after another, each burning MS ms
 *   bursty:N:US:SL   one thread ("bursty") that N times burns US us, then sleeps SL us
 *   split:MS:A       one thread ("split") burning MS ms, A% of every 1 ms of its CPU
 *                    in split_a, the rest in split_b (the within-thread split is known)
 *   blink:N          N threads one after another that do nothing and report nothing
 *                    (they end within microseconds, before a scheduler tick)
 *   main:MS          the main thread burns MS ms itself
 *   sleep:MS         the main thread sleeps MS ms
 *
 * Burning is measured with the thread's own CPU clock, so amounts hold under any
 * contention. Prints "ready" first.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static uint64_t cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static volatile uint64_t sink;

__attribute__((noinline)) void spin_leaf(void) {
    for (int i = 0; i < 2000; i++) sink += (uint64_t)i * i;
    __asm__ volatile("" ::: "memory");
}

/* Burns until the thread's CPU clock reaches `until`. */
__attribute__((noinline)) void burn_until(uint64_t until) {
    while (cpu_ns() < until) spin_leaf();
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void burn(uint64_t ns) {
    burn_until(cpu_ns() + ns);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void split_a(uint64_t until) {
    burn_until(until);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void split_b(uint64_t until) {
    burn_until(until);
    __asm__ volatile("" ::: "memory");
}

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static void report(const char *name) {
    uint64_t ns = cpu_ns();
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    pthread_mutex_lock(&out_lock);
    printf("cpu %ld %llu %s\n", (long)syscall(SYS_gettid), (unsigned long long)ns, name);
    /* Its context switches, voluntary and not: what counts miss is per switch. */
    printf("switches %ld %ld\n", (long)syscall(SYS_gettid), ru.ru_nvcsw + ru.ru_nivcsw);
    fflush(stdout);
    pthread_mutex_unlock(&out_lock);
}

struct job {
    char name[16];
    int kind; /* 0 burn, 1 bursty, 2 split */
    uint64_t ns, count, sleep_us, pct;
    pthread_barrier_t *start;
};

static void *worker(void *arg) {
    struct job *j = arg;
    prctl(PR_SET_NAME, j->name);
    if (j->start) pthread_barrier_wait(j->start);
    if (j->kind == 0) {
        burn(j->ns);
    } else if (j->kind == 1) {
        for (uint64_t i = 0; i < j->count; i++) {
            burn(j->ns);
            usleep((useconds_t)j->sleep_us);
        }
    } else {
        uint64_t end = cpu_ns() + j->ns;
        for (uint64_t t = cpu_ns(); t < end; t = cpu_ns()) {
            split_a(t + 10000 * j->pct);
            split_b(t + 1000000);
        }
    }
    report(j->name);
    return NULL;
}

static void *nothing(void *arg) {
    return arg;
}

static void run_threads(struct job *jobs, int n, int at_once) {
    pthread_t *t = calloc((size_t)n, sizeof *t);
    pthread_barrier_t b;
    if (at_once) pthread_barrier_init(&b, NULL, (unsigned)n);
    for (int i = 0; i < n; i++) {
        jobs[i].start = at_once ? &b : NULL;
        pthread_create(&t[i], NULL, worker, &jobs[i]);
        if (!at_once) pthread_join(t[i], NULL);
    }
    if (at_once)
        for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    free(t);
}

int main(int argc, char **argv) {
    printf("ready\n");
    fflush(stdout);
    for (int i = 1; i < argc; i++) {
        char kind[16] = "";
        double a = 0, b = 0, c = 0;
        if (sscanf(argv[i], "%15[^:]:%lf:%lf:%lf", kind, &a, &b, &c) < 2) {
            fprintf(stderr, "bad case %s\n", argv[i]);
            return 2;
        }
        if (!strcmp(kind, "main")) {
            burn((uint64_t)(a * 1e6));
            continue;
        }
        if (!strcmp(kind, "sleep")) {
            usleep((useconds_t)(a * 1e3));
            continue;
        }
        if (!strcmp(kind, "blink")) {
            for (int k = 0; k < (int)a; k++) {
                pthread_t t;
                pthread_create(&t, NULL, nothing, NULL);
                pthread_join(t, NULL);
            }
            continue;
        }
        int n = !strcmp(kind, "busy") || !strcmp(kind, "short") ? (int)a : 1;
        struct job *jobs = calloc((size_t)n, sizeof *jobs);
        for (int k = 0; k < n; k++) {
            struct job *j = &jobs[k];
            if (!strcmp(kind, "busy") || !strcmp(kind, "short")) {
                snprintf(j->name, sizeof j->name, "%s%d", kind, k);
                j->ns = (uint64_t)(b * 1e6);
            } else if (!strcmp(kind, "bursty")) {
                snprintf(j->name, sizeof j->name, "bursty");
                j->kind = 1;
                j->count = (uint64_t)a;
                j->ns = (uint64_t)(b * 1e3);
                j->sleep_us = (uint64_t)c;
            } else if (!strcmp(kind, "split")) {
                snprintf(j->name, sizeof j->name, "split");
                j->kind = 2;
                j->ns = (uint64_t)(a * 1e6);
                j->pct = (uint64_t)b;
            } else {
                fprintf(stderr, "unknown case %s\n", kind);
                return 2;
            }
        }
        run_threads(jobs, n, !strcmp(kind, "busy"));
        free(jobs);
    }
    report("main");
    return 0;
}
