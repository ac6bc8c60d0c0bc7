//! Where CPython keeps what a profiler needs, per minor version: the offsets of the
//! fields followed from `_PyRuntime` to a thread's frames and from a code object to
//! its name and lines. The table is data (one [`Layout`] per version, read off the
//! interpreters' own debug info); 3.13+ also describes itself in `_Py_DebugOffsets`
//! at the start of `_PyRuntime`, which [`Layout::from_debug_offsets`] reads over the
//! table's entry. Adding a version is adding a row: 3.14 keeps the 3.13 frame shape.

use crate::interp::Memory;

/// How a version chains its frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameShape {
    /// 3.8–3.10: `PyFrameObject`s linked by `f_back`, one per native eval call.
    Object {
        /// `f_back`: the caller's frame object.
        back: u64,
        /// `f_code`.
        code: u64,
        /// `f_lasti` (an int): a byte offset (3.8, 3.9) or a code-unit index (3.10).
        lasti: u64,
        /// Whether `f_lasti` counts 2-byte code units rather than bytes.
        lasti_in_units: bool,
    },
    /// 3.11+: `_PyInterpreterFrame`s in the thread's data stack, several per native
    /// eval call.
    Interpreter {
        /// `previous`: the caller's frame.
        previous: u64,
        /// `f_code` (3.11, 3.12) or `f_executable` (3.13+).
        code: u64,
        /// `prev_instr` (3.11, 3.12: the last instruction started) or `instr_ptr`
        /// (3.13+: the instruction running).
        instr: u64,
        /// `owner` (a byte).
        owner: u64,
        /// 3.11's `is_entry` byte; later versions mark an eval call's bottom with a
        /// shim frame owned by the C stack instead.
        is_entry: Option<u64>,
    },
}

/// How a code object's line table is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineTable {
    /// 3.8, 3.9: `co_lnotab`, (byte delta, line delta) pairs.
    Lnotab,
    /// 3.10: `co_linetable`, (byte delta, line delta) pairs, -128 for no line.
    Linetable310,
    /// 3.11+: `co_linetable`, the location table (PEP 657).
    Locations,
}

/// Where the bytecode of a code object is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bytecode {
    /// In a bytes object `co_code` points to (3.8–3.10).
    BytesObject(u64),
    /// Inline in the code object from this offset (`co_code_adaptive`, 3.11+); the
    /// code object's `ob_size` counts its 2-byte code units.
    Inline(u64),
}

/// How big a code object's frame is in the thread's data stack (3.11+).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameSize {
    /// Not known (before 3.11, where frames are objects; or a version with no row).
    Unknown,
    /// `co_framesize`, an int (3.12+).
    Field(u64),
    /// 3.11: `co_nlocalsplus + co_stacksize` plus the frame's own words.
    Sum {
        /// `co_nlocalsplus`, an int.
        nlocalsplus: u64,
        /// `co_stacksize`, an int.
        stacksize: u64,
        /// `(sizeof(_PyInterpreterFrame) - 1) / sizeof(PyObject *)`.
        specials: u64,
    },
}

/// The offsets of one CPython version (64-bit builds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// (major, minor).
    pub version: (u8, u8),
    /// `_PyRuntimeState.interpreters.head`.
    pub runtime_interpreters_head: u64,
    /// `PyInterpreterState.next`.
    pub interp_next: u64,
    /// `PyInterpreterState.tstate_head` / `threads.head`.
    pub interp_threads_head: u64,
    /// `PyThreadState.next`.
    pub tstate_next: u64,
    /// `thread_id`: the thread's `pthread_t`.
    pub tstate_thread_id: u64,
    /// `native_thread_id` (3.11+): the thread's tid.
    pub tstate_native_thread_id: Option<u64>,
    /// The field that leads to the current frame: `frame` (3.8–3.10), `cframe`
    /// (3.11, 3.12: then [`Layout::cframe_current_frame`] inside it),
    /// `current_frame` (3.13+).
    pub tstate_frame: u64,
    /// The current frame inside `_PyCFrame` (3.11, 3.12).
    pub cframe_current_frame: Option<u64>,
    /// How frames chain.
    pub frame: FrameShape,
    /// `co_filename` (a str).
    pub code_filename: u64,
    /// `co_name` (a str).
    pub code_name: u64,
    /// `co_qualname` (a str, 3.11+).
    pub code_qualname: Option<u64>,
    /// An int.
    pub code_firstlineno: u64,
    /// `co_linetable` / `co_lnotab` (a bytes object).
    pub code_linetable: u64,
    /// Where the bytecode is.
    pub code_bytecode: Bytecode,
    /// How many words a frame of a code object takes in the thread's data stack
    /// (3.11+): a callee is pushed right after its caller's frame.
    pub code_framesize: FrameSize,
    /// `co_names` and `co_localsplusnames` (tuples of str, 3.11+): the names a code
    /// object's calls can go through, so that a caller read after the sample is kept
    /// only if it can name the callee read with it.
    pub code_names: Option<(u64, u64)>,
    /// How the line table is encoded.
    pub line_table: LineTable,
    /// `sizeof(PyASCIIObject)`: where an ASCII string's characters start.
    pub unicode_ascii_size: u64,
    /// `sizeof(PyCompactUnicodeObject)`: where other compact strings' start.
    pub unicode_compact_size: u64,
}

