//! A HotSpot `Method*` named from outside: the offsets taken from the VM's own tables
//! ([`Layout`]), the method checked to be one its class holds (the class's method
//! array has it at its id number, and the class's constant pool is the method's), then
//! named as the perf map names compiled methods (`long Chain.recurse(int, long)`), and
//! a bytecode index turned into a line through the method's compressed line table.
//! Anything that does not check out is an error, never a guess.

use super::vmstructs::{VmError, VmStructs};
use crate::interp::{Memory, Overlay};

/// Longest symbol read (class, method names and signatures).
const MAX_SYMBOL: usize = 4096;
/// The most bytes of one structure read at once ([`at_once`]).
const MAX_AT_ONCE: usize = 1024;
/// Bytes of a symbol's body read with its length (most names are shorter).
const SYMBOL_AHEAD: u64 = 56;
/// Most bytes of a line number table decoded.
const MAX_LINE_TABLE: usize = 1 << 16;
/// Most methods of a class searched for a method not at its id number.
const MAX_METHODS: i32 = 65_536;

/// The offsets and sizes of HotSpot's structures that naming a method needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    method_const_method: u64,
    const_method_size: u64,
    const_method_constants: u64,
    const_method_flags: u64,
    const_method_code_size: u64,
    const_method_name_index: u64,
    const_method_signature_index: u64,
    const_method_idnum: u64,
    has_line_table: u16,
    cp_size: u64,
    cp_holder: u64,
    cp_tags: u64,
    cp_length: u64,
    cp_source_file: u64,
    utf8_tag: u8,
    klass_name: u64,
    ik_methods: u64,
    ik_constants: u64,
    array_methods_data: u64,
    symbol_length: u64,
    symbol_body: u64,
}

impl Layout {
    /// The layout from the VM's tables; an error names what is missing.
    pub fn new(vm: &VmStructs) -> Result<Layout, VmError> {
        let flag = vm.int("ConstMethod::_has_linenumber_table")?;
        let utf8 = vm.int("JVM_CONSTANT_Utf8")?;
        Ok(Layout {
            method_const_method: vm.offset("Method::_constMethod")?,
            const_method_size: vm.size("ConstMethod")?,
            const_method_constants: vm.offset("ConstMethod::_constants")?,
            const_method_flags: vm.offset("ConstMethod::_flags")?,
            const_method_code_size: vm.offset("ConstMethod::_code_size")?,
            const_method_name_index: vm.offset("ConstMethod::_name_index")?,
            const_method_signature_index: vm.offset("ConstMethod::_signature_index")?,
            const_method_idnum: vm.offset("ConstMethod::_method_idnum")?,
            has_line_table: u16::try_from(flag)
                .map_err(|_| VmError::Malformed("VMIntConstants", "line table flag"))?,
            cp_size: vm.size("ConstantPool")?,
            cp_holder: vm.offset("ConstantPool::_pool_holder")?,
            cp_tags: vm.offset("ConstantPool::_tags")?,
            cp_length: vm.offset("ConstantPool::_length")?,
            cp_source_file: vm.offset("ConstantPool::_source_file_name_index")?,
            utf8_tag: u8::try_from(utf8)
                .map_err(|_| VmError::Malformed("VMIntConstants", "utf8 tag"))?,
            klass_name: vm.offset("Klass::_name")?,
            ik_methods: vm.offset("InstanceKlass::_methods")?,
            ik_constants: vm.offset("InstanceKlass::_constants")?,
            array_methods_data: vm.offset("Array<Method*>::_data")?,
            symbol_length: vm.offset("Symbol::_length")?,
            symbol_body: vm.offset("Symbol::_body")?,
        })
    }
}

/// A method found valid: what names it, and where its bytecode is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodInfo {
    /// As the perf map writes it: `long Chain.recurse(int, long)`.
    pub name: String,
    /// The class's source file (`Chain.java`), when it has one.
    pub file: Option<String>,
    /// Address of the first bytecode.
    pub code_start: u64,
    /// Bytes of bytecode.
    pub code_size: u64,
    flags: u16,
}

impl MethodInfo {
    /// The bytes it and its line table `lines` keep.
    pub fn bytes(&self, lines: &[(u32, u32)]) -> usize {
        std::mem::size_of::<MethodInfo>()
            + self.name.len()
            + self.file.as_ref().map_or(0, String::len)
            + std::mem::size_of_val(lines)
    }

