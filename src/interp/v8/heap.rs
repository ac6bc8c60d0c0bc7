//! V8's heap read from outside, every object checked before it is trusted: a tagged
//! pointer must carry the heap-object tag, its map must be a map (its own map's
//! instance type `MAP_TYPE`) and its instance type the one the field holds. A moved,
//! collected or forged object fails one of these and the reader gives up on it (the
//! frame is marked), never names it from what happens to be there. Strings are read
//! within a length bound and a bound on the pieces followed (cons, thin and sliced
//! strings point to others).

use super::layout::Layout;
use crate::interp::Memory;

/// The longest name kept, in bytes: a longer one is cut.
pub const MAX_NAME: usize = 256;
/// String pieces followed at most for one string (cons strings nest).
const MAX_PIECES: u32 = 16;
/// ScopeInfo slots read at most when looking for a function's name.
const SCOPE_SLOTS: u64 = 24;
/// A function whose scope keeps more context locals than this is not named from its
/// ScopeInfo: V8 keeps their names in a hash table then, and the slots after them are
/// not where the walker looks.
const MAX_CONTEXT_LOCALS: i64 = 64;

/// A process's V8 heap as one binary's layout describes it.
pub struct Heap<'a, M: ?Sized> {
    /// The layout.
    pub layout: &'a Layout,
    /// The process's memory.
    pub mem: &'a M,
}

/// A function read from a frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Function {
    /// Its name; `(anonymous)` when it has none, as V8's own profiler says.
    pub name: String,
    /// Its script's name (the file), when it has one.
    pub script: Option<String>,
}

