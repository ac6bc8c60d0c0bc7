/* The CPU-bound workload of the overhead, recorder-cost, post-processing and size
 * benchmarks: THREADS threads doing fixed work units (a few levels of calls, a libc
 * qsort, a hash loop) in code built without frame pointers. After WARMUP seconds it
 * counts the units all threads finish in the next MEASURE seconds and prints
 * "units_per_sec N", then exits. MEASURE 0 runs until killed (for attach-mode runs);
 * MEASURE -T runs until killed and prints "tick SECONDS UNITS" every T seconds (the
 * CLOCK_MONOTONIC time and the units done so far), from which the overhead benchmark
 * takes the throughput of any interval while recorders attach and detach.
 *
 * usage: spin THREADS WARMUP MEASURE
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64

static _Atomic uint64_t units[MAX_THREADS];
static atomic_int stop;

__attribute__((noinline)) static uint64_t mix(uint64_t x, int rounds) {
    for (int i = 0; i < rounds; i++) {
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdULL;
        x ^= x >> 29;
    }
    return x;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

__attribute__((noinline)) static uint64_t sort_block(uint64_t seed) {
    uint32_t v[256];
    for (int i = 0; i < 256; i++) v[i] = (uint32_t)mix(seed + i, 1);
    qsort(v, 256, sizeof v[0], cmp_u32);
    return v[128];
}

__attribute__((noinline)) static uint64_t descend(uint64_t seed, int depth) {
    if (depth == 0) return mix(seed, 2000) + sort_block(seed);
    volatile char pad[64];
    pad[0] = (char)seed;
    return descend(seed * 31 + pad[0], depth - 1) + 1;
}

__attribute__((noinline)) static uint64_t unit(uint64_t seed) {
    return descend(seed, 1 + (int)(seed % 6));
}

static void *worker(void *arg) {
    int id = (int)(intptr_t)arg;
    uint64_t seed = (uint64_t)id * 7919, sink = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        sink += unit(seed++);
        atomic_fetch_add_explicit(&units[id], 1, memory_order_relaxed);
    }
    return (void *)(uintptr_t)sink;
}

static uint64_t total(int n) {
    uint64_t t = 0;
    for (int i = 0; i < n; i++) t += atomic_load(&units[i]);
    return t;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: spin THREADS WARMUP MEASURE\n");
        return 2;
    }
    int n = atoi(argv[1]);
    double warmup = atof(argv[2]), measure = atof(argv[3]);
    if (n < 1 || n > MAX_THREADS) return 2;
    pthread_t t[MAX_THREADS];
    for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    if (measure == 0) {
        for (;;) pause();
    }
    if (measure < 0) {
        for (;;) {
            sleep_s(-measure);
            printf("tick %.6f %llu\n", now(), (unsigned long long)total(n));
            fflush(stdout);
        }
    }
    sleep_s(warmup);
    uint64_t u0 = total(n);
    double t0 = now();
    sleep_s(measure);
    uint64_t u1 = total(n);
    double t1 = now();
    atomic_store(&stop, 1);
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    printf("units_per_sec %.1f\n", (u1 - u0) / (t1 - t0));
    return 0;
}