    /// The bytecode index of `bcp` if it points into the method's bytecode.
    pub fn bci(&self, bcp: u64) -> Option<u32> {
        let off = bcp.checked_sub(self.code_start)?;
        (off < self.code_size).then_some(off as u32)
    }
}

/// Reads and checks `method`, a `Method*` of the JVM whose memory is `mem`. None if it
/// is not a method its class holds (freed, reused, garbage).
pub fn read_method(mem: &dyn Memory, l: &Layout, method: u64) -> Option<MethodInfo> {
    if method == 0 || !method.is_multiple_of(8) {
        return None;
    }
    let cm = mem.u64_at(method.wrapping_add(l.method_const_method))?;
    // Each structure's fields read at once where they can be (each then alone).
    let cm_fields = [
        l.const_method_constants,
        l.const_method_idnum,
        l.const_method_name_index,
        l.const_method_signature_index,
        l.const_method_code_size,
        l.const_method_flags,
    ];
    let cm_bytes = at_once(mem, cm, &cm_fields);
    let cmm = Overlay {
        sp: cm,
        stack: &cm_bytes,
        rest: mem,
    };
    let cp = cmm.u64_at(cm.checked_add(l.const_method_constants)?)?;
    let cp_bytes = at_once(
        mem,
        cp,
        &[l.cp_holder, l.cp_length, l.cp_tags, l.cp_source_file],
    );
    let cpm = Overlay {
        sp: cp,
        stack: &cp_bytes,
        rest: mem,
    };
    let holder = cpm.u64_at(cp.checked_add(l.cp_holder)?)?;
    if cm == 0 || cp == 0 || holder == 0 {
        return None;
    }
    let k_bytes = at_once(mem, holder, &[l.ik_constants, l.ik_methods, l.klass_name]);
    let km = Overlay {
        sp: holder,
        stack: &k_bytes,
        rest: mem,
    };
    // The class's constant pool is the method's, and the class holds the method.
    if km.u64_at(holder.checked_add(l.ik_constants)?)? != cp {
        return None;
    }
    let methods = km.u64_at(holder.wrapping_add(l.ik_methods))?;
    let count = mem.u32_at(methods)? as i32;
    if !(0..=MAX_METHODS).contains(&count) {
        return None;
    }
    let idnum = i32::from(cmm.u16_at(cm.wrapping_add(l.const_method_idnum))?);
    let at = |i: i32| {
        mem.u64_at(
            methods
                .wrapping_add(l.array_methods_data)
                .wrapping_add(8 * i as u64),
        )
    };
    let held = (idnum < count && at(idnum)? == method) || {
        let all = mem.bytes_at(
            methods.wrapping_add(l.array_methods_data),
            8 * count as usize,
            8 * MAX_METHODS as usize,
        )?;
        all.chunks_exact(8)
            .any(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()) == method)
    };
    if !held {
        return None;
    }
    let class = symbol(mem, l, km.u64_at(holder.wrapping_add(l.klass_name))?)?;
    let index = |off: u64| cmm.u16_at(cm.wrapping_add(off));
    let name = cp_symbol(&cpm, l, cp, index(l.const_method_name_index)?)?;
    let sig = cp_symbol(&cpm, l, cp, index(l.const_method_signature_index)?)?;
    let file = match cpm.u16_at(cp.wrapping_add(l.cp_source_file))? {
        0 => None,
        i => cp_symbol(&cpm, l, cp, i),
    };
    Some(MethodInfo {
        name: external_name(&class, &name, &sig)?,
        file,
        code_start: cm.wrapping_add(l.const_method_size),
        code_size: u64::from(index(l.const_method_code_size)?),
        flags: index(l.const_method_flags)?,
    })
}

/// The bytes of a structure at `base` up to the end of the last of its `fields` (their
/// offsets; each at most 8 bytes wide), read at once: what its fields are then read
/// from, with one system call for all. Empty if they could not be read at once (a
/// span reaching unmapped memory, a snapshot holding the fields alone): each field is
/// then read by itself.
fn at_once(mem: &dyn Memory, base: u64, fields: &[u64]) -> Vec<u8> {
    let end = fields.iter().max().map_or(0, |m| m.saturating_add(8));
    let Ok(len) = usize::try_from(end) else {
        return Vec::new();
    };
    if len > MAX_AT_ONCE {
        return Vec::new();
    }
    let mut b = vec![0; len];
    if mem.read(base, &mut b) {
        b
    } else {
        Vec::new()
    }
}