impl<M: Memory + ?Sized> Heap<'_, M> {
    fn word(&self, addr: u64) -> Option<u64> {
        self.mem.u64_at(addr)
    }

    /// The object `tagged` points to and its instance type, if it is a heap object
    /// whose map checks out.
    pub fn object(&self, tagged: u64) -> Option<(u64, u16)> {
        let t = &self.layout.tagging;
        if !t.is_heap_object(tagged) {
            return None;
        }
        let addr = tagged & !t.heap_object_mask;
        let map = self.word(addr.checked_add(self.layout.fields.map)?)?;
        if !t.is_heap_object(map) {
            return None;
        }
        let map_addr = map & !t.heap_object_mask;
        let ty = self
            .mem
            .u16_at(map_addr.checked_add(self.layout.fields.instance_type)?)?;
        // The map's map is the meta map, whose instance type is MAP_TYPE.
        let meta = self.word(map_addr.checked_add(self.layout.fields.map)?)?;
        if !t.is_heap_object(meta) {
            return None;
        }
        let meta_ty = self
            .mem
            .u16_at((meta & !t.heap_object_mask).checked_add(self.layout.fields.instance_type)?)?;
        (meta_ty == self.layout.types.map).then_some((addr, ty))
    }

    /// Where the object `tagged` points to was moved, if it was: a scavenge copies a
    /// young object and writes its new address, untagged (a Smi's tag), over the
    /// old copy's map word, which stays there until the next scavenge. (So in V8
    /// without pointer compression, the only V8 read; with it, the word is an
    /// offset.) Tagged; None when the map word is no such address.
    fn forwarded(&self, tagged: u64) -> Option<u64> {
        let t = &self.layout.tagging;
        if !t.is_heap_object(tagged) {
            return None;
        }
        let word =
            self.word((tagged & !t.heap_object_mask).checked_add(self.layout.fields.map)?)?;
        let moved = word.checked_add(t.heap_object_tag)?;
        (word & t.heap_object_mask == 0 && t.is_heap_object(moved)).then_some(moved)
    }

    /// The object `tagged` points to, if its type is `ty`.
    fn typed(&self, tagged: u64, ty: u16) -> Option<u64> {
        self.object(tagged)
            .filter(|(_, t)| *t == ty)
            .map(|(a, _)| a)
    }

    /// The `SharedFunctionInfo` of the function `tagged` points to (tagged), if it is a
    /// function.
    ///
    /// A function the young generation's collector moved since the sample (a
    /// closure made per request, say) left its new address in its map word: it is
    /// followed once ([`Heap::forwarded`]), and the object there checked as any.
    pub fn shared_of(&self, tagged: u64) -> Option<u64> {
        let types = &self.layout.types;
        let (addr, ty) = self
            .object(tagged)
            .or_else(|| self.object(self.forwarded(tagged)?))?;
        if !(types.js_function..types.js_function_end).contains(&ty) {
            return None;
        }
        let sfi = self.word(addr.checked_add(self.layout.fields.function_shared)?)?;
        self.typed(sfi, types.shared_function_info).map(|_| sfi)
    }

    /// The words of `sfi` (tagged) that identify its function: its
    /// `name_or_scope_info` and `script_or_debug_info`. A cache keyed by the SFI's
    /// address and these still names the same function after a collection moved
    /// another one there.
    pub fn identity(&self, sfi: u64) -> Option<(u64, u64)> {
        let f = &self.layout.fields;
        let addr = self.typed(sfi, self.layout.types.shared_function_info)?;
        let name = self.word(addr.checked_add(f.sfi_name_or_scope_info)?)?;
        let script = self.word(addr.checked_add(f.sfi_script_or_debug_info)?)?;
        Some((name, script))
    }

    /// A check of the object a `name_or_scope_info` word points to, read on every
    /// lookup, cached name or not: its map, and its length (a string) or count of
    /// context locals (a ScopeInfo). None when it is neither, checked as every read
    /// is (tag, map, type): a name moved or collected since, whose place now holds
    /// something else. A name cache keyed by the SFI's address, its words and this
    /// does not name a function from another one that a collection put at the same
    /// addresses unless the two names also have the same map and length.
    pub fn name_check(&self, name_or_scope: u64) -> Option<u64> {
        let l = self.layout;
        let (addr, ty) = self.object(name_or_scope)?;
        let map = self.word(addr.checked_add(l.fields.map)?)?;
        let size = if ty < l.types.first_nonstring {
            u64::from(self.mem.u32_at(addr.checked_add(l.fields.string_length)?)?)
        } else if ty == l.types.scope_info {
            let slot = l.fields.map + 8 + 8 * l.scope_context_locals;
            self.word(addr.checked_add(slot)?)?
        } else {
            return None;
        };
        Some(map ^ size.rotate_left(32))
    }

    /// The function `(name_or_scope_info, script_or_debug_info)` of an SFI describe.
    /// None if the name cannot be read and checked.
    pub fn function(&self, (name_or_scope, script): (u64, u64)) -> Option<Function> {
        let (addr, ty) = self.object(name_or_scope)?;
        let name = if ty < self.layout.types.first_nonstring {
            self.string(name_or_scope)?
        } else if ty == self.layout.types.scope_info {
            self.scope_name(addr)?
        } else {
            return None;
        };
        let name = if name.is_empty() {
            "(anonymous)".to_owned()
        } else {
            name
        };
        Some(Function {
            name,
            script: self.script_name(script),
        })
    }

    /// The function's name a ScopeInfo at `addr` keeps: after its fixed slots and its
    /// context locals (a name and an info each) comes the function's own name (empty
    /// for an anonymous function), then the name V8 inferred for it (`obj.method =
    /// function () {}`), if any. Smis between (a saved class variable's index) are
    /// passed over.
    fn scope_name(&self, addr: u64) -> Option<String> {
        let l = self.layout;
        let t = &l.tagging;
        let slot = |i: u64| self.word(addr.checked_add(l.fields.map + 8 + 8 * i)?);
        let locals = t.smi(slot(l.scope_context_locals)?)?;
        if !(0..=MAX_CONTEXT_LOCALS).contains(&locals) {
            return None;
        }
        let first = l.scope_first_vars + 2 * locals as u64;
        let is_string = |w: u64| {
            self.object(w)
                .is_some_and(|(_, ty)| ty < l.types.first_nonstring)
        };
        // The function's name: the first string, past any Smi.
        let mut i = first;
        let name = loop {
            if i >= first + SCOPE_SLOTS {
                return Some(String::new());
            }
            let w = slot(i)?;
            i += 1;
            if t.smi(w).is_some() {
                continue;
            }
            if !is_string(w) {
                return Some(String::new());
            }
            break self.string(w)?;
        };
        if !name.is_empty() {
            return Some(name);
        }
        // An empty name: the inferred one follows the name's slot index.
        if slot(i).is_some_and(|w| t.smi(w).is_some())
            && let Some(w) = slot(i + 1).filter(|&w| is_string(w))
        {
            return self.string(w);
        }
        Some(name)
    }

    /// The name of the script `tagged` points to, if it is a script with a string
    /// name.
    fn script_name(&self, tagged: u64) -> Option<String> {
        let addr = self.typed(tagged, self.layout.types.script)?;
        let name = self.word(addr.checked_add(self.layout.fields.script_name)?)?;
        self.string(name).filter(|s| !s.is_empty())
    }

    /// The string `tagged` points to, at most [`MAX_NAME`] bytes of it (longer ones
    /// are cut); None if it is not a string, a piece does not check out, or it holds
    /// control characters.
    pub fn string(&self, tagged: u64) -> Option<String> {
        let mut out = Vec::new();
        let mut pieces = 0;
        self.append(tagged, 0, usize::MAX, &mut out, &mut pieces)?;
        let text = String::from_utf8_lossy(&out).into_owned();
        // A name with control characters is no name V8 gave: a forged or reused string.
        (!text.chars().any(char::is_control)).then_some(text)
    }

    /// Appends `n` characters from character `start` of the sequential string at
    /// `addr` (of one-byte characters, else two-byte) to `out`, cut at [`MAX_NAME`]
    /// bytes.
    fn append_chars(
        &self,
        (addr, one_byte): (u64, bool),
        (start, n): (usize, usize),
        out: &mut Vec<u8>,
    ) -> Option<()> {
        let f = &self.layout.fields;
        if one_byte {
            let at = addr
                .checked_add(f.one_byte_chars)?
                .checked_add(start as u64)?;
            let bytes = self.mem.bytes_at(at, n, MAX_NAME)?;
            // Latin-1: each byte is the code point.
            out.extend(bytes.iter().flat_map(|&b| {
                let mut buf = [0u8; 2];
                char::from(b).encode_utf8(&mut buf).as_bytes().to_vec()
            }));
        } else {
            let at = addr
                .checked_add(f.two_byte_chars)?
                .checked_add(2 * start as u64)?;
            let bytes = self.mem.bytes_at(at, 2 * n, 2 * MAX_NAME)?;
            let units = bytes
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]));
            let text: String = char::decode_utf16(units)
                .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
                .collect();
            out.extend_from_slice(text.as_bytes());
        }
        out.truncate(MAX_NAME);
        Some(())
    }

    /// Appends at most `len` characters of string `tagged` from character `skip` to
    /// `out`, stopping at [`MAX_NAME`] bytes.
    fn append(
        &self,
        tagged: u64,
        skip: usize,
        len: usize,
        out: &mut Vec<u8>,
        pieces: &mut u32,
    ) -> Option<()> {
        *pieces += 1;
        if *pieces > MAX_PIECES {
            return None;
        }
        let l = self.layout;
        let (addr, ty) = self.object(tagged)?;
        if ty >= l.types.first_nonstring {
            return None;
        }
        let length = self.mem.u32_at(addr.checked_add(l.fields.string_length)?)?;
        let length = usize::try_from(i32::try_from(length).ok()?).ok()?;
        let s = &l.strings;
        let repr = ty & s.representation_mask;
        let room = MAX_NAME.saturating_sub(out.len());
        if room == 0 {
            return Some(());
        }
        if repr == s.seq {
            let start = skip.min(length);
            let n = length.saturating_sub(start).min(len).min(room);
            let one_byte = ty & s.encoding_mask == s.one_byte;
            self.append_chars((addr, one_byte), (start, n), out)?;
            Some(())
        } else if repr == s.cons {
            let first = self.word(addr.checked_add(l.fields.cons_first)?)?;
            let second = self.word(addr.checked_add(l.fields.cons_second)?)?;
            let first_len = self.length(first)?;
            if skip < first_len {
                self.append(first, skip, len, out, pieces)?;
            }
            let taken = first_len.saturating_sub(skip).min(len);
            if taken < len {
                let skip2 = skip.saturating_sub(first_len);
                self.append(second, skip2, len - taken, out, pieces)?;
            }
            Some(())
        } else if repr == s.thin {
            let actual = self.word(addr.checked_add(l.fields.thin_actual)?)?;
            self.append(actual, skip, len, out, pieces)
        } else if repr == s.sliced {
            let parent = self.word(addr.checked_add(l.fields.sliced_parent?)?)?;
            let offset = l
                .tagging
                .smi(self.word(addr.checked_add(l.fields.sliced_offset?)?)?)?;
            let offset = usize::try_from(offset).ok()?;
            let n = length.saturating_sub(skip).min(len);
            self.append(parent, offset.checked_add(skip)?, n, out, pieces)
        } else {
            // External strings live outside the heap, in the embedder's memory.
            None
        }
    }

    /// The length of string `tagged`.
    fn length(&self, tagged: u64) -> Option<usize> {
        let (addr, ty) = self.object(tagged)?;
        if ty >= self.layout.types.first_nonstring {
            return None;
        }
        let n = self
            .mem
            .u32_at(addr.checked_add(self.layout.fields.string_length)?)?;
        usize::try_from(i32::try_from(n).ok()?).ok()
    }

    /// Whether `tagged` is a bytecode array (an interpreted frame keeps its own).
    pub fn is_bytecode_array(&self, tagged: u64) -> bool {
        self.typed(tagged, self.layout.types.bytecode_array)
            .is_some()
    }
}