/// Common to every version.
pub const OB_TYPE: u64 = 8;
/// `PyObject.ob_type`.
pub const OB_SIZE: u64 = 16;
/// `PyVarObject.ob_size`.
pub const BYTES_SVAL: u64 = 32;
/// Where a tuple's items start (`ob_item`).
pub const TUPLE_ITEMS: u64 = 24;
/// `PyUnicodeObject.length` and `.state`.
pub const UNICODE_LENGTH: u64 = 16;
/// `PyBytesObject.ob_sval`: a bytes object's first byte.
pub const UNICODE_STATE: u64 = 32;
/// `_PyInterpreterFrame.owner`: owned by a C stack (a shim at an eval call's bottom,
/// 3.12+).
pub const OWNED_BY_CSTACK: u8 = 3;
/// `_PyInterpreterFrame.owner` of a frame in the thread's data stack (3.11+).
pub const OWNED_BY_THREAD: u8 = 0;
/// Where a data stack chunk's first frame lies in its page (after the chunk's
/// `previous`, `size` and `top`, 3.11+): a callee pushed in a new chunk.
pub const CHUNK_FIRST_FRAME: u64 = 24;
/// Bytes of a `_PyInterpreterFrame` read at once (3.11+): every field the walker
/// reads of a frame lies in them.
pub const FRAME_HEAD: u64 = 72;

const fn object_frames(lasti: u64, lasti_in_units: bool) -> FrameShape {
    FrameShape::Object {
        back: 24,
        code: 32,
        lasti,
        lasti_in_units,
    }
}

const V38: Layout = Layout {
    version: (3, 8),
    runtime_interpreters_head: 32,
    interp_next: 0,
    interp_threads_head: 8,
    tstate_next: 8,
    tstate_thread_id: 176,
    tstate_native_thread_id: None,
    tstate_frame: 24,
    cframe_current_frame: None,
    frame: object_frames(104, false),
    code_filename: 104,
    code_name: 112,
    code_qualname: None,
    code_firstlineno: 40,
    code_linetable: 120,
    code_bytecode: Bytecode::BytesObject(48),
    code_framesize: FrameSize::Unknown,
    code_names: None,
    line_table: LineTable::Lnotab,
    unicode_ascii_size: 48,
    unicode_compact_size: 72,
};

