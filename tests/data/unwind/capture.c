/* Fixture for the unwinder's tests: captures its own rip/rsp/rbp at a known point,
 * then writes them, a copy of the top of its stack and its /proc/self/maps to a
 * directory, and exits. The test unwinds the copy and checks the caller chain.
 *
 * usage: capture MODE OUTDIR
 *   main    chain c <- b <- a <- main <- __libc_start_call_main <- ... <- _start
 *   thread  chain c <- b <- a <- worker_fn <- start_thread <- clone3
 *   qsort   capture in the comparison callback (stack crosses libc)
 *   signal  capture in a SIGSEGV handler (stack crosses __restore_rt)
 *   deep    capture at the bottom of a recursion deeper than the copy
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COPY_MAX (64 * 1024)
#define NOINLINE __attribute__((noinline, noclone))

static const char *out_dir;

static void write_file(const char *name, const void *data, size_t len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", out_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        _exit(2);
    }
}

/* Writes regs.txt, stack.bin and maps.txt, then exits: nothing may return into the
 * frames that were captured. */
NOINLINE static void dump(uint64_t ip, uint64_t sp, uint64_t bp) {
    static char maps[1 << 20];
    FILE *f = fopen("/proc/self/maps", "r");
    size_t n = f ? fread(maps, 1, sizeof maps - 1, f) : 0;
    if (f) fclose(f);
    maps[n] = 0;
    write_file("maps.txt", maps, n);

    /* Clamp the copy to the end of the mapping that holds sp. */
    uint64_t end = sp + COPY_MAX;
    for (char *line = strtok(maps, "\n"); line; line = strtok(NULL, "\n")) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && sp >= lo && sp < hi) {
            if (hi < end) end = hi;
            break;
        }
    }
    write_file("stack.bin", (const void *)(uintptr_t)sp, end - sp);

    char regs[128];
    int len = snprintf(regs, sizeof regs, "%lx %lx %lx\n", (unsigned long)ip,
                       (unsigned long)sp, (unsigned long)bp);
    write_file("regs.txt", regs, (size_t)len);
    _exit(0);
}

/* Reads rip (the address right after the lea), rsp and rbp at this very point. */
#define CAPTURE()                                                                   \
    do {                                                                            \
        uint64_t ip_, sp_, bp_;                                                     \
        __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"       \
                         : "=r"(ip_), "=r"(sp_), "=r"(bp_));                        \
        dump(ip_, sp_, bp_);                                                        \
    } while (0)

volatile int sink;

NOINLINE int c(int x) {
    sink = x;
    CAPTURE();
    return sink + 1;
}

NOINLINE int b(int x) { return c(x + 1) * 3; }

NOINLINE int a(int x) { return b(x + 1) * 5; }

NOINLINE void *worker_fn(void *arg) {
    sink = a((int)(intptr_t)arg);
    return NULL;
}

NOINLINE int cmp(const void *l, const void *r) {
    CAPTURE();
    return *(const int *)l - *(const int *)r;
}

NOINLINE void touch(volatile char *pad) { sink += pad[0]; }

/* The pad lives across the recursive call, so every level keeps a real frame. */
NOINLINE int recurse(int depth) {
    volatile char pad[200];
    pad[0] = (char)depth;
    if (depth <= 0) {
        CAPTURE();
        return 0;
    }
    int r = recurse(depth - 1);
    touch(pad);
    return r;
}

NOINLINE static void on_segv(int sig) {
    (void)sig;
    CAPTURE();
}

int *volatile bad_pointer = (int *)16;

NOINLINE int victim(int x) {
    sink = x;
    *bad_pointer = x; /* faults: the handler runs on this stack */
    return sink;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s main|thread|qsort|signal|deep OUTDIR\n", argv[0]);
        return 2;
    }
    out_dir = argv[2];
    const char *mode = argv[1];
    if (!strcmp(mode, "main")) {
        sink = a(1);
    } else if (!strcmp(mode, "thread")) {
        pthread_t t;
        pthread_create(&t, NULL, worker_fn, (void *)1);
        pthread_join(t, NULL);
    } else if (!strcmp(mode, "qsort")) {
        int values[16];
        for (int i = 0; i < 16; i++) values[i] = (i * 7) % 16;
        qsort(values, 16, sizeof values[0], cmp);
        sink = values[0];
    } else if (!strcmp(mode, "signal")) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_segv;
        sigaction(SIGSEGV, &sa, NULL);
        sink = victim(3);
    } else if (!strcmp(mode, "deep")) {
        sink = recurse(2000);
    }
    fprintf(stderr, "capture: no capture happened in mode %s\n", mode);
    return 1;
}
