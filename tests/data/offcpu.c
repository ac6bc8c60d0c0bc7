// Threads whose off-CPU states are known by construction, for `record --off-cpu`:
//   spin-a, spin-b  both pinned to the last CPU: each runs about half the time and is
//                   runnable (preempted) the other half, in spin_here
//   sleeper         nanosleep in sleep_here: asleep nearly all the time
//   holder          holds a mutex while it sleeps 200 ms, then lets go for 1 ms
//   waiter          blocks in wait_for_lock on that mutex: lock nearly all the time
//   piper           blocks in read_pipe on a pipe: io
//   socker          blocks in recv_socket on a socket: io
//   feeder          writes a byte to the pipe and the socket every 100 ms (asleep
//                   otherwise), so piper and socker block again and again
//   idler           blocks in idle_here in epoll_wait on an epoll set with nothing
//                   in it, for good: an event loop's idle wait, never switched while
//                   recorded, so its stack is the one read from /proc at the attach
//                   (built with frame pointers, its CFI needs rbp, which /proc does
//                   not give)
// main prints "ready" once all are started, then sleeps until killed (or for argv[1]
// seconds), 100 ms at a time.
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int pipe_fds[2];
static int sock_fds[2];
static volatile unsigned long sink;

static void nap_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, 0);
}

__attribute__((noinline)) void spin_here(void) {
    for (;;) sink++;
}

__attribute__((noinline)) void sleep_here(void) {
    for (;;) nap_ms(100);
}

__attribute__((noinline)) void hold_lock(void) {
    for (;;) {
        pthread_mutex_lock(&lock);
        nap_ms(200);
        pthread_mutex_unlock(&lock);
        nap_ms(1);
    }
}

__attribute__((noinline)) void wait_for_lock(void) {
    for (;;) {
        pthread_mutex_lock(&lock);
        pthread_mutex_unlock(&lock);
        // Let the holder take it again first (it naps 1 ms between its turns).
        nap_ms(2);
    }
}

__attribute__((noinline)) void read_pipe(void) {
    char buf[64];
    for (;;)
        if (read(pipe_fds[0], buf, sizeof buf) <= 0) return;
}

__attribute__((noinline)) void recv_socket(void) {
    char buf[64];
    for (;;)
        if (recv(sock_fds[0], buf, sizeof buf, 0) <= 0) return;
}

__attribute__((noinline)) void idle_here(void) {
    struct epoll_event ev;
    int ep = epoll_create1(0);
    for (;;)
        if (epoll_wait(ep, &ev, 1, -1) < 0) return;
}

static void pin_last_cpu(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(n > 1 ? n - 1 : 0, &set);
    sched_setaffinity(0, sizeof set, &set);
}

static void *spinner(void *a) { (void)a; pin_last_cpu(); spin_here(); return 0; }
static void *sleeper(void *a) { (void)a; sleep_here(); return 0; }
static void *holder(void *a) { (void)a; hold_lock(); return 0; }
static void *waiter(void *a) { (void)a; nap_ms(20); wait_for_lock(); return 0; }
static void *piper(void *a) { (void)a; read_pipe(); return 0; }
static void *socker(void *a) { (void)a; recv_socket(); return 0; }
static void *idler(void *a) { (void)a; idle_here(); return 0; }
static void *feeder(void *a) {
    (void)a;
    for (;;) {
        nap_ms(100);
        if (write(pipe_fds[1], "x", 1) != 1 || send(sock_fds[1], "x", 1, 0) != 1) return 0;
    }
}

int main(int argc, char **argv) {
    if (pipe(pipe_fds) || socketpair(AF_UNIX, SOCK_STREAM, 0, sock_fds)) return 1;
    struct { const char *name; void *(*fn)(void *); } threads[] = {
        {"spin-a", spinner}, {"spin-b", spinner}, {"sleeper", sleeper},
        {"holder", holder}, {"waiter", waiter}, {"piper", piper}, {"socker", socker},
        {"feeder", feeder}, {"idler", idler},
    };
    for (unsigned i = 0; i < sizeof threads / sizeof threads[0]; i++) {
        pthread_t t;
        pthread_create(&t, 0, threads[i].fn, 0);
        pthread_setname_np(t, threads[i].name);
    }
    nap_ms(50);
    printf("ready\n");
    fflush(stdout);
    double secs = argc > 1 ? atof(argv[1]) : 1e6;
    for (double slept = 0; slept < secs; slept += 0.1) nap_ms(100);
    return 0;
}
