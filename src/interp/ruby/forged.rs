//! A CRuby 3.1 process forged in memory, for the unit tests and the `ruby` fuzz
//! target (fuzz/src/ruby.rs): the library's symbols and data, a VM whose main
//! ractor lists one thread ([`TID`]), and that thread's VM stack of four frames, leaf
//! first: `block in outer` (a `vm_exec` began with it), `Array#each` (a C method),
//! `outer` and `<main>` (a `vm_exec` began with it), each object typed as Ruby types
//! it, with the global symbol table that names `each`. The fuzz target patches it.

use super::layout::{RUBY_3_1, Symbols};
use crate::interp::Snapshot;

/// The forged thread's kernel id.
pub const TID: u32 = 1;
/// Where the library is (load bias 0): its symbols and data.
pub const LIB: u64 = 0x10_0000;
/// `rb_vm_exec`'s code range.
pub const VM_EXEC: (u64, u64) = (LIB + 0x1000, LIB + 0x2000);
/// The heap: the VM, ractor, thread, execution context, objects.
pub const HEAP: u64 = 0x20_0000;
/// The VM stack.
pub const STACK: u64 = 0x30_0000;
/// Its size in VALUEs.
pub const STACK_VALUES: u64 = 0x1000;
/// The control frame of the leaf (the sample's `r15`).
pub const LEAF_CFP: u64 = STACK + STACK_VALUES * 8 - 5 * 64;
/// A pc in the leaf's instructions (the sample's `r14`).
pub const LEAF_PC: u64 = HEAP + 0x5000 + 16;

const LIB_LEN: usize = 0x4000;
const HEAP_LEN: usize = 0x10000;
const T_STRING: u64 = 0x05;
const T_ARRAY: u64 = 0x07;
const T_IMEMO: u64 = 0x1a;

/// The library's symbols as [`Symbols::from_elf`] would give them.
pub fn symbols() -> Symbols {
    Symbols {
        version: LIB,
        vm_ptr: LIB + 0x10,
        vm_exec: VM_EXEC,
        id2str: LIB + 0x3000,
        classes: vec![(LIB + 0x20, "Array".into())],
    }
}

struct Region {
    at: u64,
    bytes: Vec<u8>,
}

impl Region {
    fn put(&mut self, addr: u64, b: &[u8]) {
        let off = (addr - self.at) as usize;
        self.bytes[off..off + b.len()].copy_from_slice(b);
    }

    fn word(&mut self, addr: u64, v: u64) {
        self.put(addr, &v.to_le_bytes());
    }

    /// An embedded String at `addr`.
    fn string(&mut self, addr: u64, s: &str) -> u64 {
        self.word(addr, T_STRING | (s.len() as u64) << 14);
        self.put(addr + 16, s.as_bytes());
        addr
    }

    /// An instruction sequence at `iseq` (its body 0x100 further, its instructions
    /// at `code`, 8 VALUEs), labelled `label`, in `home` (itself when 0).
    fn iseq(&mut self, iseq: u64, code: u64, label: &str, line: u64, home: u64) {
        let l = RUBY_3_1;
        let body = iseq + 0x100;
        self.word(iseq, T_IMEMO | 7 << 12);
        self.word(iseq + l.iseq_body, body);
        self.put(body + l.body_size, &8u32.to_le_bytes());
        self.word(body + l.body_encoded, code);
        let path = self.string(iseq + 0x200, "/srv/app.rb");
        self.word(body + l.body_path, path);
        let label = self.string(iseq + 0x240, label);
        self.word(body + l.body_label, label);
        self.word(body + l.body_first_line, line << 1 | 1);
        // Two line entries: the line, then the line after from instruction 4.
        let (insns, positions) = (iseq + 0x280, iseq + 0x2c0);
        self.put(insns, &(line as u32).to_le_bytes());
        self.put(insns + l.insn_entry_size, &(line as u32 + 1).to_le_bytes());
        self.put(positions, &0u32.to_le_bytes());
        self.put(positions + 4, &4u32.to_le_bytes());
        self.word(body + l.body_insns, insns);
        self.word(body + l.body_positions, positions);
        self.put(body + l.body_insns_size, &2u32.to_le_bytes());
        self.word(body + l.body_local, if home == 0 { iseq } else { home });
    }
}

