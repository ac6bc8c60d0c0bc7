// A busy CPU, for `record --off-cpu`'s runnable time: every thread is pinned to one
// CPU (the last), where two hogs spin, so each wake-up queues behind them.
//   hog-a, hog-b  spin: running or preempted (runnable)
//   sleeper       sleeps 2 ms in a loop, then writes a byte to the pipe and signals
//                 the condition variable
//   piper         blocks reading the pipe: io, runnable after each byte
//   waiter        waits on the condition variable for work: idle (`wait`)
//   fight-a/b     take one mutex and hold it across a 1 ms sleep: each blocks on the
//                 other's hold (`lock`)
// Every thread runs for argv[1] seconds (default 2), then reads its own
// /proc/thread-self/schedstat and writes "name tid run_ns delay_ns life_ns" to the
// file argv[2] (stdout without it), and exits. main prints "ready" once every thread
// is started, then waits for them. life_ns is from just before its
// pthread_create to that read, by CLOCK_MONOTONIC.
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t fight = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cv_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static int work;
static int pipe_fds[2];
static volatile unsigned long sink;
static double seconds = 2;
static FILE *out;
static struct timespec start_all;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static double deadline(void) {
    return start_all.tv_sec + start_all.tv_nsec / 1e9 + seconds;
}

static void nap_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
    nanosleep(&ts, 0);
}

static void pin_last_cpu(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(n > 1 ? n - 1 : 0, &set);
    sched_setaffinity(0, sizeof set, &set);
}

// Reads this thread's schedstat and writes its line.
static void report(const char *name, double born) {
    unsigned long long run = 0, delay = 0;
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    if (f) {
        if (fscanf(f, "%llu %llu", &run, &delay) != 2) run = delay = 0;
        fclose(f);
    }
    double life = now() - born;
    pthread_mutex_lock(&out_lock);
    fprintf(out, "%s %ld %llu %llu %.0f\n", name, (long)syscall(SYS_gettid), run, delay,
            life * 1e9);
    fflush(out);
    pthread_mutex_unlock(&out_lock);
}

__attribute__((noinline)) void hog_here(void) {
    double end = deadline();
    while (now() < end)
        for (int i = 0; i < 100000; i++) sink++;
}

__attribute__((noinline)) void sleep_here(void) {
    double end = deadline();
    while (now() < end) {
        nap_us(2000);
        if (write(pipe_fds[1], "x", 1) != 1) break;
        pthread_mutex_lock(&cv_lock);
        work++;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&cv_lock);
    }
    // Wake the reader and the waiter a last time: they see the end and leave.
    close(pipe_fds[1]);
    pthread_mutex_lock(&cv_lock);
    work = -1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&cv_lock);
}

__attribute__((noinline)) void read_pipe(void) {
    char buf[64];
    while (read(pipe_fds[0], buf, sizeof buf) > 0) sink++;
}

__attribute__((noinline)) void wait_for_work(void) {
    pthread_mutex_lock(&cv_lock);
    while (work >= 0) {
        while (work == 0) pthread_cond_wait(&cv, &cv_lock);
        if (work > 0) work = 0;
    }
    pthread_mutex_unlock(&cv_lock);
}

__attribute__((noinline)) void fight_for_lock(void) {
    double end = deadline();
    while (now() < end) {
        pthread_mutex_lock(&fight);
        nap_us(1000);
        pthread_mutex_unlock(&fight);
        for (int i = 0; i < 1000; i++) sink++;
    }
}

struct role {
    const char *name;
    void (*run)(void);
    double born;
};

static void *thread_main(void *a) {
    const struct role *r = a;
    double born = r->born;
    prctl(PR_SET_NAME, r->name);
    pin_last_cpu();
    r->run();
    report(r->name, born);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1) seconds = atof(argv[1]);
    out = argc > 2 ? fopen(argv[2], "w") : stdout;
    if (!out || pipe(pipe_fds)) return 1;
    clock_gettime(CLOCK_MONOTONIC, &start_all);
    static struct role roles[] = {
        {"hog-a", hog_here},        {"hog-b", hog_here},
        {"sleeper", sleep_here},    {"piper", read_pipe},
        {"waiter", wait_for_work},  {"fight-a", fight_for_lock},
        {"fight-b", fight_for_lock},
    };
    enum { N = sizeof roles / sizeof roles[0] };
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        roles[i].born = now();
        pthread_create(&t[i], 0, thread_main, &roles[i]);
    }
    printf("ready\n");
    fflush(stdout);
    for (int i = 0; i < N; i++) pthread_join(t[i], 0);
    return 0;
}
