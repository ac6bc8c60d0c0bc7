//! HotSpot's own description of its structures, read from outside: libjvm.so exports
//! four tables (`gHotSpotVMStructs`, `gHotSpotVMTypes`, `gHotSpotVMIntConstants`,
//! `gHotSpotVMLongConstants`) for the serviceability agent, each an array of entries
//! whose layout is itself exported (`gHotSpotVMStructEntryArrayStride`,
//! `…FieldNameOffset`, …). This module finds those symbols in the library's dynamic
//! symbol table and reads the tables through [`Memory`]: field offsets, static
//! addresses, type sizes and constants by name. Every count and string is bounded.

use std::collections::HashMap;

use crate::interp::Memory;

/// Most entries read from one table (JDK 17 has about 3,000 fields).
const MAX_ENTRIES: usize = 20_000;
/// Longest name read from a table.
const MAX_NAME: usize = 256;

/// The addresses (in the file: add the load bias) of the symbols that describe the
/// tables, found in libjvm.so's dynamic symbols.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VmSymbols {
    /// Symbol name → address in the file.
    pub addrs: HashMap<String, u64>,
}

/// The symbols needed, all prefixed `gHotSpot`.
const NEEDED: &[&str] = &[
    "VMStructs",
    "VMStructEntryArrayStride",
    "VMStructEntryTypeNameOffset",
    "VMStructEntryFieldNameOffset",
    "VMStructEntryIsStaticOffset",
    "VMStructEntryOffsetOffset",
    "VMStructEntryAddressOffset",
    "VMTypes",
    "VMTypeEntryArrayStride",
    "VMTypeEntryTypeNameOffset",
    "VMTypeEntrySizeOffset",
    "VMIntConstants",
    "VMIntConstantEntryArrayStride",
    "VMIntConstantEntryNameOffset",
    "VMIntConstantEntryValueOffset",
    "VMLongConstants",
    "VMLongConstantEntryArrayStride",
    "VMLongConstantEntryNameOffset",
    "VMLongConstantEntryValueOffset",
];

impl VmSymbols {
    /// The symbols of an ELF image of libjvm.so; None if it is not ELF or lacks any.
    pub fn from_elf(image: &[u8]) -> Option<VmSymbols> {
        use object::{Object, ObjectSymbol};
        let file = object::File::parse(image).ok()?;
        let mut addrs = HashMap::new();
        for s in file.dynamic_symbols() {
            if let Ok(name) = s.name()
                && let Some(short) = name.strip_prefix("gHotSpot")
                && NEEDED.contains(&short)
            {
                addrs.insert(short.to_owned(), s.address());
            }
        }
        (addrs.len() == NEEDED.len()).then_some(VmSymbols { addrs })
    }

    fn get(&self, name: &str, bias: u64) -> Result<u64, VmError> {
        self.addrs
            .get(name)
            .map(|a| a.wrapping_add(bias))
            .ok_or_else(|| VmError::Missing(format!("symbol gHotSpot{name}")))
    }
}

/// Why the tables could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VmError {
    /// A read failed.
    #[error("cannot read the JVM's memory at {0:#x}")]
    Read(u64),
    /// A symbol, field, type or constant needed is not there.
    #[error("the JVM's {0} is missing")]
    Missing(String),
    /// A table does not look like one (not initialized yet, or not HotSpot's).
    #[error("the JVM's table {0} is malformed: {1}")]
    Malformed(&'static str, &'static str),
}

/// A field of a HotSpot type: its offset in the object, or the address of a static.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// Offset in the object.
    Offset(u64),
    /// Address of a static.
    Static(u64),
}

/// The four tables, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VmStructs {
    /// `Type::field` → where it is.
    pub fields: HashMap<String, Field>,
    /// Type → its size in bytes.
    pub sizes: HashMap<String, u64>,
    /// Integer constants (`frame::interpreter_frame_method_offset`, …).
    pub ints: HashMap<String, i64>,
    /// Long constants.
    pub longs: HashMap<String, u64>,
}

fn u64_at(mem: &dyn Memory, addr: u64) -> Result<u64, VmError> {
    mem.u64_at(addr).ok_or(VmError::Read(addr))
}

fn name_at(mem: &dyn Memory, addr: u64) -> Result<String, VmError> {
    let b = mem.c_string_at(addr, MAX_NAME).ok_or(VmError::Read(addr))?;
    Ok(String::from_utf8_lossy(&b).into_owned())
}

/// An entry layout: the stride and the offsets of the members read, each at most the
/// stride.
fn layout<const N: usize>(
    mem: &dyn Memory,
    syms: &VmSymbols,
    bias: u64,
    table: &'static str,
    stride: &str,
    members: [&str; N],
) -> Result<(u64, [u64; N]), VmError> {
    let stride = u64_at(mem, syms.get(stride, bias)?)?;
    if !(8..=256).contains(&stride) {
        return Err(VmError::Malformed(table, "entry stride"));
    }
    let mut offs = [0; N];
    for (o, m) in offs.iter_mut().zip(members) {
        *o = u64_at(mem, syms.get(m, bias)?)?;
        if o.saturating_add(8) > stride {
            return Err(VmError::Malformed(table, "member offset"));
        }
    }
    Ok((stride, offs))
}

