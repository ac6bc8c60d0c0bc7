/* Test target: named threads that burn known amounts of their own CPU time.
 *
 *   threads [--go-on-usr1] [--exit-after SECS] [--exit-code N] NAME:BUSY_MS:IDLE_MS[:DELAY_MS[:RENAME_MS:NEWNAME]] ...
 *
 * Each thread repeatedly burns BUSY_MS of its own CPU time (measured with
 * CLOCK_THREAD_CPUTIME_ID, so shares hold under any contention) in
 * burn_top -> burn_middle -> burn_leaf, then sleeps IDLE_MS. A thread with DELAY_MS is
 * created that long after the go; with RENAME_MS it renames itself once it has burnt
 * that much of its own CPU time since the go (CPU time, so that a loaded machine
 * cannot starve it of samples before the rename). The go is the start, or with
 * --go-on-usr1 the arrival of SIGUSR1 (a test sends it once its recorder has
 * attached): the threads without DELAY_MS run before it, and DELAY_MS, RENAME_MS and
 * --exit-after count from it.
 * With --relay the threads started at once take turns (one burns while the others
 * wait), so their CPU split is exactly the ratio of their BUSY_MS whatever else the
 * machine runs. Prints "ready" once the first threads run. The main thread sleeps.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static double now(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static volatile unsigned long sink;
static volatile sig_atomic_t go = 1;

static void on_usr1(int sig) { (void)sig; go = 1; }

__attribute__((noinline)) void burn_leaf(void) {
    for (int i = 0; i < 20000; i++) sink += (unsigned long)i * i;
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void burn_middle(double secs) {
    double end = now(CLOCK_THREAD_CPUTIME_ID) + secs;
    while (now(CLOCK_THREAD_CPUTIME_ID) < end) burn_leaf();
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void burn_top(double secs) {
    burn_middle(secs);
    __asm__ volatile("" ::: "memory");
}

struct spec {
    char name[16], rename[16];
    double busy, idle, delay, rename_after;
    int relay_index;
};

static int relay_count, relay_turn;
static pthread_mutex_t relay_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t relay_cond = PTHREAD_COND_INITIALIZER;

static void relay_loop(struct spec *s) {
    for (;;) {
        pthread_mutex_lock(&relay_lock);
        while (relay_turn != s->relay_index) pthread_cond_wait(&relay_cond, &relay_lock);
        pthread_mutex_unlock(&relay_lock);
        burn_top(s->busy);
        pthread_mutex_lock(&relay_lock);
        relay_turn = (relay_turn + 1) % relay_count;
        pthread_cond_broadcast(&relay_cond);
        pthread_mutex_unlock(&relay_lock);
    }
}

static void *worker(void *arg) {
    struct spec *s = arg;
    prctl(PR_SET_NAME, s->name);
    if (s->relay_index >= 0) relay_loop(s);
    double cpu_at_go = go ? now(CLOCK_THREAD_CPUTIME_ID) : -1;
    int renamed = 0;
    for (;;) {
        burn_top(s->busy);
        if (s->idle > 0) usleep((useconds_t)(s->idle * 1e6));
        if (cpu_at_go < 0 && go) cpu_at_go = now(CLOCK_THREAD_CPUTIME_ID);
        if (!renamed && s->rename_after > 0 && cpu_at_go >= 0 &&
            now(CLOCK_THREAD_CPUTIME_ID) - cpu_at_go >= s->rename_after) {
            prctl(PR_SET_NAME, s->rename);
            renamed = 1;
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    double exit_after = 0;
    int exit_code = 0, n = 0, relay = 0;
    struct spec specs[64];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--exit-after") && i + 1 < argc) { exit_after = atof(argv[++i]); continue; }
        if (!strcmp(argv[i], "--exit-code") && i + 1 < argc) { exit_code = atoi(argv[++i]); continue; }
        if (!strcmp(argv[i], "--relay")) { relay = 1; continue; }
        if (!strcmp(argv[i], "--go-on-usr1")) { go = 0; signal(SIGUSR1, on_usr1); continue; }
        struct spec *s = &specs[n++];
        memset(s, 0, sizeof *s);
        double busy = 0, idle = 0, delay = 0, rename_after = 0;
        char name[16] = "", rename[16] = "";
        sscanf(argv[i], "%15[^:]:%lf:%lf:%lf:%lf:%15s", name, &busy, &idle, &delay, &rename_after, rename);
        strcpy(s->name, name);
        strcpy(s->rename, rename);
        s->busy = busy / 1000;
        s->idle = idle / 1000;
        s->delay = delay / 1000;
        s->rename_after = rename_after / 1000;
        s->relay_index = (relay && delay == 0) ? relay_count++ : -1;
    }
    pthread_t t;
    for (int i = 0; i < n; i++)
        if (specs[i].delay == 0) pthread_create(&t, NULL, worker, &specs[i]);
    printf("ready\n");
    fflush(stdout);
    while (!go) usleep(1000);
    double start = now(CLOCK_MONOTONIC);
    for (int i = 0; i < n; i++) {
        if (specs[i].delay == 0) continue;
        double wait = start + specs[i].delay - now(CLOCK_MONOTONIC);
        if (wait > 0) usleep((useconds_t)(wait * 1e6));
        pthread_create(&t, NULL, worker, &specs[i]);
    }
    if (exit_after > 0) {
        double wait = start + exit_after - now(CLOCK_MONOTONIC);
        if (wait > 0) usleep((useconds_t)(wait * 1e6));
        return exit_code;
    }
    for (;;) pause();
}
