/* Test workload for `profile diff`: a benchmark of fixed work in three functions.
 *
 *   bench [--rounds N] [--slower NAME:PCT]
 *
 * main runs N rounds (default 1000); each round calls f1, f2 and f3, which do the same
 * fixed amount of arithmetic each (a dependent multiply-add chain the compiler cannot
 * fold or vectorize), so each takes about a third of the CPU time. `--slower f2:30`
 * makes f2 do 30% more iterations: a regression of known size in one function
 * (repeat it for several: `--slower f1:200 --slower f3:200` leaves f2 a seventh). The
 * same can be compiled in with -DSLOWER_FN=2 -DSLOWER_PCT=30 (an "injected slowdown"
 * in a build). Single-threaded; prints the checksum so the work is not optimized out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SLOWER_FN
#define SLOWER_FN 0
#endif
#ifndef SLOWER_PCT
#define SLOWER_PCT 0
#endif

#define ITERATIONS 250000UL

static unsigned long extra[4];

#define CHAIN(n, x)                                                     \
    for (unsigned long i = 0; i < (n); i++) {                           \
        x = x * 6364136223846793005UL + 1442695040888963407UL;          \
        x ^= x >> 29;                                                   \
    }

__attribute__((noinline)) unsigned long f1(unsigned long x) {
    CHAIN(ITERATIONS + extra[1], x);
    __asm__ volatile("" : "+r"(x));
    return x;
}

__attribute__((noinline)) unsigned long f2(unsigned long x) {
    CHAIN(ITERATIONS + extra[2], x);
    __asm__ volatile("" : "+r"(x));
    return x;
}

__attribute__((noinline)) unsigned long f3(unsigned long x) {
    CHAIN(ITERATIONS + extra[3], x);
    __asm__ volatile("" : "+r"(x));
    return x;
}

int main(int argc, char **argv) {
    long rounds = 1000;
    int slower = SLOWER_FN, pct = SLOWER_PCT;
    if (slower >= 1 && slower <= 3) extra[slower] = ITERATIONS * (unsigned long)pct / 100;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            rounds = atol(argv[++i]);
        } else if (!strcmp(argv[i], "--slower") && i + 1 < argc) {
            if (sscanf(argv[++i], "f%d:%d", &slower, &pct) != 2 || slower < 1 || slower > 3) {
                fprintf(stderr, "bench: --slower wants f1|f2|f3:PCT\n");
                return 2;
            }
            extra[slower] = ITERATIONS * (unsigned long)pct / 100;
        } else {
            fprintf(stderr, "usage: bench [--rounds N] [--slower fN:PCT]\n");
            return 2;
        }
    }
    unsigned long x = 1;
    for (long r = 0; r < rounds; r++) {
        x = f1(x);
        x = f2(x);
        x = f3(x);
    }
    printf("%lu\n", x);
    return 0;
}