/// The table: read off each version's DWARF (`print &((T*)0)->field` in gdb).
const TABLE: &[Layout] = &[
    V38,
    Layout {
        version: (3, 9),
        ..V38
    },
    Layout {
        version: (3, 10),
        frame: object_frames(96, true),
        line_table: LineTable::Linetable310,
        ..V38
    },
    Layout {
        version: (3, 11),
        runtime_interpreters_head: 40,
        interp_next: 0,
        interp_threads_head: 16,
        tstate_next: 8,
        tstate_thread_id: 152,
        tstate_native_thread_id: Some(160),
        tstate_frame: 56,
        cframe_current_frame: Some(8),
        frame: FrameShape::Interpreter {
            previous: 48,
            code: 32,
            instr: 56,
            owner: 69,
            is_entry: Some(68),
        },
        code_filename: 112,
        code_name: 120,
        code_qualname: Some(128),
        code_firstlineno: 72,
        code_linetable: 136,
        code_bytecode: Bytecode::Inline(184),
        code_framesize: FrameSize::Sum {
            nlocalsplus: 76,
            stacksize: 68,
            specials: 9,
        },
        code_names: Some((32, 96)),
        line_table: LineTable::Locations,
        unicode_ascii_size: 48,
        unicode_compact_size: 72,
    },
    Layout {
        version: (3, 12),
        runtime_interpreters_head: 40,
        interp_next: 0,
        interp_threads_head: 72,
        tstate_next: 8,
        tstate_thread_id: 136,
        tstate_native_thread_id: Some(144),
        tstate_frame: 56,
        cframe_current_frame: Some(0),
        frame: FrameShape::Interpreter {
            previous: 8,
            code: 0,
            instr: 56,
            owner: 70,
            is_entry: None,
        },
        code_filename: 112,
        code_name: 120,
        code_qualname: Some(128),
        code_firstlineno: 68,
        code_linetable: 136,
        code_bytecode: Bytecode::Inline(192),
        code_framesize: FrameSize::Field(76),
        code_names: Some((32, 96)),
        line_table: LineTable::Locations,
        unicode_ascii_size: 40,
        unicode_compact_size: 56,
    },
    Layout {
        version: (3, 13),
        runtime_interpreters_head: 632,
        interp_next: 7264,
        interp_threads_head: 7344,
        tstate_next: 8,
        tstate_thread_id: 152,
        tstate_native_thread_id: Some(160),
        tstate_frame: 72,
        cframe_current_frame: None,
        frame: FrameShape::Interpreter {
            previous: 8,
            code: 0,
            instr: 56,
            owner: 70,
            is_entry: None,
        },
        code_filename: 112,
        code_name: 120,
        code_qualname: Some(128),
        code_firstlineno: 68,
        code_linetable: 136,
        code_bytecode: Bytecode::Inline(200),
        code_framesize: FrameSize::Field(76),
        code_names: Some((32, 96)),
        line_table: LineTable::Locations,
        unicode_ascii_size: 40,
        unicode_compact_size: 56,
    },
];

/// The first bytes of `_Py_DebugOffsets` (3.13+), at the start of `_PyRuntime`.
pub const DEBUG_COOKIE: &[u8; 8] = b"xdebugpy";

/// Why a process's Python frames cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unsupported {
    /// A version the table has no row for and that does not describe itself.
    Version(u8, u8),
    /// A free-threaded build (3.13t): its frames and thread states differ.
    FreeThreaded,
    /// Nothing said which version it is (an executable named `python3` before 3.11).
    UnknownVersion,
}

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unsupported::Version(a, b) => {
                write!(f, "CPython {a}.{b} is not supported (3.8 to 3.13 are)")
            }
            Unsupported::FreeThreaded => {
                write!(f, "free-threaded CPython builds are not supported")
            }
            Unsupported::UnknownVersion => write!(f, "its CPython version could not be told"),
        }
    }
}

impl Layout {
    /// The table's row for a version.
    pub fn for_version(major: u8, minor: u8) -> Result<Layout, Unsupported> {
        TABLE
            .iter()
            .find(|l| l.version == (major, minor))
            .copied()
            .ok_or(Unsupported::Version(major, minor))
    }

