/* The accuracy workload: a split of CPU known by construction. Three threads with
 * different duty cycles ("busy100", "busy60", "busy30" run 100%, 60% and 30% of the
 * time) each call burn_a, burn_b and burn_c with work in the ratio 50:30:20, timing
 * every call with the thread's CPU clock. After SECS seconds every thread prints its
 * CPU time from /proc/self/task/TID/schedstat ("thread NAME TID NS") and the program
 * prints each function's measured CPU time ("func NAME NS"): the truth the profilers'
 * per-thread and per-function shares are compared with.
 *
 * usage: split SECS
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static _Atomic uint64_t func_ns[3];
static double seconds;
static pthread_mutex_t out = PTHREAD_MUTEX_INITIALIZER;

static uint64_t cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

#define BURN(name)                                                  \
    __attribute__((noinline)) uint64_t name(uint64_t x, long n) {   \
        for (long i = 0; i < n; i++) {                              \
            x ^= x >> 31;                                           \
            x *= 0x9e3779b97f4a7c15ULL;                             \
        }                                                           \
        return x;                                                   \
    }
BURN(burn_a)
BURN(burn_b)
BURN(burn_c)

static uint64_t (*const funcs[3])(uint64_t, long) = {burn_a, burn_b, burn_c};
static const long weight[3] = {50, 30, 20};

struct spec {
    const char *name;
    int duty; /* percent of wall time busy */
};

static void *worker(void *arg) {
    const struct spec *s = arg;
    pthread_setname_np(pthread_self(), s->name);
    uint64_t x = 1;
    double end = now() + seconds;
    while (now() < end) {
        uint64_t busy0 = cpu_ns();
        double wall0 = now();
        for (int f = 0; f < 3; f++) {
            uint64_t c0 = cpu_ns();
            x = funcs[f](x, weight[f] * 20000);
            atomic_fetch_add(&func_ns[f], cpu_ns() - c0);
        }
        if (s->duty < 100) {
            double busy = (cpu_ns() - busy0) / 1e9;
            double idle = busy * (100 - s->duty) / s->duty - (now() - wall0 - busy);
            if (idle > 0) {
                struct timespec ts = {0, (long)(idle * 1e9)};
                nanosleep(&ts, NULL);
            }
        }
    }
    unsigned long long run = 0;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%ld/schedstat", (long)syscall(SYS_gettid));
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%llu", &run) != 1) run = 0;
        fclose(f);
    }
    pthread_mutex_lock(&out);
    printf("thread %s %ld %llu\n", s->name, (long)syscall(SYS_gettid), run);
    pthread_mutex_unlock(&out);
    return (void *)(uintptr_t)x;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: split SECS\n");
        return 2;
    }
    seconds = atof(argv[1]);
    static const struct spec specs[3] = {{"busy100", 100}, {"busy60", 60}, {"busy30", 30}};
    pthread_t t[3];
    for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, worker, (void *)&specs[i]);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    static const char *names[3] = {"burn_a", "burn_b", "burn_c"};
    for (int i = 0; i < 3; i++) printf("func %s %llu\n", names[i], (unsigned long long)func_ns[i]);
    return 0;
}
