//! Where CRuby keeps what the reader needs, per version: the offsets of the fields of
//! the VM, its main ractor, each thread, execution context, control frame,
//! instruction sequence, method entry, class and string, and what the stripped
//! `libruby` still tells of itself in its dynamic symbols (`ruby_version`,
//! `ruby_current_vm_ptr`, `rb_vm_exec`, the core classes `rb_cObject`...). The
//! offsets were derived for x86-64 Linux from the struct definitions of each
//! version's headers (`vm_core.h`, `ractor_core.h`, `iseq.h`, `method.h`,
//! `internal/class.h`, `st.h`, `internal/string.h`) and checked against a running
//! Ruby's objects; a version without a table here is refused with a note saying which
//! it is.

use std::collections::HashMap;

/// Why a Ruby process's frames are not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RubyError {
    /// The file is no ELF file this reader can parse.
    #[error("not an ELF file: {0}")]
    NotElf(String),
    /// The library lacks a symbol the reader starts from.
    #[error("{0} is not among its dynamic symbols")]
    Missing(&'static str),
    /// `ruby_version` reads as no version.
    #[error("its ruby_version could not be read")]
    NoVersion,
    /// A version with no layout here.
    #[error("Ruby {0} is not a version whose layout is known (3.1 is)")]
    Unsupported(String),
}

/// Offsets of the fields read, in bytes, for one Ruby version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// `rb_vm_t.ractor.main_ractor`.
    pub vm_main_ractor: u64,
    /// `rb_vm_t.ractor.main_thread`.
    pub vm_main_thread: u64,
    /// `rb_ractor_t.threads.set` (a `list_head` of `rb_thread_t.lt_node`).
    pub ractor_threads: u64,
    /// `rb_thread_t.lt_node` (the list links).
    pub th_node: u64,
    /// `rb_thread_t.ec`.
    pub th_ec: u64,
    /// `rb_thread_t.tid` (the kernel's thread id, an int).
    pub th_tid: u64,
    /// `rb_execution_context_t.vm_stack`.
    pub ec_stack: u64,
    /// `rb_execution_context_t.vm_stack_size` (in VALUEs).
    pub ec_stack_size: u64,
    /// `rb_execution_context_t.cfp`.
    pub ec_cfp: u64,
    /// `rb_control_frame_t.pc`.
    pub cfp_pc: u64,
    /// `rb_control_frame_t.iseq`.
    pub cfp_iseq: u64,
    /// `rb_control_frame_t.ep`.
    pub cfp_ep: u64,
    /// `sizeof(rb_control_frame_t)`.
    pub cfp_size: u64,
    /// `rb_iseq_t.body`.
    pub iseq_body: u64,
    /// `rb_iseq_constant_body.type` (u32: `ISEQ_TYPE_METHOD` is 1).
    pub body_type: u64,
    /// `rb_iseq_constant_body.iseq_size` (u32, in VALUEs).
    pub body_size: u64,
    /// `rb_iseq_constant_body.iseq_encoded`.
    pub body_encoded: u64,
    /// `.location.pathobj` (a String, or an Array of path and real path).
    pub body_path: u64,
    /// `.location.label`.
    pub body_label: u64,
    /// `.location.first_lineno` (a Fixnum).
    pub body_first_line: u64,
    /// `.local_iseq` (the method or top a block belongs to; itself otherwise).
    pub body_local: u64,
    /// `.insns_info.body` (entries of `insn_entry_size` bytes, the line an int first).
    pub body_insns: u64,
    /// `.insns_info.positions` (u32 each; NULL once the succinct table replaced it).
    pub body_positions: u64,
    /// `.insns_info.size` (u32).
    pub body_insns_size: u64,
    /// `sizeof(struct iseq_insn_info_entry)`.
    pub insn_entry_size: u64,
    /// `rb_method_entry_t.def`.
    pub me_def: u64,
    /// `rb_method_entry_t.owner`.
    pub me_owner: u64,
    /// `rb_method_definition_t.original_id`.
    pub def_original_id: u64,
    /// `rb_method_definition_t.body.iseq.iseqptr` (a method written in Ruby).
    pub def_iseq: u64,
    /// `struct vm_svar.cref_or_me` (what a method frame keeps once it set `$~`).
    pub svar_me: u64,
    /// `RClass.ptr` (its `rb_classext_t`).
    pub class_ext: u64,
    /// `rb_classext_t.iv_tbl` (an `st_table` of ID → VALUE).
    pub ext_iv_tbl: u64,
    /// `st_table.entries_start`, `.entries_bound` and `.entries` (entries of three
    /// words: hash, key, value).
    pub st_entries: (u64, u64, u64),
    /// `RString.as.heap.len`.
    pub str_len: u64,
    /// `RString.as.heap.ptr`.
    pub str_ptr: u64,
    /// `RString.as.embed.ary`.
    pub str_embed: u64,
    /// Bytes an embedded string holds at most.
    pub str_embed_max: u64,
    /// `RArray.as.heap.len`.
    pub ary_len: u64,
    /// `RArray.as.heap.ptr`.
    pub ary_ptr: u64,
    /// `RArray.as.ary` (embedded elements).
    pub ary_embed: u64,
    /// The largest operator ID (`tLAST_OP_ID`): IDs above it carry a serial.
    pub last_op_id: u64,
}

