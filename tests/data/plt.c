/* Test target for PLT stub names: the main thread, renamed "copier", calls libc's
 * memcpy through the PLT in a tight loop (main -> copy_loop -> memcpy@plt -> memcpy),
 * so a good share of its samples land in the stub itself. Build with -fno-builtin so
 * that every memcpy is a call. Prints "ready".
 */
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

static char src[16], dst[16];

__attribute__((noinline)) void copy_loop(void) {
    for (int i = 0; i < 100000; i++) {
        memcpy(dst, src, (size_t)(i & 7));
        __asm__ volatile("" ::: "memory");
    }
}

int main(void) {
    prctl(PR_SET_NAME, "copier");
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        copy_loop();
        __asm__ volatile("" ::: "memory");
    }
}
