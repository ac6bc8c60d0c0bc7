/* A shared library for the fault tests: lib_hot burns CPU. Its symbol table and
 * DWARF sit after its loadable segments, where a truncation can cut them without
 * touching the code the target runs. Built with -g3: the macro tables push the symbol
 * table and section headers pages past the code, where a cut file faults. */
static volatile unsigned long lib_sink;

__attribute__((noinline)) void lib_hot(void) {
    for (int i = 0; i < 100000; i++) lib_sink += (unsigned long)i * 11;
    __asm__ volatile("" ::: "memory");
}