/// The text of a `Symbol*`: its length and the first bytes of its body read at once.
fn symbol(mem: &dyn Memory, l: &Layout, sym: u64) -> Option<String> {
    if sym == 0 {
        return None;
    }
    let head = at_once(mem, sym, &[l.symbol_length, l.symbol_body + SYMBOL_AHEAD]);
    let m = Overlay {
        sp: sym,
        stack: &head,
        rest: mem,
    };
    let len = usize::from(m.u16_at(sym.checked_add(l.symbol_length)?)?);
    let b = m.bytes_at(sym.wrapping_add(l.symbol_body), len, MAX_SYMBOL)?;
    String::from_utf8(b).ok()
}

/// The UTF-8 symbol at index `i` of constant pool `cp` (`mem` its header read at
/// once), checked by its tag.
fn cp_symbol(mem: &dyn Memory, l: &Layout, cp: u64, i: u16) -> Option<String> {
    let len = mem.u32_at(cp.wrapping_add(l.cp_length))?;
    if i == 0 || u32::from(i) >= len {
        return None;
    }
    let tags = mem.u64_at(cp.wrapping_add(l.cp_tags))?;
    // Array<u1>: an int length, then the bytes (read with it when near).
    let near = if i < 256 {
        at_once(mem, tags, &[4 + u64::from(i)])
    } else {
        Vec::new()
    };
    let tm = Overlay {
        sp: tags,
        stack: &near,
        rest: mem,
    };
    if tm.u32_at(tags)? != len {
        return None;
    }
    let mut tag = [0u8];
    if !tm.read(tags.wrapping_add(4 + u64::from(i)), &mut tag) || tag[0] != l.utf8_tag {
        return None;
    }
    symbol(
        mem,
        l,
        mem.u64_at(cp.wrapping_add(l.cp_size).wrapping_add(8 * u64::from(i)))?,
    )
}

/// The method's line number table, decoded: (start bci, line) pairs in table order.
/// Empty without a table, if it cannot be read whole, or if it holds more entries than
/// the method has bytecodes (no table needs more: the target made it so).
pub fn line_table(mem: &dyn Memory, l: &Layout, m: &MethodInfo) -> Vec<(u32, u32)> {
    if m.flags & l.has_line_table == 0 {
        return Vec::new();
    }
    let start = m.code_start.wrapping_add(m.code_size);
    let mut r = Reader {
        mem,
        at: start,
        end: start.saturating_add(MAX_LINE_TABLE as u64),
        buf: Vec::new(),
        buf_at: 0,
    };
    let (mut b, mut line) = (0i64, 0i64);
    let mut out = Vec::new();
    loop {
        let Some(next) = r.byte() else {
            return Vec::new();
        };
        if next == 0 {
            return out;
        }
        if next == 0xff {
            match (r.signed(), r.signed()) {
                (Some(db), Some(dl)) => (b, line) = (b + db, line + dl),
                _ => return Vec::new(),
            }
        } else {
            b += i64::from(next >> 3);
            line += i64::from(next & 7);
        }
        if let (Ok(b), Ok(line)) = (u32::try_from(b), u32::try_from(line)) {
            if out.len() as u64 > m.code_size {
                return Vec::new();
            }
            out.push((b, line));
        }
    }
}

/// The line of bytecode index `bci` in a decoded table: the entry with the greatest
/// start at or before it (HotSpot's own rule; an exact start wins).
pub fn line_at(table: &[(u32, u32)], bci: u32) -> Option<u32> {
    let mut best: Option<(u32, u32)> = None;
    for &(b, line) in table {
        if b == bci {
            return Some(line);
        }
        if b < bci && best.is_none_or(|(bb, _)| b >= bb) {
            best = Some((b, line));
        }
    }
    best.map(|(_, line)| line)
}

/// HotSpot's compressed stream (UNSIGNED5: bytes below 192 end a number).
struct Reader<'a> {
    mem: &'a dyn Memory,
    at: u64,
    end: u64,
    /// Bytes read ahead, from `buf_at`.
    buf: Vec<u8>,
    buf_at: u64,
}

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        if self.at >= self.end {
            return None;
        }
        let in_buf = self.at.checked_sub(self.buf_at).map(|o| o as usize);
        if let Some(&b) = in_buf.and_then(|o| self.buf.get(o)) {
            self.at += 1;
            return Some(b);
        }
        // 64 bytes at a time, never across a 64-byte boundary (so never into a page
        // that may be unmapped).
        let n = (64 - self.at % 64).min(self.end - self.at) as usize;
        self.buf.resize(n, 0);
        if !self.mem.read(self.at, &mut self.buf) {
            self.buf.clear();
            return None;
        }
        self.buf_at = self.at;
        self.at += 1;
        Some(self.buf[0])
    }

    fn unsigned(&mut self) -> Option<u32> {
        const L: u32 = 192;
        let b0 = u32::from(self.byte()?);
        if b0 < L {
            return Some(b0);
        }
        let mut sum = b0;
        let mut shift = 6;
        for i in 1..5 {
            let b = u32::from(self.byte()?);
            sum = sum.wrapping_add(b << shift);
            if b < L || i == 4 {
                return Some(sum);
            }
            shift += 6;
        }
        Some(sum)
    }

    fn signed(&mut self) -> Option<i64> {
        let v = self.unsigned()?;
        Some(i64::from(((v >> 1) as i32) ^ -((v & 1) as i32)))
    }
}

