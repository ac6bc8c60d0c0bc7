/* Test target with known call chains, one named thread per mode:
 *
 *   chains MODE...      MODE: worker main qsort deep syscalls inline spawn
 *
 *   worker    thread "worker":   worker_main -> level_a -> level_b -> level_c (hot)
 *   main      the main thread:   main -> level_a -> level_b -> level_c
 *   qsort     thread "sorter":   qsort(...) calls cmp_ints (hot) through libc
 *   deep      thread "deep":     recurse() 3000 levels deep, 200 bytes a frame, hot bottom()
 *   syscalls  thread "sys":      sys_loop -> write(2) to /dev/null (time in the kernel)
 *   inline    thread "inl":      outer_static -> always-inlined helper_inlined (hot)
 *   spawn     thread "spawner":  spawn_one -> pthread_create (time in clone3) and join
 *
 * No frame is a tail call (every call is followed by a compiler barrier), so the
 * expected chains are exact. Prints "ready" when every mode runs.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#define BARRIER() __asm__ volatile("" ::: "memory")
static volatile unsigned long sink;

__attribute__((noinline)) void level_c(void) {
    for (int i = 0; i < 100000; i++) sink += (unsigned long)i * 7;
    BARRIER();
}
__attribute__((noinline)) void level_b(void) { level_c(); BARRIER(); }
__attribute__((noinline)) void level_a(void) { level_b(); BARRIER(); }

static void *worker_main(void *arg) {
    (void)arg;
    prctl(PR_SET_NAME, "worker");
    for (;;) { level_a(); BARRIER(); }
    return NULL;
}

__attribute__((noinline)) int cmp_ints(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    for (int i = 0; i < 20; i++) sink += i;
    return (x > y) - (x < y);
}

static void *sorter_main(void *arg) {
    (void)arg;
    prctl(PR_SET_NAME, "sorter");
    enum { N = 4096 };
    static int v[N];
    for (unsigned seed = 1;; seed++) {
        for (int i = 0; i < N; i++) v[i] = (int)((i * 2654435761u) ^ seed);
        qsort(v, N, sizeof v[0], cmp_ints);
        BARRIER();
    }
    return NULL;
}

__attribute__((noinline)) void bottom(void) {
    for (int i = 0; i < 100000; i++) sink += (unsigned long)i;
    BARRIER();
}

__attribute__((noinline)) void recurse(int depth) {
    volatile char pad[200];
    pad[0] = (char)depth;
    if (depth > 0) recurse(depth - 1); else bottom();
    BARRIER();
    sink += pad[0];
}

static void *deep_main(void *arg) {
    (void)arg;
    prctl(PR_SET_NAME, "deep");
    for (;;) { recurse(3000); BARRIER(); }
    return NULL;
}

__attribute__((noinline)) void sys_loop(int fd) {
    char buf[64] = {0};
    for (int i = 0; i < 1000; i++) {
        if (write(fd, buf, sizeof buf) < 0) abort();
    }
    BARRIER();
}

static void *sys_main(void *arg) {
    (void)arg;
    prctl(PR_SET_NAME, "sys");
    int fd = open("/dev/null", O_WRONLY);
    for (;;) { sys_loop(fd); BARRIER(); }
    return NULL;
}

static inline __attribute__((always_inline)) void helper_inlined(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) sink += i * i;
}

__attribute__((noinline)) static void outer_static(void) {
    helper_inlined(100000);
    BARRIER();
}

static void *inline_main(void *arg) {
    (void)arg;
    prctl(PR_SET_NAME, "inl");
    for (;;) { outer_static(); BARRIER(); }
    return NULL;
}

static void *nothing(void *arg) { return arg; }

__attribute__((noinline)) void spawn_one(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, nothing, NULL) == 0) pthread_join(t, NULL);
    BARRIER();
}

static void *spawner_main(void *arg) {
    (void)arg;
    prctl(PR_SET_NAME, "spawner");
    for (;;) { spawn_one(); BARRIER(); }
    return NULL;
}

int main(int argc, char **argv) {
    int on_main = 0;
    pthread_t t;
    for (int i = 1; i < argc; i++) {
        const char *m = argv[i];
        if (!strcmp(m, "worker")) pthread_create(&t, NULL, worker_main, NULL);
        else if (!strcmp(m, "qsort")) pthread_create(&t, NULL, sorter_main, NULL);
        else if (!strcmp(m, "deep")) {
            pthread_attr_t a;
            pthread_attr_init(&a);
            pthread_attr_setstacksize(&a, 8 << 20);
            pthread_create(&t, &a, deep_main, NULL);
        } else if (!strcmp(m, "syscalls")) pthread_create(&t, NULL, sys_main, NULL);
        else if (!strcmp(m, "inline")) pthread_create(&t, NULL, inline_main, NULL);
        else if (!strcmp(m, "spawn")) pthread_create(&t, NULL, spawner_main, NULL);
        else if (!strcmp(m, "main")) on_main = 1;
        else { fprintf(stderr, "unknown mode %s\n", m); return 2; }
    }
    printf("ready\n");
    fflush(stdout);
    if (on_main)
        for (;;) { level_a(); BARRIER(); }
    for (;;) pause();
}
