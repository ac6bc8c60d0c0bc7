// argv[1] threads (default 1000) parked on one condition variable in park_here (wait),
// for `profile dump` at scale. Prints "ready" once all are started, then sleeps until
// killed.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int started;

__attribute__((noinline)) void park_here(void) {
    pthread_mutex_lock(&m);
    started++;
    for (;;) pthread_cond_wait(&c, &m);
}

static void *parked(void *a) { (void)a; park_here(); return 0; }

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    for (int i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, parked, 0)) return 1;
    }
    for (;;) {
        pthread_mutex_lock(&m);
        int s = started;
        pthread_mutex_unlock(&m);
        if (s == n) break;
        usleep(1000);
    }
    printf("ready\n");
    fflush(stdout);
    for (;;) pause();
}
