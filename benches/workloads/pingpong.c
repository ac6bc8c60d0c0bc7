/* The switch-heavy workload of the off-CPU overhead benchmark: two threads pass a
 * byte back and forth through two pipes, so each blocks in read() and is woken by the
 * other, tens of thousands of times a second. After WARMUP seconds it counts round
 * trips for MEASURE seconds and prints "round_trips_per_sec N", then the process's
 * CPU time (its threads', user and kernel) per round trip in that window,
 * "cpu_ns_per_trip N": what each trip costs the target whatever else the machine
 * runs (the kernel's work at a switch or a wake-up is charged to the task it runs
 * in, so pinned to one CPU every switch is charged to a pingpong thread), then exits. Each
 * side does WORK rounds of a hash loop per trip (default 10000, about 15 µs), which
 * sets the switch rate: some 25,000 round trips, 50,000 switch-outs a second here.
 *
 * usage: pingpong WARMUP MEASURE [WORK]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int to_pong[2], to_ping[2];
static atomic_ulong trips;
static atomic_int stop;
static int work = 10000;
static volatile unsigned long sink;

__attribute__((noinline)) static void compute(void) {
    unsigned long x = sink;
    for (int i = 0; i < work; i++) {
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdULL;
    }
    sink = x;
}

__attribute__((noinline)) static void pong(void) {
    char c;
    while (read(to_pong[0], &c, 1) == 1) {
        compute();
        if (write(to_ping[1], &c, 1) != 1) break;
    }
}

static void *pong_thread(void *a) {
    (void)a;
    pong();
    return 0;
}

__attribute__((noinline)) static void ping(void) {
    char c = 'x';
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        compute();
        if (write(to_pong[1], &c, 1) != 1 || read(to_ping[0], &c, 1) != 1) break;
        atomic_fetch_add_explicit(&trips, 1, memory_order_relaxed);
    }
}

static void *ping_thread(void *a) {
    (void)a;
    ping();
    return 0;
}

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void nap(double secs) {
    struct timespec ts = {(time_t)secs, (long)((secs - (time_t)secs) * 1e9)};
    nanosleep(&ts, 0);
}

int main(int argc, char **argv) {
    double warmup = argc > 1 ? atof(argv[1]) : 0.5;
    double measure = argc > 2 ? atof(argv[2]) : 3;
    if (argc > 3) work = atoi(argv[3]);
    if (pipe(to_pong) || pipe(to_ping)) return 1;
    pthread_t a, b;
    pthread_create(&b, 0, pong_thread, 0);
    pthread_create(&a, 0, ping_thread, 0);
    nap(warmup);
    unsigned long t0 = atomic_load(&trips);
    double s0 = now(), c0 = cpu_now();
    nap(measure);
    unsigned long t1 = atomic_load(&trips);
    double s1 = now(), c1 = cpu_now();
    printf("round_trips_per_sec %.0f\n", (t1 - t0) / (s1 - s0));
    if (t1 > t0) printf("cpu_ns_per_trip %.0f\n", (c1 - c0) * 1e9 / (t1 - t0));
    fflush(stdout);
    atomic_store(&stop, 1);
    pthread_join(a, 0);
    close(to_pong[1]);
    pthread_join(b, 0);
    return 0;
}
