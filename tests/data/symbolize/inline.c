/* Fixture for the symbolizer tests (compiled with gcc -O2 -g into a tempdir).
 * Modes: no argument runs the work once; "qsort" prints the return address of the
 * qsort comparison callback (an address inside libc) and waits for stdin to close;
 * "sleep" prints "ready" and waits for stdin to close. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *volatile callback_return;

static inline __attribute__((always_inline)) int helper(int x)
{
    int acc = 0;
    for (int i = 0; i < x; i++)
        acc += (i * x) ^ (acc >> 3);
    return acc;
}

__attribute__((noinline)) int caller(int x)
{
    return helper(x) * 3 + helper(x + 7);
}

static __attribute__((noinline)) long static_function(long v)
{
    long r = 1;
    for (long i = 0; i < v; i++)
        r = r * 31 + (r >> 7) + i;
    return r;
}

static int compare_ints(const void *a, const void *b)
{
    callback_return = __builtin_return_address(0);
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static void wait_for_stdin(void)
{
    char buf[64];
    while (fgets(buf, sizeof buf, stdin))
        ;
}

int main(int argc, char **argv)
{
    int values[64];
    for (int i = 0; i < 64; i++)
        values[i] = (i * 7919) % 101;
    qsort(values, 64, sizeof values[0], compare_ints);
    if (argc > 1 && strcmp(argv[1], "qsort") == 0) {
        printf("%p\n", callback_return);
        fflush(stdout);
        wait_for_stdin();
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "sleep") == 0) {
        printf("ready\n");
        fflush(stdout);
        wait_for_stdin();
        return 0;
    }
    printf("%d %ld %d\n", caller(argc + 40), static_function(argc * 1000), values[3]);
    return 0;
}