/// The entries of a table: the address of each, until the one whose first name is
/// NULL.
fn entries(
    mem: &dyn Memory,
    start: u64,
    stride: u64,
    name_off: u64,
    table: &'static str,
) -> Result<Vec<(u64, u64)>, VmError> {
    let mut out = Vec::new();
    for i in 0..MAX_ENTRIES as u64 {
        let e = start.wrapping_add(i * stride);
        let name = u64_at(mem, e.wrapping_add(name_off))?;
        if name == 0 {
            return Ok(out);
        }
        out.push((e, name));
    }
    Err(VmError::Malformed(table, "no end"))
}

impl VmStructs {
    /// Reads the tables of the JVM whose libjvm.so has `syms` and is loaded at `bias`.
    pub fn read(mem: &dyn Memory, syms: &VmSymbols, bias: u64) -> Result<VmStructs, VmError> {
        let mut vm = VmStructs::default();
        let table = |name: &str| -> Result<u64, VmError> { u64_at(mem, syms.get(name, bias)?) };

        let (stride, [ty, field, is_static, offset, address]) = layout(
            mem,
            syms,
            bias,
            "VMStructs",
            "VMStructEntryArrayStride",
            [
                "VMStructEntryTypeNameOffset",
                "VMStructEntryFieldNameOffset",
                "VMStructEntryIsStaticOffset",
                "VMStructEntryOffsetOffset",
                "VMStructEntryAddressOffset",
            ],
        )?;
        for (e, ty_name) in entries(mem, table("VMStructs")?, stride, ty, "VMStructs")? {
            let field_name = u64_at(mem, e.wrapping_add(field))?;
            if field_name == 0 {
                continue;
            }
            let key = format!("{}::{}", name_at(mem, ty_name)?, name_at(mem, field_name)?);
            let stat = mem
                .u32_at(e.wrapping_add(is_static))
                .ok_or(VmError::Read(e))?
                != 0;
            let f = if stat {
                Field::Static(u64_at(mem, e.wrapping_add(address))?)
            } else {
                Field::Offset(u64_at(mem, e.wrapping_add(offset))?)
            };
            vm.fields.insert(key, f);
        }

        let (stride, [name, size]) = layout(
            mem,
            syms,
            bias,
            "VMTypes",
            "VMTypeEntryArrayStride",
            ["VMTypeEntryTypeNameOffset", "VMTypeEntrySizeOffset"],
        )?;
        for (e, n) in entries(mem, table("VMTypes")?, stride, name, "VMTypes")? {
            vm.sizes
                .insert(name_at(mem, n)?, u64_at(mem, e.wrapping_add(size))?);
        }

        let (stride, [name, value]) = layout(
            mem,
            syms,
            bias,
            "VMIntConstants",
            "VMIntConstantEntryArrayStride",
            [
                "VMIntConstantEntryNameOffset",
                "VMIntConstantEntryValueOffset",
            ],
        )?;
        for (e, n) in entries(
            mem,
            table("VMIntConstants")?,
            stride,
            name,
            "VMIntConstants",
        )? {
            let v = mem.u32_at(e.wrapping_add(value)).ok_or(VmError::Read(e))? as i32;
            vm.ints.insert(name_at(mem, n)?, i64::from(v));
        }

        let (stride, [name, value]) = layout(
            mem,
            syms,
            bias,
            "VMLongConstants",
            "VMLongConstantEntryArrayStride",
            [
                "VMLongConstantEntryNameOffset",
                "VMLongConstantEntryValueOffset",
            ],
        )?;
        for (e, n) in entries(
            mem,
            table("VMLongConstants")?,
            stride,
            name,
            "VMLongConstants",
        )? {
            vm.longs
                .insert(name_at(mem, n)?, u64_at(mem, e.wrapping_add(value))?);
        }
        Ok(vm)
    }

    /// The offset of `Type::field` (a non-static field).
    pub fn offset(&self, key: &str) -> Result<u64, VmError> {
        match self.fields.get(key) {
            Some(Field::Offset(o)) => Ok(*o),
            _ => Err(VmError::Missing(format!("field {key}"))),
        }
    }

    /// The address of the static `Type::field`.
    pub fn static_addr(&self, key: &str) -> Result<u64, VmError> {
        match self.fields.get(key) {
            Some(Field::Static(a)) => Ok(*a),
            _ => Err(VmError::Missing(format!("static {key}"))),
        }
    }

    /// The size of a type.
    pub fn size(&self, ty: &str) -> Result<u64, VmError> {
        self.sizes
            .get(ty)
            .copied()
            .ok_or_else(|| VmError::Missing(format!("type {ty}")))
    }

    /// An integer constant.
    pub fn int(&self, name: &str) -> Result<i64, VmError> {
        self.ints
            .get(name)
            .copied()
            .ok_or_else(|| VmError::Missing(format!("constant {name}")))
    }
}