/// `ret Class.name(params)` from a class name (`a/b/C`), method name and descriptor
/// (`(IJ)J`); None if the descriptor is malformed.
pub fn external_name(class: &str, name: &str, sig: &str) -> Option<String> {
    let rest = sig.strip_prefix('(')?;
    let (params, ret) = rest.split_once(')')?;
    let mut list = Vec::new();
    let mut p = params;
    while !p.is_empty() {
        let (t, more) = java_type(p)?;
        if t == "void" {
            return None;
        }
        list.push(t);
        p = more;
    }
    let (ret, tail) = java_type(ret)?;
    if !tail.is_empty() {
        return None;
    }
    Some(format!(
        "{ret} {}.{name}({})",
        class.replace('/', "."),
        list.join(", ")
    ))
}

/// One type of a descriptor as Java source writes it, and the rest.
fn java_type(d: &str) -> Option<(String, &str)> {
    let mut dims = 0;
    let mut d = d;
    while let Some(r) = d.strip_prefix('[') {
        dims += 1;
        d = r;
    }
    let first = d.chars().next()?;
    let (base, rest) = match first {
        'B' => ("byte".to_owned(), &d[1..]),
        'C' => ("char".to_owned(), &d[1..]),
        'D' => ("double".to_owned(), &d[1..]),
        'F' => ("float".to_owned(), &d[1..]),
        'I' => ("int".to_owned(), &d[1..]),
        'J' => ("long".to_owned(), &d[1..]),
        'S' => ("short".to_owned(), &d[1..]),
        'Z' => ("boolean".to_owned(), &d[1..]),
        'V' if dims == 0 => ("void".to_owned(), &d[1..]),
        'L' => {
            let end = d.find(';')?;
            (d[1..end].replace('/', "."), &d[end + 1..])
        }
        _ => return None,
    };
    Some((format!("{base}{}", "[]".repeat(dims)), rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_written_as_the_perf_map_writes_them() {
        assert_eq!(
            external_name("Chain", "recurse", "(IJ)J").as_deref(),
            Some("long Chain.recurse(int, long)")
        );
        assert_eq!(
            external_name("a/b/C", "main", "([Ljava/lang/String;[[I)V").as_deref(),
            Some("void a.b.C.main(java.lang.String[], int[][])")
        );
        assert_eq!(external_name("C", "x", "(V)V"), None);
        assert_eq!(external_name("C", "x", "(I"), None);
        assert_eq!(external_name("C", "x", "()Lfoo"), None);
    }

    #[test]
    fn the_compressed_stream_reads_hotspots_numbers() {
        let mut s = crate::interp::Snapshot::default();
        // 5; 192 + 1*64 = 256; sign-coded -3 (5) and +2 (4).
        s.insert(0x100, vec![5, 192, 1, 5, 4]);
        let mut r = Reader {
            mem: &s,
            at: 0x100,
            end: 0x105,
            buf: Vec::new(),
            buf_at: 0,
        };
        assert_eq!(r.unsigned(), Some(5));
        assert_eq!(r.unsigned(), Some(256));
        assert_eq!(r.signed(), Some(-3));
        assert_eq!(r.signed(), Some(2));
        assert_eq!(r.byte(), None, "bounded by its end");
    }

    #[test]
    fn a_bci_takes_the_line_of_the_last_entry_at_or_before_it() {
        let t = [(0, 10), (5, 11), (9, 12), (5, 13)];
        assert_eq!(line_at(&t, 0), Some(10));
        assert_eq!(line_at(&t, 7), Some(13), "the later of two equal starts");
        assert_eq!(line_at(&t, 9), Some(12));
        assert_eq!(line_at(&t, 100), Some(12));
        assert_eq!(line_at(&[], 3), None);
    }
}
