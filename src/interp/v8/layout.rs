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

    /// The layout the named values describe (names without `v8dbg_`).
    pub fn from_values(v: &HashMap<String, i64>) -> Result<Layout, V8Error> {
        let get = |name: &'static str| v.get(name).copied().ok_or(V8Error::Missing(name));
        // The first of several spellings V8 has used for one field.
        let any = |names: &[&'static str]| {
            names
                .iter()
                .find_map(|n| v.get(*n).copied())
                .ok_or(V8Error::Missing(names[0]))
        };
        let offset = |name: &'static str, value: i64| {
            u64::try_from(value)
                .ok()
                .filter(|o| *o < 4096)
                .ok_or(V8Error::Unusable { name, value })
        };
        let field = |names: &[&'static str]| any(names).and_then(|x| offset(names[0], x));
        let ty = |name: &'static str| {
            get(name)
                .and_then(|x| u16::try_from(x).map_err(|_| V8Error::Unusable { name, value: x }))
        };
        let small = |name: &'static str| {
            get(name).and_then(|x| {
                u16::try_from(x)
                    .ok()
                    .filter(|s| *s < 256)
                    .ok_or(V8Error::Unusable { name, value: x })
            })
        };

        let tagged_size = get("TaggedSize")?;
        let pointer_size = v.get("SystemPointerSize").copied().unwrap_or(8);
        // Pointer compression (4-byte tagged fields) needs the isolate's cage base to
        // decompress; this walker reads full pointers only.
        if tagged_size != 8 || pointer_size != 8 {
            return Err(V8Error::Unusable {
                name: "TaggedSize",
                value: tagged_size,
            });
        }
        let smi_shift = get("SmiShiftSize")? + v.get("SmiTagSize").copied().unwrap_or(1);
        if !(1..64).contains(&smi_shift) {
            return Err(V8Error::Unusable {
                name: "SmiShiftSize",
                value: smi_shift,
            });
        }
        let tagging = Tagging {
            heap_object_mask: get("HeapObjectTagMask")? as u64,
            heap_object_tag: get("HeapObjectTag")? as u64,
            smi_mask: get("SmiTagMask")? as u64,
            smi_tag: get("SmiTag")? as u64,
            smi_shift: smi_shift as u32,
            tagged_size: 8,
        };
        let fp = |name: &'static str| {
            get(name).and_then(|x| {
                (-4096..4096)
                    .contains(&x)
                    .then_some(x)
                    .ok_or(V8Error::Unusable { name, value: x })
            })
        };
        let slots = FrameSlots {
            context_or_marker: fp("off_fp_context_or_frame_type")
                .or_else(|_| fp("off_fp_context"))?,
            function: fp("off_fp_function")?,
            bytecode_array: fp("off_fp_bytecode_array")?,
            bytecode_offset: fp("off_fp_bytecode_offset")?,
        };
        let opt = |names: &[&'static str]| field(names).ok();
        let fields = Fields {
            map: field(&[
                "class_HeapObject__map__Map",
                "class_HeapObject__map__Tagged_Map_",
            ])?,
            instance_type: field(&["class_Map__instance_type__uint16_t"])?,
            function_shared: field(&[
                "class_JSFunction__shared__SharedFunctionInfo",
                "class_JSFunction__shared__Tagged_SharedFunctionInfo_",
            ])?,
            sfi_name_or_scope_info: field(&[
                "class_SharedFunctionInfo__name_or_scope_info__Object",
                "class_SharedFunctionInfo__name_or_scope_info__Tagged_Object_",
                "class_SharedFunctionInfo__name_or_scope_info__Tagged_NameOrScopeInfoT_",
            ])?,
            sfi_script_or_debug_info: field(&[
                "class_SharedFunctionInfo__script_or_debug_info__HeapObject",
                "class_SharedFunctionInfo__script_or_debug_info__Object",
                "class_SharedFunctionInfo__script__Tagged_HeapObject_",
                "class_SharedFunctionInfo__script__Object",
            ])?,
            script_name: field(&[
                "class_Script__name__Object",
                "class_Script__name__Tagged_Object_",
            ])?,
            string_length: field(&["class_String__length__int32_t"])?,
            one_byte_chars: field(&["class_SeqOneByteString__chars__char"])?,
            two_byte_chars: field(&["class_SeqTwoByteString__chars__char"])?,
            cons_first: field(&[
                "class_ConsString__first__String",
                "class_ConsString__first__Tagged_String_",
            ])?,
            cons_second: field(&[
                "class_ConsString__second__String",
                "class_ConsString__second__Tagged_String_",
            ])?,
            thin_actual: field(&[
                "class_ThinString__actual__String",
                "class_ThinString__actual__Tagged_String_",
            ])?,
            sliced_parent: opt(&[
                "class_SlicedString__parent__String",
                "class_SlicedString__parent__Tagged_String_",
            ]),
            sliced_offset: opt(&["class_SlicedString__offset__SMI"]),
        };
        let js_function = ty("type_JSFunction__JS_FUNCTION_TYPE")?;
        let js_function_end = match v.get("LastJSFunctionType") {
            Some(&last) => u16::try_from(last + 1).map_err(|_| V8Error::Unusable {
                name: "LastJSFunctionType",
                value: last,
            })?,
            None => v
                .iter()
                .filter(|(k, _)| k.starts_with("type_"))
                .filter_map(|(_, &t)| u16::try_from(t).ok())
                .filter(|&t| t > js_function)
                .min()
                .unwrap_or(js_function.saturating_add(1)),
        };
        let types = Types {
            js_function,
            js_function_end,
            shared_function_info: ty("type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE")?,
            script: ty("type_Script__SCRIPT_TYPE")?,
            scope_info: ty("type_ScopeInfo__SCOPE_INFO_TYPE")?,
            bytecode_array: ty("type_BytecodeArray__BYTECODE_ARRAY_TYPE")?,
            map: ty("type_Map__MAP_TYPE")?,
            first_nonstring: ty("FirstNonstringType")?,
        };
        let strings = StringTags {
            representation_mask: small("StringRepresentationMask")?,
            seq: small("SeqStringTag")?,
            cons: small("ConsStringTag")?,
            sliced: small("SlicedStringTag")?,
            thin: small("ThinStringTag")?,
            encoding_mask: small("StringEncodingMask")?,
            one_byte: small("OneByteStringTag")?,
        };
        let mut frame_types: Vec<(i64, String)> = v
            .iter()
            .filter_map(|(k, &t)| Some((t, k.strip_prefix("frametype_")?.to_owned())))
            .collect();
        frame_types.sort();
        if frame_types.is_empty() {
            return Err(V8Error::Missing("frametype_*"));
        }
        let scope_index = |name: &'static str| {
            get(name).and_then(|x| {
                u64::try_from(x)
                    .ok()
                    .filter(|i| *i < 64)
                    .ok_or(V8Error::Unusable { name, value: x })
            })
        };
        Ok(Layout {
            tagging,
            slots,
            fields,
            types,
            strings,
            frame_types,
            scope_first_vars: scope_index("scopeinfo_idx_first_vars")?,
            scope_context_locals: scope_index("scopeinfo_idx_ncontextlocals")?,
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
