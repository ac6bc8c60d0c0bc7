//! The `v8dbg_*` values read into a [`Layout`](super::Layout)'s parts, each checked: an offset
//! within a page, a frame slot within 4 KiB of the frame pointer, an instance type
//! that fits its field, a string tag below 256. A value missing or out of range is
//! an error naming it ([`V8Error`]).

use std::collections::HashMap;

use super::{Fields, FrameSlots, StringTags, Tagging, Types, V8Error};

/// The values, by name without `v8dbg_`.
pub(super) struct Values<'a>(pub(super) &'a HashMap<String, i64>);

impl Values<'_> {
    fn get(&self, name: &'static str) -> Result<i64, V8Error> {
        self.0.get(name).copied().ok_or(V8Error::Missing(name))
    }

    /// The first of several spellings V8 has used for one value.
    fn any(&self, names: &[&'static str]) -> Result<i64, V8Error> {
        names
            .iter()
            .find_map(|n| self.0.get(*n).copied())
            .ok_or(V8Error::Missing(names[0]))
    }

    /// A field offset, by any of its spellings: within a page.
    fn field(&self, names: &[&'static str]) -> Result<u64, V8Error> {
        let value = self.any(names)?;
        u64::try_from(value)
            .ok()
            .filter(|o| *o < 4096)
            .ok_or(V8Error::Unusable {
                name: names[0],
                value,
            })
    }

    /// An instance type.
    fn ty(&self, name: &'static str) -> Result<u16, V8Error> {
        let value = self.get(name)?;
        u16::try_from(value).map_err(|_| V8Error::Unusable { name, value })
    }

    /// A string tag or mask: below 256.
    fn small(&self, name: &'static str) -> Result<u16, V8Error> {
        let value = self.get(name)?;
        u16::try_from(value)
            .ok()
            .filter(|s| *s < 256)
            .ok_or(V8Error::Unusable { name, value })
    }

    /// A frame slot: within 4 KiB of the frame pointer.
    fn fp(&self, name: &'static str) -> Result<i64, V8Error> {
        let value = self.get(name)?;
        (-4096..4096)
            .contains(&value)
            .then_some(value)
            .ok_or(V8Error::Unusable { name, value })
    }

    /// A ScopeInfo slot index: below 64.
    pub(super) fn scope_index(&self, name: &'static str) -> Result<u64, V8Error> {
        let value = self.get(name)?;
        u64::try_from(value)
            .ok()
            .filter(|i| *i < 64)
            .ok_or(V8Error::Unusable { name, value })
    }

    /// The tags. Pointer compression (4-byte tagged fields) needs the isolate's cage
    /// base to decompress; this walker reads full pointers only, and refuses it.
    pub(super) fn tagging(&self) -> Result<Tagging, V8Error> {
        let tagged_size = self.get("TaggedSize")?;
        let pointer_size = self.0.get("SystemPointerSize").copied().unwrap_or(8);
        if tagged_size != 8 || pointer_size != 8 {
            return Err(V8Error::Unusable {
                name: "TaggedSize",
                value: tagged_size,
            });
        }
        let smi_shift = self.get("SmiShiftSize")? + self.0.get("SmiTagSize").copied().unwrap_or(1);
        if !(1..64).contains(&smi_shift) {
            return Err(V8Error::Unusable {
                name: "SmiShiftSize",
                value: smi_shift,
            });
        }
        Ok(Tagging {
            heap_object_mask: self.get("HeapObjectTagMask")? as u64,
            heap_object_tag: self.get("HeapObjectTag")? as u64,
            smi_mask: self.get("SmiTagMask")? as u64,
            smi_tag: self.get("SmiTag")? as u64,
            smi_shift: smi_shift as u32,
            tagged_size: 8,
        })
    }

    /// The slots of a JavaScript frame.
    pub(super) fn slots(&self) -> Result<FrameSlots, V8Error> {
        Ok(FrameSlots {
            context_or_marker: self
                .fp("off_fp_context_or_frame_type")
                .or_else(|_| self.fp("off_fp_context"))?,
            function: self.fp("off_fp_function")?,
            bytecode_array: self.fp("off_fp_bytecode_array")?,
            bytecode_offset: self.fp("off_fp_bytecode_offset")?,
        })
    }

    /// The field offsets, each by the spellings V8 versions have given it.
    pub(super) fn fields(&self) -> Result<Fields, V8Error> {
        let f = |names: &[&'static str]| self.field(names);
        Ok(Fields {
            map: f(&[
                "class_HeapObject__map__Map",
                "class_HeapObject__map__Tagged_Map_",
            ])?,
            instance_type: f(&["class_Map__instance_type__uint16_t"])?,
            function_shared: f(&[
                "class_JSFunction__shared__SharedFunctionInfo",
                "class_JSFunction__shared__Tagged_SharedFunctionInfo_",
            ])?,
            sfi_name_or_scope_info: f(&[
                "class_SharedFunctionInfo__name_or_scope_info__Object",
                "class_SharedFunctionInfo__name_or_scope_info__Tagged_Object_",
                "class_SharedFunctionInfo__name_or_scope_info__Tagged_NameOrScopeInfoT_",
            ])?,
            sfi_script_or_debug_info: f(&[
                "class_SharedFunctionInfo__script_or_debug_info__HeapObject",
                "class_SharedFunctionInfo__script_or_debug_info__Object",
                "class_SharedFunctionInfo__script__Tagged_HeapObject_",
                "class_SharedFunctionInfo__script__Object",
            ])?,
            script_name: f(&[
                "class_Script__name__Object",
                "class_Script__name__Tagged_Object_",
            ])?,
            string_length: f(&["class_String__length__int32_t"])?,
            one_byte_chars: f(&["class_SeqOneByteString__chars__char"])?,
            two_byte_chars: f(&["class_SeqTwoByteString__chars__char"])?,
            cons_first: f(&[
                "class_ConsString__first__String",
                "class_ConsString__first__Tagged_String_",
            ])?,
            cons_second: f(&[
                "class_ConsString__second__String",
                "class_ConsString__second__Tagged_String_",
            ])?,
            thin_actual: f(&[
                "class_ThinString__actual__String",
                "class_ThinString__actual__Tagged_String_",
            ])?,
            sliced_parent: f(&[
                "class_SlicedString__parent__String",
                "class_SlicedString__parent__Tagged_String_",
            ])
            .ok(),
            sliced_offset: f(&["class_SlicedString__offset__SMI"]).ok(),
        })
    }

    /// The instance types. The function types run from `JS_FUNCTION_TYPE` to
    /// `LastJSFunctionType`, or without it to the next type V8 names.
    pub(super) fn types(&self) -> Result<Types, V8Error> {
        let js_function = self.ty("type_JSFunction__JS_FUNCTION_TYPE")?;
        let js_function_end = match self.0.get("LastJSFunctionType") {
            Some(&last) => u16::try_from(last + 1).map_err(|_| V8Error::Unusable {
                name: "LastJSFunctionType",
                value: last,
            })?,
            None => (self.0.iter())
                .filter(|(k, _)| k.starts_with("type_"))
                .filter_map(|(_, &t)| u16::try_from(t).ok())
                .filter(|&t| t > js_function)
                .min()
                .unwrap_or(js_function.saturating_add(1)),
        };
        Ok(Types {
            js_function,
            js_function_end,
            shared_function_info: self.ty("type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE")?,
            script: self.ty("type_Script__SCRIPT_TYPE")?,
            scope_info: self.ty("type_ScopeInfo__SCOPE_INFO_TYPE")?,
            bytecode_array: self.ty("type_BytecodeArray__BYTECODE_ARRAY_TYPE")?,
            map: self.ty("type_Map__MAP_TYPE")?,
            first_nonstring: self.ty("FirstNonstringType")?,
        })
    }

    /// How strings are tagged.
    pub(super) fn strings(&self) -> Result<StringTags, V8Error> {
        Ok(StringTags {
            representation_mask: self.small("StringRepresentationMask")?,
            seq: self.small("SeqStringTag")?,
            cons: self.small("ConsStringTag")?,
            sliced: self.small("SlicedStringTag")?,
            thin: self.small("ThinStringTag")?,
            encoding_mask: self.small("StringEncodingMask")?,
            one_byte: self.small("OneByteStringTag")?,
        })
    }

    /// The frame types by marker value, with their names; at least one.
    pub(super) fn frame_types(&self) -> Result<Vec<(i64, String)>, V8Error> {
        let mut frame_types: Vec<(i64, String)> = (self.0.iter())
            .filter_map(|(k, &t)| Some((t, k.strip_prefix("frametype_")?.to_owned())))
            .collect();
        frame_types.sort();
        if frame_types.is_empty() {
            return Err(V8Error::Missing("frametype_*"));
        }
        Ok(frame_types)
    }
}
