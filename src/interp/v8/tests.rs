//! The V8 reader on the installed Node's binary (its layout) and on heaps built by
//! hand (objects that check out, and forged ones that must not).

use std::collections::HashMap;

use super::heap::{Function, Heap};
use super::layout::{Layout, V8Error};
use crate::interp::Snapshot;

/// The Node binary on PATH, resolved.
fn node_binary() -> Option<std::path::PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|d| d.join("node"))
        .find(|p| p.is_file())
        .and_then(|p| std::fs::canonicalize(p).ok())
}

#[test]
fn the_installed_node_describes_its_frames_and_objects() {
    let Some(path) = node_binary() else {
        // CI installs node (.ci/run); a machine without it has nothing to read.
        assert!(
            std::env::var_os("PROFILE_REQUIRE_CONSUMERS").is_none(),
            "node is not installed"
        );
        return;
    };
    let image = std::fs::read(&path).unwrap();
    let l = Layout::from_elf(&image).unwrap();
    assert!(l.symbols > 300, "{} v8dbg symbols", l.symbols);
    // x86_64 V8 frames: the context (or marker) one word below the frame pointer, the
    // function two words below.
    assert_eq!(l.slots.context_or_marker, -8);
    assert_eq!(l.slots.function, -16);
    assert!(l.slots.bytecode_array < l.slots.function);
    assert!(l.slots.bytecode_offset < l.slots.bytecode_array);
    assert_eq!(l.tagging.heap_object_tag, 1);
    assert_eq!(l.tagging.smi(5 << l.tagging.smi_shift), Some(5));
    assert_eq!(l.tagging.smi(0x1001), None);
    // Frame types by name, markers as V8 writes them (type << 1).
    let interpreted = l
        .frame_types
        .iter()
        .find(|(_, n)| n == "InterpretedFrame")
        .map(|(v, _)| *v)
        .unwrap();
    assert_eq!(
        l.frame_type((interpreted as u64) << 1),
        Some("InterpretedFrame")
    );
    assert!(l.is_marker((interpreted as u64) << 1));
    assert!(
        !l.is_marker(0x7f00_1234_5679),
        "a tagged pointer is a context"
    );
    for name in ["EntryFrame", "ExitFrame", "StubFrame", "BuiltinExitFrame"] {
        assert!(l.frame_types.iter().any(|(_, n)| n == name), "{name}");
    }
    assert!(l.types.js_function < l.types.js_function_end);
    assert_ne!(l.types.shared_function_info, l.types.script);
    let (lo, hi) = l.builtins.expect("node's Builtins_* symbols");
    assert!(lo < hi && hi - lo > 1 << 20, "{lo:#x}..{hi:#x}");
}

#[test]
fn a_binary_without_metadata_is_refused_by_name() {
    let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    assert_eq!(Layout::from_elf(&me), Err(V8Error::NoMetadata));
    assert!(matches!(
        Layout::from_elf(b"not elf"),
        Err(V8Error::NotElf(_))
    ));
    let mut v = values();
    v.remove("off_fp_function");
    assert_eq!(
        Layout::from_values(&v),
        Err(V8Error::Missing("off_fp_function"))
    );
    let mut v = values();
    v.insert("TaggedSize".into(), 4);
    assert!(matches!(
        Layout::from_values(&v),
        Err(V8Error::Unusable {
            name: "TaggedSize",
            ..
        })
    ));
    let mut v = values();
    v.insert(
        "class_JSFunction__shared__SharedFunctionInfo".into(),
        1 << 20,
    );
    assert!(matches!(
        Layout::from_values(&v),
        Err(V8Error::Unusable { .. })
    ));
}

#[test]
fn node_binaries_are_known_by_name() {
    assert!(super::is_node("/usr/bin/node"));
    assert!(super::is_node("/opt/n/node20"));
    assert!(super::is_node("/usr/lib/libnode.so.115"));
    assert!(!super::is_node("/usr/bin/nodemon"));
    assert!(!super::is_node("/usr/lib/libnodejs-helper.so"));
}