/// The forged process's memory.
pub fn memory() -> Snapshot {
    let l = RUBY_3_1;
    let mut lib = Region {
        at: LIB,
        bytes: vec![0; LIB_LEN],
    };
    let mut heap = Region {
        at: HEAP,
        bytes: vec![0; HEAP_LEN],
    };
    let mut stack = Region {
        at: STACK,
        bytes: vec![0; (STACK_VALUES * 8) as usize],
    };
    let (vm, ractor, th, ec) = (HEAP, HEAP + 0x1000, HEAP + 0x2000, HEAP + 0x3000);
    let array_class = HEAP + 0xf000;
    lib.put(LIB, b"3.1.2\0");
    lib.word(LIB + 0x10, vm);
    lib.word(LIB + 0x20, array_class);
    // rb_id2str: `jmp` to the lookup, which compares with the table's `last_id` and
    // loads its `ids` 16 bytes on, both RIP-relative.
    let (id2str, lookup, table) = (LIB + 0x3000, LIB + 0x3100, LIB + 0x3800);
    lib.put(id2str, &[0xe9]);
    lib.put(id2str + 1, &((lookup - id2str - 5) as i32).to_le_bytes());
    lib.put(lookup, &[0x39, 0x3d]);
    lib.put(lookup + 2, &((table - (lookup + 6)) as i32).to_le_bytes());
    lib.put(lookup + 6, &[0x48, 0x8b, 0x3d]);
    lib.put(
        lookup + 9,
        &((table + 16 - (lookup + 13)) as i32).to_le_bytes(),
    );
    lib.put(lookup + 13, &[0xc3]);
    // The symbol table: `each` is serial 1000, in the second chunk of 512.
    let (ids, chunk, names) = (HEAP + 0x8000, HEAP + 0x8100, HEAP + 0x9000);
    lib.put(table, &2000u32.to_le_bytes());
    lib.word(table + 16, ids);
    heap.word(ids, T_ARRAY);
    heap.word(ids + l.ary_len, 2);
    heap.word(ids + l.ary_ptr, ids + 0x40);
    heap.word(ids + 0x48, chunk);
    heap.word(chunk, T_ARRAY);
    heap.word(chunk + l.ary_len, 1024);
    heap.word(chunk + l.ary_ptr, names);
    let each = heap.string(HEAP + 0xe000, "each");
    heap.word(names + (1000 % 512) * 2 * 8, each);

    heap.word(vm + l.vm_main_ractor, ractor);
    let head = ractor + l.ractor_threads;
    heap.word(head, th + l.th_node);
    heap.word(th + l.th_node, head);
    heap.word(th + l.th_ec, ec);
    heap.put(th + l.th_tid, &TID.to_le_bytes());
    heap.word(ec + l.ec_stack, STACK);
    heap.word(ec + l.ec_stack_size, STACK_VALUES);
    heap.word(ec + l.ec_cfp, LEAF_CFP);

    let (main, outer, block) = (HEAP + 0x4000, HEAP + 0x4400, HEAP + 0x4800);
    heap.iseq(main, HEAP + 0x5100, "<main>", 1, 0);
    heap.iseq(outer, HEAP + 0x5200, "outer", 2, 0);
    heap.iseq(block, HEAP + 0x5000, "block in outer", 3, outer);
    let (me, def) = (HEAP + 0x6000, HEAP + 0x6100);
    heap.word(me, T_IMEMO | 6 << 12);
    heap.word(me + l.me_def, def);
    heap.word(me + l.me_owner, array_class);
    heap.word(def + l.def_original_id, 1000 << 4);

    // Frames, leaf first: (iseq, pc, env flags, method entry).
    const FINISH: u64 = 0x20;
    let frames = [
        (block, LEAF_PC, FINISH, 0),
        (0, 0, 0x5555_0001, me),
        (outer, HEAP + 0x5200 + 24, 0, 0),
        (main, HEAP + 0x5100 + 8, FINISH, 0),
        (0, 0, 0, 0),
    ];
    for (k, (iseq, pc, flags, me)) in frames.into_iter().enumerate() {
        let cfp = LEAF_CFP + k as u64 * l.cfp_size;
        let ep = STACK + 0x100 + k as u64 * 0x40;
        stack.word(cfp + l.cfp_pc, pc);
        stack.word(cfp + l.cfp_iseq, iseq);
        stack.word(cfp + l.cfp_ep, ep);
        stack.word(ep, flags);
        stack.word(ep - 16, me);
    }
    let mut snap = Snapshot::default();
    for r in [lib, heap, stack] {
        snap.insert(r.at, r.bytes);
    }
    snap
}