/// Ruby 3.1 (x86-64 Linux, no RVARGC: Debian's build).
pub const RUBY_3_1: Layout = Layout {
    vm_main_ractor: 32,
    vm_main_thread: 40,
    ractor_threads: 304,
    th_node: 0,
    th_ec: 40,
    th_tid: 88,
    ec_stack: 0,
    ec_stack_size: 8,
    ec_cfp: 16,
    cfp_pc: 0,
    cfp_iseq: 16,
    cfp_ep: 32,
    cfp_size: 64,
    iseq_body: 16,
    body_type: 0,
    body_size: 4,
    body_encoded: 8,
    body_path: 64,
    body_label: 80,
    body_first_line: 88,
    body_local: 176,
    body_insns: 120,
    body_positions: 128,
    body_insns_size: 136,
    insn_entry_size: 12,
    me_def: 16,
    me_owner: 32,
    def_original_id: 32,
    def_iseq: 8,
    svar_me: 8,
    class_ext: 24,
    ext_iv_tbl: 8,
    st_entries: (32, 40, 48),
    str_len: 16,
    str_ptr: 24,
    str_embed: 16,
    str_embed_max: 23,
    ary_len: 16,
    ary_ptr: 32,
    ary_embed: 16,
    last_op_id: 0xa9,
};

/// The layout of Ruby `version` (`3.1.2`), if known.
pub fn layout_of(version: &str) -> Result<Layout, RubyError> {
    let mut parts = version.split('.');
    let major = parts.next().and_then(|p| p.parse::<u32>().ok());
    let minor = parts.next().and_then(|p| p.parse::<u32>().ok());
    match (major, minor) {
        (Some(3), Some(1)) => Ok(RUBY_3_1),
        _ => Err(RubyError::Unsupported(version.to_owned())),
    }
}

/// What a `libruby` (or a statically linked `ruby`) tells of itself: file addresses
/// (before the load bias) of what the reader starts from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Symbols {
    /// `ruby_version` (a NUL-terminated string such as `3.1.2`).
    pub version: u64,
    /// `ruby_current_vm_ptr` (a pointer to the VM).
    pub vm_ptr: u64,
    /// `rb_vm_exec`: each of its frames runs one stretch of Ruby frames.
    pub vm_exec: (u64, u64),
    /// `rb_id2str`: it jumps to the lookup that names the symbol table.
    pub id2str: u64,
    /// The core classes and modules by their exported variables (`rb_cArray` →
    /// `Array`), to name a C method's owner.
    pub classes: Vec<(u64, String)>,
}