    /// The layout a 3.13+ runtime describes in its `_Py_DebugOffsets` at `runtime`,
    /// over the table's row for its version (or 3.13's for a later one: the string
    /// and bytecode offsets it does not describe are 3.13's); None when the runtime
    /// does not start with the debug cookie (before 3.13).
    pub fn from_debug_offsets(
        mem: &impl Memory,
        runtime: u64,
    ) -> Option<Result<Layout, Unsupported>> {
        let mut head = [0u8; 360];
        if !mem.read(runtime, &mut head) || &head[..8] != DEBUG_COOKIE {
            return None;
        }
        let at = |off: usize| u64::from_le_bytes(head[off..off + 8].try_into().unwrap_or_default());
        let hex = at(8);
        let (major, minor) = ((hex >> 24) as u8, (hex >> 16) as u8);
        if at(16) != 0 {
            return Some(Err(Unsupported::FreeThreaded));
        }
        let base = match Layout::for_version(major, minor) {
            Ok(l) => l,
            Err(_) if (major, minor) > (3, 13) => Layout::for_version(3, 13).ok()?,
            Err(e) => return Some(Err(e)),
        };
        // Offsets bigger than their structure's stated size are not believed; a
        // frame's fields must lie in the head the walker reads of each frame.
        let sane = |off: u64, size: u64| (off < size && off < 1 << 20).then_some(off);
        let head = |off: u64, len: u64| (off.checked_add(len)? <= FRAME_HEAD).then_some(off);
        let (rt, is, ts, fr, co) = (at(24), at(48), at(152), at(224), at(272));
        let layout = Layout {
            version: (major, minor),
            runtime_interpreters_head: sane(at(40), rt)?,
            interp_next: sane(at(64), is)?,
            interp_threads_head: sane(at(72), is)?,
            tstate_next: sane(at(168), ts)?,
            tstate_frame: sane(at(184), ts)?,
            tstate_thread_id: sane(at(192), ts)?,
            tstate_native_thread_id: Some(sane(at(200), ts)?),
            cframe_current_frame: None,
            frame: FrameShape::Interpreter {
                previous: head(sane(at(232), fr)?, 8)?,
                code: head(sane(at(240), fr)?, 8)?,
                instr: head(sane(at(248), fr)?, 8)?,
                owner: head(sane(at(264), fr)?, 1)?,
                is_entry: None,
            },
            code_filename: sane(at(280), co)?,
            code_name: sane(at(288), co)?,
            code_qualname: Some(sane(at(296), co)?),
            code_linetable: sane(at(304), co)?,
            code_firstlineno: sane(at(312), co)?,
            code_bytecode: Bytecode::Inline(sane(at(344), co + 1)?),
            // Not among the debug offsets: the table's, for a version it has.
            code_framesize: if (major, minor) == base.version {
                base.code_framesize
            } else {
                FrameSize::Unknown
            },
            code_names: if (major, minor) == base.version {
                base.code_names
            } else {
                None
            },
            ..base
        };
        Some(Ok(layout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::Snapshot;

    #[test]
    fn every_supported_version_has_a_row() {
        for minor in 8..=13 {
            let l = Layout::for_version(3, minor).unwrap();
            assert_eq!(l.version, (3, minor));
            assert_eq!(l.tstate_native_thread_id.is_some(), minor >= 11);
            assert_eq!(l.code_qualname.is_some(), minor >= 11);
        }
        assert_eq!(Layout::for_version(3, 7), Err(Unsupported::Version(3, 7)));
    }

    /// A `_Py_DebugOffsets` as 3.13.0 writes it, its fields from the table.
    fn debug_offsets(version: u64, free_threaded: u64) -> Vec<u8> {
        let mut v = vec![0u8; 360];
        v[..8].copy_from_slice(DEBUG_COOKIE);
        let mut put = |off: usize, x: u64| v[off..off + 8].copy_from_slice(&x.to_le_bytes());
        put(8, version);
        put(16, free_threaded);
        for (off, x) in [
            (24, 283_320),
            (40, 632),
            (48, 100_000),
            (64, 7264),
            (72, 7344),
            (152, 304),
            (168, 8),
            (184, 72),
            (192, 152),
            (200, 160),
            (224, 80),
            (232, 8),
            (240, 0),
            (248, 56),
            (264, 70),
            (272, 208),
            (280, 112),
            (288, 120),
            (296, 128),
            (304, 136),
            (312, 68),
            (344, 200),
        ] {
            put(off, x);
        }
        v
    }

    #[test]
    fn debug_offsets_give_the_tables_row_for_313() {
        let mut s = Snapshot::default();
        s.insert(0x1000, debug_offsets(0x030d_00f0, 0));
        let l = Layout::from_debug_offsets(&s, 0x1000).unwrap().unwrap();
        assert_eq!(l, Layout::for_version(3, 13).unwrap());
        let mut s = Snapshot::default();
        s.insert(0x1000, debug_offsets(0x030d_00f0, 1));
        assert_eq!(
            Layout::from_debug_offsets(&s, 0x1000),
            Some(Err(Unsupported::FreeThreaded))
        );
        // A later version is read with its own offsets.
        let mut s = Snapshot::default();
        s.insert(0x1000, debug_offsets(0x030e_00f0, 0));
        assert_eq!(
            Layout::from_debug_offsets(&s, 0x1000)
                .unwrap()
                .unwrap()
                .version,
            (3, 14)
        );
        let mut s = Snapshot::default();
        s.insert(0x1000, vec![0; 360]);
        assert_eq!(Layout::from_debug_offsets(&s, 0x1000), None);
        // A frame field past the head the walker reads of each frame (found by the
        // `python` fuzz target: the walker indexed past its 72 bytes): not believed.
        for (off, x) in [(224, 4096), (264, 255), (248, 68)] {
            let mut v = debug_offsets(0x030d_00f0, 0);
            v[224..232].copy_from_slice(&4096u64.to_le_bytes());
            v[off..off + 8].copy_from_slice(&(x as u64).to_le_bytes());
            let mut s = Snapshot::default();
            s.insert(0x1000, v);
            let l = Layout::from_debug_offsets(&s, 0x1000);
            assert_eq!(l.is_none(), off != 224, "{off} {x}");
        }
    }
}
