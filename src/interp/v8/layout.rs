//! What a Node binary says of V8's objects and frames: the `v8dbg_*` symbols V8's
//! build exports for postmortem debuggers (`tools/gen-postmortem-metadata.py`), each
//! an `int` in the binary's data whose name says what it is (`v8dbg_off_fp_function`:
//! where a JavaScript frame keeps its function, below its frame pointer;
//! `v8dbg_class_SharedFunctionInfo__name_or_scope_info__Object`: a field's offset;
//! `v8dbg_type_Script__SCRIPT_TYPE`: an instance type). [`Layout::from_elf`] reads
//! them from the file, so a version of Node is read by what it says of itself, never
//! by a table written per version; a binary that lacks one the walker needs is
//! refused with the name of what is missing ([`V8Error`]).
//!
//! It also finds V8's builtins (`Builtins_*` in the static symbol table): the
//! interpreter runs there, so a frame whose pc is there may be an interpreted
//! JavaScript frame. A stripped binary has no such symbols: its interpreted frames
//! stay unnamed, and the summary says so.

use std::collections::{BTreeMap, HashMap};

use super::symbols;
use crate::interp::elf_symbols::ReadAt;

mod read;

/// Why a binary's V8 description cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum V8Error {
    /// Not an ELF file the reader can parse.
    #[error("not an ELF file: {0}")]
    NotElf(String),
    /// The binary exports no `v8dbg_*` symbol at all (not V8, or built without
    /// postmortem metadata).
    #[error("the binary exports no v8dbg_* symbols (V8's postmortem metadata)")]
    NoMetadata,
    /// A symbol the walker needs is missing.
    #[error("the binary's V8 metadata lacks {0}")]
    Missing(&'static str),
    /// A value is outside what the walker can use.
    #[error("the binary's V8 metadata gives {name} = {value}, which the walker cannot use")]
    Unusable {
        /// The symbol (without `v8dbg_`).
        name: &'static str,
        /// Its value.
        value: i64,
    },
}

/// Where a frame keeps what the walker reads, in bytes from its frame pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameSlots {
    /// A JavaScript frame's context, or a typed frame's marker.
    pub context_or_marker: i64,
    /// A JavaScript frame's function.
    pub function: i64,
    /// An interpreted frame's bytecode array.
    pub bytecode_array: i64,
    /// An interpreted frame's bytecode offset (a Smi).
    pub bytecode_offset: i64,
}

/// Field offsets of the objects the walker follows, in bytes from an object's start
/// (its tagged address less the heap-object tag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fields {
    /// `HeapObject::map`.
    pub map: u64,
    /// `Map::instance_type` (a u16).
    pub instance_type: u64,
    /// `JSFunction::shared`.
    pub function_shared: u64,
    /// `SharedFunctionInfo::name_or_scope_info`.
    pub sfi_name_or_scope_info: u64,
    /// `SharedFunctionInfo::script_or_debug_info`.
    pub sfi_script_or_debug_info: u64,
    /// `Script::name`.
    pub script_name: u64,
    /// `String::length` (an i32).
    pub string_length: u64,
    /// `SeqOneByteString::chars`.
    pub one_byte_chars: u64,
    /// `SeqTwoByteString::chars`.
    pub two_byte_chars: u64,
    /// `ConsString::first` and `second`.
    pub cons_first: u64,
    /// `ConsString::second`.
    pub cons_second: u64,
    /// `ThinString::actual`.
    pub thin_actual: u64,
    /// `SlicedString::parent`, when described.
    pub sliced_parent: Option<u64>,
    /// `SlicedString::offset` (a Smi), when described.
    pub sliced_offset: Option<u64>,
}

/// Instance types the walker checks objects against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Types {
    /// `JS_FUNCTION_TYPE`: the first of the function types.
    pub js_function: u16,
    /// One past the last type that may be a function (`LastJSFunctionType` + 1 when
    /// described; else the next type the binary describes after `JS_FUNCTION_TYPE`:
    /// the undescribed types between are V8's function subtypes, class constructors and
    /// the like, and an object of another type there still has to hold a
    /// `SharedFunctionInfo` where a function does).
    pub js_function_end: u16,
    /// `SHARED_FUNCTION_INFO_TYPE`.
    pub shared_function_info: u16,
    /// `SCRIPT_TYPE`.
    pub script: u16,
    /// `SCOPE_INFO_TYPE`.
    pub scope_info: u16,
    /// `BYTECODE_ARRAY_TYPE`.
    pub bytecode_array: u16,
    /// `MAP_TYPE`: a map's own map has it.
    pub map: u16,
    /// Below this, a type is a string.
    pub first_nonstring: u16,
}

/// How strings are tagged in their instance type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StringTags {
    /// Selects the representation bits.
    pub representation_mask: u16,
    /// Sequential, cons, sliced, thin representations.
    pub seq: u16,
    /// A cons string.
    pub cons: u16,
    /// A sliced string.
    pub sliced: u16,
    /// A thin string.
    pub thin: u16,
    /// Selects the encoding bit.
    pub encoding_mask: u16,
    /// One-byte encoding (else two-byte).
    pub one_byte: u16,
}