/// Whether the file at `path` may hold CRuby by its name (`libruby.so.3.1`,
/// `libruby-3.1.so.3.1.2`, a static `ruby` binary is read too).
pub fn is_ruby(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or_default();
    file.starts_with("libruby") && file.contains(".so")
        || file == "ruby"
        || file
            .strip_prefix("ruby")
            .is_some_and(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

impl Symbols {
    /// The symbols of ELF image `image` (headers and dynamic symbol table).
    pub fn from_elf(image: &[u8]) -> Result<Symbols, RubyError> {
        use object::{Object, ObjectSymbol};
        let file = object::File::parse(image).map_err(|e| RubyError::NotElf(e.to_string()))?;
        let mut found: HashMap<&str, (u64, u64)> = HashMap::new();
        let mut classes = Vec::new();
        let mut symbols: Vec<_> = file.dynamic_symbols().collect();
        if symbols.is_empty() {
            symbols = file.symbols().collect();
        }
        for s in &symbols {
            let Ok(name) = s.name() else { continue };
            if s.address() == 0 {
                continue;
            }
            match name {
                "ruby_version" | "ruby_current_vm_ptr" | "rb_vm_exec" | "rb_id2str" => {
                    found.insert(name, (s.address(), s.size()));
                }
                _ => {
                    let short = name
                        .strip_prefix("rb_c")
                        .or_else(|| name.strip_prefix("rb_m"));
                    if let Some(short) = short
                        && s.size() == 8
                        && short.starts_with(|c: char| c.is_ascii_uppercase())
                        && short.chars().all(|c| c.is_ascii_alphanumeric())
                    {
                        classes.push((s.address(), short.to_owned()));
                    }
                }
            }
        }
        let get = |n: &'static str| found.get(n).copied().ok_or(RubyError::Missing(n));
        let (vm_exec, size) = get("rb_vm_exec")?;
        classes.sort();
        Ok(Symbols {
            version: get("ruby_version")?.0,
            vm_ptr: get("ruby_current_vm_ptr")?.0,
            vm_exec: (vm_exec, vm_exec.saturating_add(size.max(1))),
            id2str: get("rb_id2str").map_or(0, |s| s.0),
            classes,
        })
    }
}

/// The address of the global symbol table (`ruby_global_symbols`, hidden in a
/// stripped library) found in the code of the lookup `rb_id2str` jumps to: it
/// compares the ID's serial with the table's `last_id` and loads its `ids` 16 bytes
/// further, both RIP-relative. `code` holds the bytes at `at` (`rb_id2str`'s first
/// 32 bytes, then `follow` gives the bytes of its jump target). None unless exactly
/// that pattern is found; the caller checks what it points at before use.
pub fn symbol_table_in(
    at: u64,
    code: &[u8],
    follow: &dyn Fn(u64) -> Option<Vec<u8>>,
) -> Option<u64> {
    // rb_id2str: a few instructions, then `jmp rel32` to the lookup.
    let jmp = code.iter().position(|&b| b == 0xe9)?;
    let rel = i32::from_le_bytes(code.get(jmp + 1..jmp + 5)?.try_into().ok()?);
    let target = at
        .checked_add(jmp as u64 + 5)?
        .checked_add_signed(i64::from(rel))?;
    let body = follow(target)?;
    // Every 4-byte window read as a RIP-relative displacement ending its instruction.
    // Data, not the code scanned (zero bytes read as small displacements), aligned.
    let code = target..target.saturating_add(body.len() as u64 + 64);
    let targets: Vec<u64> = (0..body.len().saturating_sub(3))
        .filter_map(|p| {
            let d = i32::from_le_bytes(body[p..p + 4].try_into().ok()?);
            target
                .checked_add(p as u64 + 4)?
                .checked_add_signed(i64::from(d))
        })
        .filter(|t| t % 8 == 0 && !code.contains(t))
        .collect();
    let mut found = targets
        .iter()
        .copied()
        .filter(|&t| targets.contains(&t.wrapping_add(16)));
    let first = found.next()?;
    // Two such pairs would be a guess.
    found.all(|t| t == first).then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_names() {
        assert_eq!(layout_of("3.1.2"), Ok(RUBY_3_1));
        assert!(matches!(
            layout_of("2.6.10"),
            Err(RubyError::Unsupported(v)) if v == "2.6.10"
        ));
        assert!(layout_of("").is_err());
        assert!(is_ruby("/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1.2"));
        assert!(is_ruby("/opt/ruby/bin/ruby"));
        assert!(is_ruby("/usr/bin/ruby3.1"));
        assert!(!is_ruby("/usr/bin/rubyx") && !is_ruby("/usr/lib/libc.so.6"));
    }

    /// The pattern of Debian's 3.1 (`cmp %edi,X(%rip)` … `mov X+16(%rip),%rdi`).
    #[test]
    fn symbol_table_from_code() {
        // At 0x1000: mov %rdi,%rax; jmp 0x2000.
        let mut id2str = vec![0x48, 0x89, 0xf8, 0xe9];
        id2str.extend_from_slice(&(0x2000i32 - 0x1008).to_le_bytes());
        let lookup = |at: u64| -> Option<Vec<u8>> {
            assert_eq!(at, 0x2000);
            // cmp %edi,0x5000(%rip) at 0x2002; mov 0x5010(%rip),%rdi at 0x2008.
            let mut b = vec![0x90, 0x90, 0x39, 0x3d];
            b.extend_from_slice(&(0x5000i32 - 0x2008).to_le_bytes());
            b.extend_from_slice(&[0x48, 0x8b, 0x3d]);
            b.extend_from_slice(&(0x5010i32 - 0x200f).to_le_bytes());
            b.extend_from_slice(&[0xc3; 16]);
            Some(b)
        };
        assert_eq!(symbol_table_in(0x1000, &id2str, &lookup), Some(0x5000));
        assert_eq!(symbol_table_in(0x1000, &[0x90; 8], &lookup), None);
    }
}
