/* Targets for the fault tests (tests/it/faults.rs; faultlib.c is the library). Prints "ready" when running.
 *
 *   target zombie        the main thread exits (pthread_exit) and leaves thread
 *                        "burner" spinning in burn_zombie(): a zombie leader
 *   target jit           code copied into anonymous executable memory runs there
 *                        (what a JIT does); it has no perf map of its own
 *   target dlopen LIB    thread "libcaller" calls lib_hot() of shared library LIB
 *   target spin          the main thread spins in spin_main()
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#define BARRIER() __asm__ volatile("" ::: "memory")
static volatile unsigned long sink;

__attribute__((noinline)) void burn_zombie(void) {
    for (int i = 0; i < 100000; i++) sink += (unsigned long)i * 3;
    BARRIER();
}

static void *burner(void *arg) {
    (void)arg;
    prctl(PR_SET_NAME, "burner");
    for (;;) { burn_zombie(); BARRIER(); }
    return NULL;
}

__attribute__((noinline)) void spin_main(void) {
    for (int i = 0; i < 100000; i++) sink += (unsigned long)i * 5;
    BARRIER();
}

static void *lib_caller(void *arg) {
    void (*hot)(void) = (void (*)(void))arg;
    prctl(PR_SET_NAME, "libcaller");
    for (;;) { hot(); BARRIER(); }
    return NULL;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc < 2) return 2;
    if (!strcmp(argv[1], "zombie")) {
        pthread_t t;
        pthread_create(&t, NULL, burner, NULL);
        usleep(100000);
        printf("ready\n");
        pthread_exit(NULL);
    }
    if (!strcmp(argv[1], "jit")) {
        /* mov ecx, 1000000; 1: dec ecx; jnz 1b; ret */
        static const unsigned char code[] = {0xb9, 0x40, 0x42, 0x0f, 0x00, 0xff, 0xc9,
                                             0x75, 0xfc, 0xc3};
        unsigned char *mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED) return 1;
        memcpy(mem, code, sizeof code);
        printf("ready\n");
        void (*fn)(void) = (void (*)(void))mem;
        for (;;) { fn(); BARRIER(); }
    }
    if (!strcmp(argv[1], "dlopen") && argc > 2) {
        void *h = dlopen(argv[2], RTLD_NOW);
        if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
        void (*hot)(void) = (void (*)(void))dlsym(h, "lib_hot");
        if (!hot) return 1;
        pthread_t t;
        pthread_create(&t, NULL, lib_caller, (void *)hot);
        usleep(100000);
        printf("ready\n");
        for (;;) pause();
    }
    if (!strcmp(argv[1], "spin")) {
        printf("ready\n");
        for (;;) { spin_main(); BARRIER(); }
    }
    return 2;
}