/// V8's tagging: a heap object's address has `heap_object_tag` in the bits of
/// `heap_object_mask`; a small integer has `smi_tag` in `smi_mask` and its value
/// `smi_shift` bits up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tagging {
    /// `HeapObjectTagMask`.
    pub heap_object_mask: u64,
    /// `HeapObjectTag`.
    pub heap_object_tag: u64,
    /// `SmiTagMask`.
    pub smi_mask: u64,
    /// `SmiTag`.
    pub smi_tag: u64,
    /// `SmiShiftSize` + `SmiTagSize`: where a Smi's value starts.
    pub smi_shift: u32,
    /// `TaggedSize`: 8 without pointer compression, 4 with it.
    pub tagged_size: u64,
}

impl Tagging {
    /// Whether `word` is a tagged heap-object pointer.
    pub fn is_heap_object(&self, word: u64) -> bool {
        word & self.heap_object_mask == self.heap_object_tag && word > self.heap_object_mask
    }

    /// The value of Smi `word`, or None if `word` is not a Smi.
    pub fn smi(&self, word: u64) -> Option<i64> {
        (word & self.smi_mask == self.smi_tag).then(|| (word as i64) >> self.smi_shift)
    }
}

/// V8's description of itself in one binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Tags.
    pub tagging: Tagging,
    /// Frame slots.
    pub slots: FrameSlots,
    /// Field offsets.
    pub fields: Fields,
    /// Instance types.
    pub types: Types,
    /// String tags.
    pub strings: StringTags,
    /// Frame-type markers by value, with their names (`InterpretedFrame`,
    /// `TurbofanFrame`, `StubFrame` ...): a typed frame keeps its marker where a
    /// JavaScript frame keeps its context.
    pub frame_types: Vec<(i64, String)>,
    /// ScopeInfo's slot indexes: first variable, count of context locals.
    pub scope_first_vars: u64,
    /// The slot holding the count of context locals.
    pub scope_context_locals: u64,
    /// The file addresses of V8's builtins (`Builtins_*`), where the interpreter runs;
    /// None when the binary has no static symbols (stripped).
    pub builtins: Option<(u64, u64)>,
    /// How many `v8dbg_*` symbols the binary exports.
    pub symbols: usize,
    /// The values it was made from, by name without `v8dbg_` (kept between
    /// recordings: [`super::cache`]).
    pub values: BTreeMap<String, i64>,
}

impl Layout {
    /// V8's description in ELF image `image` (a Node binary or `libnode.so`, whole).
    pub fn from_elf(image: &[u8]) -> Result<Layout, V8Error> {
        let read_at = |off: u64, buf: &mut [u8]| {
            let Some(src) = usize::try_from(off)
                .ok()
                .and_then(|o| image.get(o..o.checked_add(buf.len())?))
            else {
                return false;
            };
            buf.copy_from_slice(src);
            true
        };
        Layout::from_file(image, &read_at)
    }

    /// V8's description in the ELF file whose headers and symbol tables `image`
    /// holds, its values read with `read_at`.
    pub fn from_file(image: &[u8], read_at: ReadAt<'_>) -> Result<Layout, V8Error> {
        let file = object::read::elf::ElfFile64::<object::Endianness>::parse(image)
            .map_err(|e| V8Error::NotElf(e.to_string()))?;
        let v = symbols::values(&file, read_at);
        if v.is_empty() {
            return Err(V8Error::NoMetadata);
        }
        let mut layout = Layout::from_values(&v)?;
        layout.builtins = symbols::builtins(&file);
        Ok(layout)
    }

    /// The layout the named values describe (names without `v8dbg_`): each part
    /// read and checked by [`read`].
    pub fn from_values(v: &HashMap<String, i64>) -> Result<Layout, V8Error> {
        let values = read::Values(v);
        Ok(Layout {
            tagging: values.tagging()?,
            slots: values.slots()?,
            fields: values.fields()?,
            types: values.types()?,
            strings: values.strings()?,
            frame_types: values.frame_types()?,
            scope_first_vars: values.scope_index("scopeinfo_idx_first_vars")?,
            scope_context_locals: values.scope_index("scopeinfo_idx_ncontextlocals")?,
            builtins: None,
            symbols: v.len(),
            values: v.iter().map(|(k, x)| (k.clone(), *x)).collect(),
        })
    }

    /// The frame type a typed frame's marker word says, by V8's name
    /// (`StackFrame::TypeToMarker`: the type shifted up past the Smi tag); None if
    /// `word` is not a marker.
    pub fn frame_type(&self, word: u64) -> Option<&str> {
        if word & self.tagging.smi_mask != self.tagging.smi_tag {
            return None;
        }
        let t = i64::try_from(word >> 1).ok()?;
        self.frame_types
            .iter()
            .find(|(v, _)| *v == t)
            .map(|(_, n)| n.as_str())
    }

    /// Whether `word`, read where a frame keeps its context or marker, is a marker
    /// (a small even word): the frame is then a typed frame, not JavaScript's.
    pub fn is_marker(&self, word: u64) -> bool {
        word & self.tagging.smi_mask == self.tagging.smi_tag && word < 1 << 16
    }
}
