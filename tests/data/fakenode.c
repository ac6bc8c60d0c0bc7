// A process that passes for Node to profile's V8 reader (issue 47): named `node`, it
// exports V8's postmortem symbols (v8dbg_*, Node 20's values) and spins in a function
// named Builtins_InterpreterEntryTrampoline whose frame is shaped like V8's
// interpreter's (context, function, bytecode array and offset below the frame
// pointer). Another thread keeps rewriting the function slot among forged objects:
// functions named by a fresh string each (4096 of them, 200 bytes each: more names
// than a small budget keeps), a cons string that is its own halves, a string that
// claims 2 GiB, a function whose map is not a map, and a pointer to nothing.
// Prints "ready", runs until killed.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define V(name, value) int v8dbg_##name = value;
V(TaggedSize, 8)
V(SystemPointerSize, 8)
V(SmiShiftSize, 31)
V(SmiTagSize, 1)
V(HeapObjectTagMask, 3)
V(HeapObjectTag, 1)
V(SmiTagMask, 1)
V(SmiTag, 0)
V(off_fp_context_or_frame_type, -8)
V(off_fp_function, -16)
V(off_fp_bytecode_array, -32)
V(off_fp_bytecode_offset, -40)
V(class_HeapObject__map__Map, 0)
V(class_Map__instance_type__uint16_t, 12)
V(class_JSFunction__shared__SharedFunctionInfo, 24)
V(class_SharedFunctionInfo__name_or_scope_info__Object, 16)
V(class_SharedFunctionInfo__script_or_debug_info__HeapObject, 32)
V(class_Script__name__Object, 16)
V(class_String__length__int32_t, 12)
V(class_SeqOneByteString__chars__char, 16)
V(class_SeqTwoByteString__chars__char, 16)
V(class_ConsString__first__String, 16)
V(class_ConsString__second__String, 24)
V(class_ThinString__actual__String, 16)
V(type_JSFunction__JS_FUNCTION_TYPE, 2066)
V(type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE, 262)
V(type_Script__SCRIPT_TYPE, 167)
V(type_ScopeInfo__SCOPE_INFO_TYPE, 261)
V(type_BytecodeArray__BYTECODE_ARRAY_TYPE, 191)
V(type_Map__MAP_TYPE, 255)
V(FirstNonstringType, 128)
V(StringRepresentationMask, 7)
V(SeqStringTag, 0)
V(ConsStringTag, 1)
V(SlicedStringTag, 3)
V(ThinStringTag, 5)
V(StringEncodingMask, 8)
V(OneByteStringTag, 8)
V(frametype_EntryFrame, 1)
V(frametype_InterpretedFrame, 13)
V(scopeinfo_idx_first_vars, 3)
V(scopeinfo_idx_ncontextlocals, 2)

#define NAMES 4096
#define OBJ 32 // words per object

static uint64_t heap[(NAMES * 3 + 64) * OBJ] __attribute__((aligned(64)));
static size_t next_obj;
// context, function, bytecode array, bytecode offset: what the frame holds.
static volatile uint64_t slots[4];

static uint64_t *alloc(void) { return &heap[(next_obj++) * OBJ]; }
static uint64_t tag(uint64_t *p) { return (uint64_t)p | 1; }

static uint64_t map_of(uint64_t meta, uint16_t type) {
  uint64_t *m = alloc();
  m[0] = meta;
  m[1] = (uint64_t)type << 32;
  return tag(m);
}

static uint64_t function(uint64_t fn_map, uint64_t sfi_map, uint64_t name) {
  uint64_t *sfi = alloc();
  sfi[0] = sfi_map;
  sfi[2] = name;
  uint64_t *fn = alloc();
  fn[0] = fn_map;
  fn[3] = tag(sfi);
  return tag(fn);
}

void Builtins_InterpreterEntryTrampoline(volatile uint64_t *s);
__asm__(".text\n"
        ".globl Builtins_InterpreterEntryTrampoline\n"
        ".type Builtins_InterpreterEntryTrampoline, @function\n"
        "Builtins_InterpreterEntryTrampoline:\n"
        "  push %rbp\n"
        "  mov %rsp, %rbp\n"
        "  sub $48, %rsp\n"
        "1:\n"
        "  mov 0(%rdi), %rax\n"
        "  mov %rax, -8(%rbp)\n"
        "  mov 8(%rdi), %rax\n"
        "  mov %rax, -16(%rbp)\n"
        "  mov 16(%rdi), %rax\n"
        "  mov %rax, -32(%rbp)\n"
        "  mov 24(%rdi), %rax\n"
        "  mov %rax, -40(%rbp)\n"
        "  pause\n"
        "  jmp 1b\n"
        ".size Builtins_InterpreterEntryTrampoline, .-Builtins_InterpreterEntryTrampoline\n");

static uint64_t fns[NAMES], bad[4];

static void *mutate(void *arg) {
  (void)arg;
  for (uint64_t i = 0;; i++) {
    slots[1] = (i % 8 == 7) ? bad[(i / 8) % 4] : fns[i % NAMES];
    usleep(200);
  }
  return NULL;
}

int main(void) {
  uint64_t *meta = alloc();
  meta[0] = tag(meta);
  meta[1] = (uint64_t)255 << 32;
  uint64_t fn_map = map_of(tag(meta), 2066), sfi_map = map_of(tag(meta), 262);
  uint64_t str_map = map_of(tag(meta), 8), cons_map = map_of(tag(meta), 1);
  uint64_t bc_map = map_of(tag(meta), 191);
  for (int i = 0; i < NAMES; i++) {
    uint64_t *s = alloc();
    s[0] = str_map;
    s[1] = (uint64_t)200 << 32;
    char *chars = (char *)&s[2];
    memset(chars, 'x', 200);
    snprintf(chars, 200, "forged_%04d_", i);
    chars[strlen(chars)] = 'x';
    fns[i] = function(fn_map, sfi_map, tag(s));
  }
  // A cons string whose halves are itself.
  uint64_t *cons = alloc();
  cons[0] = cons_map;
  cons[1] = (uint64_t)8 << 32;
  cons[2] = cons[3] = tag(cons);
  bad[0] = function(fn_map, sfi_map, tag(cons));
  // A string that claims 2 GiB.
  uint64_t *huge = alloc();
  huge[0] = str_map;
  huge[1] = (uint64_t)0x7fffffff << 32;
  bad[1] = function(fn_map, sfi_map, tag(huge));
  // A function whose map's map is a string's map, not the meta map.
  uint64_t *fake_map = alloc();
  fake_map[0] = str_map;
  fake_map[1] = (uint64_t)2066 << 32;
  bad[2] = function(tag(fake_map), sfi_map, fns[0]);
  // Nothing there.
  bad[3] = 0x41414141 | 1;

  uint64_t *bc = alloc();
  bc[0] = bc_map;
  slots[0] = tag(meta); // a context: any heap object
  slots[1] = fns[0];
  slots[2] = tag(bc);
  slots[3] = 0; // Smi 0
  pthread_t t;
  pthread_create(&t, NULL, mutate, NULL);
  printf("ready\n");
  fflush(stdout);
  Builtins_InterpreterEntryTrampoline(slots);
  return 0;
}
