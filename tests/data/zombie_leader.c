/* Test target: a process whose main thread has exited while a worker lives on, as Go
 * programs and servers that call pthread_exit from main do: the leader is a zombie,
 * /proc/PID/maps and /proc/PID/mem read nothing, and the process is read through the
 * worker's /proc/PID/task/TID/.
 *
 *   zombie_leader [NAME]
 *
 * The worker (named NAME, "worker" by default; a name may hold any byte but NUL, as
 * prctl(PR_SET_NAME) allows, and is cut to 15 bytes) sleeps in sleep_here <- worker.
 * Prints "ready" once the main thread is about to exit; the test waits for the
 * leader to be a zombie.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

static const char *name = "worker";

__attribute__((noinline)) void sleep_here(void) {
    for (;;) usleep(100000);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void *worker(void *arg) {
    (void)arg;
    prctl(PR_SET_NAME, name, 0, 0, 0);
    sleep_here();
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) name = argv[1];
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    printf("ready\n");
    fflush(stdout);
    pthread_exit(NULL);
}
