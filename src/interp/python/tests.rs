//! The walkers on memory captured from real CPython processes (3.8 to 3.13), each
//! asleep six calls deep (tests/it/python.rs `FIXTURE_SCRIPT`, captured by its
//! `capture_python_fixtures`): thread state by tid, the chain of frames, names and
//! lines, as read from the live process.

use super::layout::Layout;
use super::walk::Runtime;
use super::{code, runtime};
use crate::interp::{Memory, Snapshot};

/// What every fixture's main thread runs, leaf first.
const EXPECTED: &str = "deep:4 deep:5 deep:5 deep:5 deep:5 deep:5 <module>:7";

struct Fixture {
    snap: Snapshot,
    runtime: u64,
    code_type: u64,
    tid: u32,
    version: (u8, u8),
}

fn fixture(minor: u8) -> Fixture {
    let path = format!(
        "{}/tests/data/python/snap-3.{minor}.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let header = text
        .lines()
        .find_map(|l| l.strip_prefix("# runtime "))
        .unwrap();
    let f: Vec<&str> = header.split(' ').collect();
    let hex = |s: &str| u64::from_str_radix(s, 16).unwrap();
    Fixture {
        snap: Snapshot::from_text(&text).unwrap(),
        runtime: hex(f[0]),
        code_type: hex(f[2]),
        tid: f[4].parse().unwrap(),
        version: (3, minor),
    }
}

fn walk(fx: &Fixture, mem: &impl Memory) -> Option<String> {
    let layout = match Layout::from_debug_offsets(mem, fx.runtime) {
        Some(l) => l.ok()?,
        None => Layout::for_version(fx.version.0, fx.version.1).ok()?,
    };
    assert_eq!(layout.version, fx.version);
    let rt = Runtime {
        layout,
        runtime: fx.runtime,
        code_type: fx.code_type,
    };
    let tstate = *rt
        .thread_states(mem, &mut crate::interp::budget::Walk::new(4096))
        .get(&fx.tid)?;
    let frame = rt.current_frame(mem, tstate)?;
    let (segments, _) = rt.segments(mem, frame, 0).ok()?;
    let mut names = Vec::new();
    for f in segments.iter().flatten() {
        let c = code::read(mem, &rt.layout, rt.code_type, f.code)?;
        names.push(format!("{}:{}", c.name, c.line(&rt.layout, f.offset)?));
    }
    Some(names.join(" "))
}

#[test]
fn every_version_walks_its_captured_memory() {
    for minor in 8..=13 {
        let fx = fixture(minor);
        assert_eq!(walk(&fx, &fx.snap).as_deref(), Some(EXPECTED), "3.{minor}");
    }
}

#[test]
fn the_313_runtime_describes_itself() {
    let fx = fixture(13);
    let l = Layout::from_debug_offsets(&fx.snap, fx.runtime)
        .unwrap()
        .unwrap();
    assert_eq!(l, Layout::for_version(3, 13).unwrap());
    // Before 3.13 there is no cookie: the table decides.
    let fx = fixture(12);
    assert_eq!(Layout::from_debug_offsets(&fx.snap, fx.runtime), None);
}

#[test]
fn a_code_object_that_changed_type_is_not_named() {
    for minor in [8, 12] {
        let fx = fixture(minor);
        // Every word that holds the code type, as if the objects had been freed and
        // their memory reused.
        let text = fx.snap.to_text();
        let needle: String = fx
            .code_type
            .to_le_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let changed = Snapshot::from_text(&text.replace(&needle, &"00".repeat(8))).unwrap();
        assert_eq!(walk(&fx, &changed), None, "3.{minor}");
    }
}

#[test]
fn runtime_tells_the_version_without_a_name() {
    let fx = fixture(13);
    let module = super::PythonModule {
        eval: vec![(0, 1)],
        runtime: fx.runtime,
        code_type: fx.code_type,
        py_version: None,
        name_version: None,
    };
    let rt = runtime(&fx.snap, &module, 0, None).unwrap();
    assert_eq!(rt.layout.version, (3, 13));
    let fx = fixture(12);
    let module = super::PythonModule {
        runtime: fx.runtime,
        ..module
    };
    assert_eq!(
        runtime(&fx.snap, &module, 0, None),
        Err(super::Unsupported::UnknownVersion)
    );
}