/// The values a Node 20 binary gives for what the walker reads.
pub(super) fn values() -> HashMap<String, i64> {
    [
        ("TaggedSize", 8),
        ("SystemPointerSize", 8),
        ("SmiShiftSize", 31),
        ("SmiTagSize", 1),
        ("HeapObjectTagMask", 3),
        ("HeapObjectTag", 1),
        ("SmiTagMask", 1),
        ("SmiTag", 0),
        ("off_fp_context_or_frame_type", -8),
        ("off_fp_function", -16),
        ("off_fp_bytecode_array", -32),
        ("off_fp_bytecode_offset", -40),
        ("class_HeapObject__map__Map", 0),
        ("class_Map__instance_type__uint16_t", 12),
        ("class_JSFunction__shared__SharedFunctionInfo", 24),
        ("class_SharedFunctionInfo__name_or_scope_info__Object", 16),
        (
            "class_SharedFunctionInfo__script_or_debug_info__HeapObject",
            32,
        ),
        ("class_Script__name__Object", 16),
        ("class_String__length__int32_t", 12),
        ("class_SeqOneByteString__chars__char", 16),
        ("class_SeqTwoByteString__chars__char", 16),
        ("class_ConsString__first__String", 16),
        ("class_ConsString__second__String", 24),
        ("class_ThinString__actual__String", 16),
        ("class_SlicedString__parent__String", 16),
        ("class_SlicedString__offset__SMI", 24),
        ("type_JSFunction__JS_FUNCTION_TYPE", 2066),
        ("type_JSAtomicsCondition__JS_ATOMICS_CONDITION_TYPE", 2097),
        ("type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE", 262),
        ("type_Script__SCRIPT_TYPE", 167),
        ("type_ScopeInfo__SCOPE_INFO_TYPE", 261),
        ("type_BytecodeArray__BYTECODE_ARRAY_TYPE", 191),
        ("type_Map__MAP_TYPE", 255),
        ("FirstNonstringType", 128),
        ("StringRepresentationMask", 7),
        ("SeqStringTag", 0),
        ("ConsStringTag", 1),
        ("SlicedStringTag", 3),
        ("ThinStringTag", 5),
        ("StringEncodingMask", 8),
        ("OneByteStringTag", 8),
        ("frametype_EntryFrame", 1),
        ("frametype_InterpretedFrame", 13),
        ("scopeinfo_idx_first_vars", 3),
        ("scopeinfo_idx_ncontextlocals", 2),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// A heap built object by object: each object 0x100 bytes apart, tagged +1.
pub(super) struct Builder {
    pub(super) snap: Snapshot,
    next: u64,
    meta: u64,
}

const SMI: u32 = 32;

impl Builder {
    pub(super) fn new() -> Builder {
        let mut b = Builder {
            snap: Snapshot::default(),
            next: 0x10_0000,
            meta: 0,
        };
        // The meta map: a map whose map is itself.
        let at = b.next;
        b.meta = at + 1;
        b.next += 0x100;
        b.put(at, &[b.meta, 255 << 32 /* instance type at 12 */]);
        b
    }

    fn put(&mut self, at: u64, words: &[u64]) {
        let mut bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        bytes.resize(0x100, 0);
        self.snap.insert(at, bytes);
    }

    /// A map of instance type `ty` (tagged).
    fn map(&mut self, ty: u16) -> u64 {
        let at = self.next;
        self.next += 0x100;
        self.put(at, &[self.meta, u64::from(ty) << 32]);
        at + 1
    }

    /// An object of type `ty` whose words after the map are `rest` (tagged).
    pub(super) fn object(&mut self, ty: u16, rest: &[u64]) -> u64 {
        let map = self.map(ty);
        let at = self.next;
        self.next += 0x100;
        let mut words = vec![map];
        words.extend_from_slice(rest);
        self.put(at, &words);
        at + 1
    }

    /// A one-byte sequential string.
    pub(super) fn string(&mut self, s: &str) -> u64 {
        let map = self.map(8);
        let at = self.next;
        self.next += 0x100;
        let mut bytes = map.to_le_bytes().to_vec();
        bytes.extend_from_slice(&[0; 4]);
        bytes.extend_from_slice(&(s.len() as u32).to_le_bytes());
        bytes.extend_from_slice(s.as_bytes());
        bytes.resize(0x100, 0);
        self.snap.insert(at, bytes);
        at + 1
    }

    /// A function named by string `name` (or ScopeInfo), in script `script`.
    pub(super) fn function(&mut self, name: u64, script: u64) -> u64 {
        let sfi = self.object(262, &[0, name, 0, script]);
        self.object(2066, &[0, 0, sfi])
    }
}

pub(super) fn smi(v: u64) -> u64 {
    v << SMI
}

#[test]
fn a_function_is_named_from_its_shared_info_and_script() {
    let layout = Layout::from_values(&values()).unwrap();
    let mut b = Builder::new();
    let name = b.string("leafMath");
    let file = b.string("/srv/app.js");
    let script = b.object(167, &[0, file]);
    let f = b.function(name, script);
    let heap = Heap {
        layout: &layout,
        mem: &b.snap,
    };
    let sfi = heap.shared_of(f).unwrap();
    let got = heap.function(heap.identity(sfi).unwrap()).unwrap();
    assert_eq!(
        got,
        Function {
            name: "leafMath".into(),
            script: Some("/srv/app.js".into())
        }
    );
    // A class constructor's type (after JS_FUNCTION_TYPE) is a function too.
    let sfi2 = b.object(262, &[0, name, 0, script]);
    let ctor = b.object(2070, &[0, 0, sfi2]);
    let heap = Heap {
        layout: &layout,
        mem: &b.snap,
    };
    assert!(heap.shared_of(ctor).is_some());
}

/// A function the scavenger moved since the sample is read where its old copy's
/// map word says it went, once, and only if what is there checks out.
#[test]
fn a_moved_function_is_followed_to_where_it_went_once() {
    let layout = Layout::from_values(&values()).unwrap();
    let mut b = Builder::new();
    let name = b.string("perRequest");
    let script = b.object(167, &[0, name]);
    let moved = b.function(name, script);
    // Old copies: their map words hold the new address, untagged.
    let old = b.object(2066, &[]);
    b.put(old - 1, &[moved - 1]);
    let older = b.object(2066, &[]);
    b.put(older - 1, &[old - 1]);
    let to_a_string = b.object(2066, &[]);
    b.put(to_a_string - 1, &[name - 1]);
    let heap = Heap {
        layout: &layout,
        mem: &b.snap,
    };
    let sfi = heap.shared_of(moved).unwrap();
    assert_eq!(heap.shared_of(old), Some(sfi));
    assert_eq!(heap.shared_of(older), None, "followed once");
    assert_eq!(heap.shared_of(to_a_string), None, "not a function there");
}

#[test]
fn a_scope_info_gives_the_name_after_its_locals_or_the_inferred_one() {
    let layout = Layout::from_values(&values()).unwrap();
    let mut b = Builder::new();
    let local = b.string("x");
    let name = b.string("middleSort");
    let empty = b.string("");
    let inferred = b.string("obj.method");
    // flags, parameters, 1 context local: its name, its info; then the function's
    // name and its slot.
    let scope = b.object(261, &[smi(0), smi(1), smi(1), local, smi(0), name, smi(2)]);
    let anonymous = b.object(261, &[smi(0), smi(0), smi(0), empty, smi(0), inferred]);
    let nameless = b.object(
        261,
        &[smi(0), smi(0), smi(0), empty, smi(0), smi(5), smi(9)],
    );
    let heap = Heap {
        layout: &layout,
        mem: &b.snap,
    };
    let name_of = |s: u64| heap.function((s, 0)).map(|f| f.name);
    assert_eq!(name_of(scope).as_deref(), Some("middleSort"));
    assert_eq!(name_of(anonymous).as_deref(), Some("obj.method"));
    assert_eq!(name_of(nameless).as_deref(), Some("(anonymous)"));
    // More context locals than the walker reads past: no name rather than a guess.
    let many = b.object(261, &[smi(0), smi(0), smi(1000), name]);
    let heap = Heap {
        layout: &layout,
        mem: &b.snap,
    };
    assert_eq!(heap.function((many, 0)), None);
}

#[test]
fn forged_objects_are_refused() {
    let layout = Layout::from_values(&values()).unwrap();
    let mut b = Builder::new();
    let name = b.string("f");
    let script = b.object(167, &[0, name]);
    // A function whose shared info is a string: refused.
    let bad_sfi = b.object(2066, &[0, 0, name]);
    // An object whose map is not a map (its map's map is not the meta map).
    let fake_map_map = b.object(8, &[]);
    let at = b.next;
    b.next += 0x100;
    b.put(at, &[fake_map_map, 2066u64 << 32]);
    let fake_map = at + 1;
    let at = b.next;
    b.next += 0x100;
    b.put(at, &[fake_map, 0, 0, b.meta]);
    let not_a_function = at + 1;
    // A cons string whose halves are itself: bounded.
    let map = b.map(1);
    let at = b.next;
    b.next += 0x100;
    let cons = at + 1;
    b.put(at, &[map, 4u64 << 32, cons, cons]);
    // A string claiming 2 GiB.
    let map = b.map(8);
    let at = b.next;
    b.next += 0x100;
    b.put(at, &[map, 0x7fff_ffffu64 << 32]);
    let huge = at + 1;
    let heap = Heap {
        layout: &layout,
        mem: &b.snap,
    };
    assert_eq!(heap.shared_of(bad_sfi), None);
    assert_eq!(heap.shared_of(not_a_function), None);
    assert_eq!(heap.shared_of(0x1234_5000), None, "not tagged");
    assert_eq!(heap.shared_of(0xdead_0001), None, "unmapped");
    assert_eq!(heap.string(cons), None);
    // Cut at the name bound, never read whole.
    assert_eq!(heap.string(huge), None, "past the snapshot");
    assert!(heap.function((script, 0)).is_none(), "a script is no name");
}

#[test]
fn the_prefix_scan_finds_what_reading_every_name_finds() {
    use object::{Object, ObjectSymbol};
    let Some(path) = node_binary() else { return };
    let image = std::fs::read(&path).unwrap();
    let file = object::File::parse(&*image).unwrap();
    let every: Vec<String> = file
        .dynamic_symbols()
        .filter_map(|s| s.name().ok()?.strip_prefix("v8dbg_").map(str::to_owned))
        .collect();
    let l = Layout::from_elf(&image).unwrap();
    assert_eq!(l.symbols, every.len());
    let (mut lo, mut hi) = (u64::MAX, 0);
    for s in file.symbols() {
        if s.name().is_ok_and(|n| n.starts_with("Builtins_")) && s.address() != 0 {
            lo = lo.min(s.address());
            hi = hi.max(s.address() + s.size().max(1));
        }
    }
    assert_eq!(l.builtins, Some((lo, hi)));
}
