// A process that passes for CRuby 3.1 to profile's Ruby reader (issue 49): named
// `ruby`, it exports ruby_version ("3.1.2"), ruby_current_vm_ptr and rb_vm_exec, and
// spins inside rb_vm_exec over a forged VM whose main ractor lists its thread. Another
// thread keeps rewriting what the reader follows: a frame of `forged` (a valid
// chain), a label that claims 2 GiB, a thread list that loops on itself, a current
// frame outside the VM stack, an instruction sequence that is no object, labels fresh
// each time (more names than a small budget keeps). Prints "ready", runs until killed.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

const char ruby_version[] = "3.1.2";
void *ruby_current_vm_ptr;

static uint64_t heap[1 << 16] __attribute__((aligned(64)));
static uint64_t stack[0x1000] __attribute__((aligned(64)));
static volatile uint64_t sink;

#define AT(base, off) (*(volatile uint64_t *)((char *)(base) + (off)))
#define T_STRING 0x05
#define T_IMEMO 0x1a

static char *vm, *ractor, *th, *ec, *iseq, *body, *label, *path;
static uint64_t *leaf_cfp;

// An embedded String holding `s` (at most 23 bytes).
static void embedded(char *at, const char *s) {
    size_t n = strlen(s);
    AT(at, 0) = T_STRING | (uint64_t)n << 14;
    memcpy(at + 16, s, n);
}

static void forge(void) {
    char *h = (char *)heap;
    vm = h, ractor = h + 0x1000, th = h + 0x2000, ec = h + 0x3000;
    iseq = h + 0x4000, body = h + 0x4100, label = h + 0x4200, path = h + 0x4300;
    ruby_current_vm_ptr = vm;
    AT(vm, 32) = (uint64_t)ractor;
    AT(ractor, 304) = (uint64_t)th;
    AT(th, 0) = (uint64_t)(ractor + 304);
    AT(th, 40) = (uint64_t)ec;
    *(volatile int *)(th + 88) = gettid();
    AT(ec, 0) = (uint64_t)stack;
    AT(ec, 8) = 0x1000;
    // Two frames below the dummy at the base: `forged`, then a FINISH frame.
    leaf_cfp = stack + 0x1000 - 3 * 8;
    AT(ec, 16) = (uint64_t)leaf_cfp;
    for (int k = 0; k < 3; k++) {
        uint64_t *cfp = leaf_cfp + k * 8;
        uint64_t *ep = stack + 0x40 + k * 8;
        cfp[0] = (uint64_t)(h + 0x5000 + 8);
        cfp[2] = (uint64_t)iseq;
        cfp[4] = (uint64_t)ep;
        ep[0] = k == 1 ? 0x20 : 0;
    }
    AT(iseq, 0) = T_IMEMO | 7 << 12;
    AT(iseq, 16) = (uint64_t)body;
    *(volatile uint32_t *)(body + 4) = 8;
    AT(body, 8) = (uint64_t)(h + 0x5000);
    embedded(path, "/srv/forged.rb");
    AT(body, 64) = (uint64_t)path;
    embedded(label, "forged");
    AT(body, 80) = (uint64_t)label;
    AT(body, 88) = 7 << 1 | 1;
    AT(body, 176) = (uint64_t)iseq;
}

static void *mutate(void *arg) {
    (void)arg;
    char name[24];
    for (uint64_t round = 0;; round++) {
        // Back to the valid chain, then one forgery.
        AT(th, 0) = (uint64_t)(ractor + 304);
        AT(ec, 16) = (uint64_t)leaf_cfp;
        AT(iseq, 0) = T_IMEMO | 7 << 12;
        embedded(label, "forged");
        usleep(500);
        switch (round % 5) {
        case 0: // A label of 2 GiB on the heap.
            AT(label, 0) = T_STRING | 1 << 13;
            AT(label, 16) = 1ull << 31;
            AT(label, 24) = (uint64_t)path;
            break;
        case 1: // The thread list loops on the thread, which is not the one sampled.
            AT(th, 0) = (uint64_t)th;
            break;
        case 2: // The current frame outside the VM stack.
            AT(ec, 16) = 8;
            break;
        case 3: // An instruction sequence that is no object.
            AT(iseq, 0) = 0x1234;
            break;
        case 4: // A fresh name.
            snprintf(name, sizeof name, "forged_%llu", (unsigned long long)round);
            embedded(label, name);
            break;
        }
        usleep(500);
    }
    return NULL;
}

__attribute__((noinline)) static void spin(void) {
    for (int i = 0; i < 100000; i++) {
        sink += i;
    }
}

__attribute__((noinline)) void rb_vm_exec(void) {
    for (;;) {
        spin();
    }
}

// Never called: the reader looks for the symbol table in the code it jumps to.
unsigned long rb_id2str(unsigned long id) { return id + sink; }

int main(void) {
    forge();
    pthread_t t;
    pthread_create(&t, NULL, mutate, NULL);
    printf("ready\n");
    fflush(stdout);
    rb_vm_exec();
}
