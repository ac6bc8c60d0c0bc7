//! Compiled frames read as their samples are drained (issue 48), on the memory of a
//! real JDK 17 (tests/data/java/jvm17-inline.snapshot.gz, see `inlined_tests`): a
//! sample's frames keep the names read at the drain after their code is freed, a
//! sample drained after that says why its frame was not read, and the summary counts
//! such frames by reason.

use std::collections::{HashMap, HashSet};

use super::ahead::{Ahead, Found, Reader, Unread};
use super::compiled::Nmethod;
use super::inlined_tests::{fixture, prepare};
use super::named::Named;
use super::{JavaFrames, JavaStats};
use crate::interp::budget::{Lru, Meter, Pool, Trips};
use crate::interp::{Budgets, Memory};
use crate::unwind::{JitFrame, JitKind};

fn named() -> Named {
    Named {
        methods: Lru::default(),
        meter: Meter::new(Pool::default(), Budgets::default()),
        trips: Trips::default(),
        tried: HashSet::new(),
        ids: HashMap::new(),
        names: HashMap::new(),
        next_id: 1,
        pruned: 0,
    }
}

/// A memory whose range `gone` reads nothing: the nmethod freed, its block reused.
struct Freed<'a> {
    inner: &'a dyn Memory,
    gone: (u64, u64),
}

impl Memory for Freed<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        let end = addr.saturating_add(buf.len() as u64);
        end <= self.gone.0 || addr >= self.gone.1 || !self.inner.read(addr, buf)
    }
}

#[test]
fn a_sample_read_as_drained_keeps_its_names_after_its_code_is_freed() {
    let (snap, syms, v) = fixture();
    let (layout, code) = prepare(&snap, &syms, v["bias"]);
    let (pc_a, pc_b) = (v["pc_a"], v["pc_b"]);
    let reader = |mem| Reader {
        mem,
        code: &code,
        layout: &layout,
        interpreter: (0, 0),
        epoch: Some(0),
    };
    let mut named = named();
    let mut ahead = Ahead::default();
    // The leaf in mixA's inlined code; the stack holds pc_b (mixB's) and a word that
    // is no code.
    let sp = 0x7fff_0000_0000;
    let stack: Vec<u8> = [pc_b, 0x1234, pc_a]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    ahead.read_sample(&reader(&snap), &mut named, 100, (pc_a, sp, &stack));
    // Read again (a held sample is warmed again): left as first read.
    ahead.read_sample(&reader(&snap), &mut named, 100, (pc_a, sp, &stack));
    let found = ahead.take(100, sp).expect("read ahead");
    // pc_b, a leaf's pc, is no return address (HotSpot keeps a `PcDesc` at each):
    // as a word of the stack it is no frame, and nothing is read for it.
    assert_eq!(found.len(), 1, "the leaf alone: {found:?}");
    // As a sample's leaf it is.
    ahead.read_sample(&reader(&snap), &mut named, 150, (pc_b, sp, &[]));
    let found_b = ahead.take(150, sp).expect("read ahead");
    let names = |f: Found| match f {
        Found::Frame(id) => named.names[&id].1.clone(),
        other => panic!("{other:?}"),
    };
    let a = names(found.iter().find(|e| e.0 == pc_a).unwrap().1);
    assert_eq!(a.len(), 3, "{a:?}");
    assert!(a[0].function.contains("mixA") && a[0].inlined && a[0].line.is_some());
    assert!(a[2].function.contains("Inline.work") && !a[2].inlined);
    let b = names(found_b.iter().find(|e| e.0 == pc_b).unwrap().1);
    assert!(b[0].function.contains("mixB"), "{b:?}");
    assert_eq!(ahead.take(100, sp), None, "taken once");

    // A sample drained after the nmethod was freed: its frame is not read, and says
    // why. The drain before it checked the blob; this one checks it again.
    ahead.tick();
    // (pc_b's: the snapshot holds the segment map bytes read for it; pc_a is in the
    // same nmethod, found above as a blob already met.)
    let blob = code.blob_header(&snap, pc_b).unwrap().blob;
    let freed = Freed {
        inner: &snap,
        gone: (blob.saturating_sub(64), blob + 0x400),
    };
    ahead.read_sample(&reader(&freed), &mut named, 200, (pc_a, sp, &stack));
    let found = ahead.take(200, sp).unwrap();
    assert!(
        found.iter().all(|e| e.1 == Found::Unread(Unread::Freed)),
        "{found:?}"
    );
    // The count of unloaded classes unknown: no method is read. (The pcs found in no
    // code above are taken to be in none for a few drains: let them pass.)
    for _ in 0..super::ahead::NOWHERE_DRAINS {
        ahead.tick();
    }
    let r = Reader {
        epoch: None,
        ..reader(&snap)
    };
    ahead.read_sample(&r, &mut named, 300, (pc_a, sp, &stack));
    let found = ahead.take(300, sp).unwrap();
    assert!(
        found
            .iter()
            .all(|e| e.1 == Found::Unread(Unread::Unloading))
    );
}

#[test]
fn samples_never_unwound_are_let_go() {
    let (snap, syms, v) = fixture();
    let (layout, code) = prepare(&snap, &syms, v["bias"]);
    let r = Reader {
        mem: &snap,
        code: &code,
        layout: &layout,
        interpreter: (0, 0),
        epoch: Some(0),
    };
    let (mut named, mut ahead) = (named(), Ahead::default());
    for t in 1..=3 {
        ahead.read_sample(&r, &mut named, t, (v["pc_a"], 8 * t, &[]));
    }
    // Unwound in time order: the sample at 3 comes after 1 and 2, never unwound.
    assert!(ahead.take(3, 24).is_some());
    assert_eq!(ahead.take(1, 8), None);
    assert_eq!(ahead.take(2, 16), None);
    // No pc in the code heaps: nothing kept.
    ahead.read_sample(&r, &mut named, 9, (8, 72, &[]));
    assert_eq!(ahead.take(9, 72), None);
}

#[test]
fn the_summary_counts_unread_compiled_frames_by_reason() {
    let mut java = JavaFrames::new(|| 0);
    assert!(java.notes().is_empty());
    java.stats = JavaStats {
        compiled: 7,
        unread: [2, 1, 0, 0, 4],
        ..JavaStats::default()
    };
    let notes = java.notes();
    assert_eq!(notes.len(), 1, "{notes:?}");
    let n = &notes[0];
    assert!(
        n.starts_with("7 of 14 compiled Java frames (50.0%) have no line and no inlined methods: ")
            && n.contains(
                "2 their code was freed before their sample was drained; 1 they were not read"
            )
            && n.contains("; 4 the JVM kept no debug information at their pc")
            && n.contains("-XX:+DebugNonSafepoints")
            && !n.contains("did not check out"),
        "{n}"
    );
}

#[test]
fn a_pc_with_no_debug_information_is_its_compiled_method_alone_and_counted() {
    let (snap, syms, v) = fixture();
    let (layout, code) = prepare(&snap, &syms, v["bias"]);
    let (pc_b, end) = (v["pc_b"], v["end"]);
    let blob = code.blob_header(&snap, pc_b).unwrap().blob;
    let nm = Nmethod::read(&snap, code.layout(), blob, pc_b).unwrap();
    // A pc past the nmethod's last scope (its next `PcDesc` the end sentinel): code
    // where C2 kept no debug information (no call, no safepoint after it).
    let bare = (pc_b..end)
        .rev()
        .find(|&pc| {
            nm.pc_desc(pc)
                .and_then(|d| nm.scopes(d))
                .is_some_and(|s| s.is_empty())
        })
        .expect("a pc with no debug information");
    let r = Reader {
        mem: &snap,
        code: &code,
        layout: &layout,
        interpreter: (0, 0),
        epoch: Some(0),
    };
    let (mut named, mut ahead) = (named(), Ahead::default());
    let stack: Vec<u8> = bare.to_le_bytes().to_vec();
    // pc_b first (its blob found through the segment map), then `bare` in that blob.
    ahead.read_sample(&r, &mut named, 1, (pc_b, 8, &stack));
    let found = ahead.take(1, 8).unwrap();
    let Some(&(_, Found::Bare(id))) = found.iter().find(|e| e.0 == bare) else {
        panic!("{found:?}");
    };
    let lines = &named.names[&id].1;
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].function.contains("Inline.work") && lines[0].line.is_none());
    assert!(matches!(
        found.iter().find(|e| e.0 == pc_b),
        Some((_, Found::Frame(_)))
    ));
}

/// A memory whose bytes at `at` are `code` (the snapshot holds no code bytes).
struct WithCode<'a> {
    inner: &'a dyn Memory,
    at: u64,
    code: &'a [u8],
}

impl Memory for WithCode<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        match addr
            .checked_sub(self.at)
            .and_then(|o| usize::try_from(o).ok())
        {
            Some(o) if o + buf.len() <= self.code.len() => {
                buf.copy_from_slice(&self.code[o..o + buf.len()]);
                true
            }
            _ => self.inner.read(addr, buf),
        }
    }
}

/// What the drains found is what the unwinder looks JIT code up in (no perf map): a
/// pc in an nmethod met is that nmethod's code, from its start, with the frame its
/// prologue sets up; a pc in no blob met is none.
#[test]
fn the_unwinder_finds_the_blobs_the_drains_met() {
    let (snap, syms, v) = fixture();
    let (layout, code) = prepare(&snap, &syms, v["bias"]);
    // (pc_b's segment map bytes are in the snapshot.)
    let pc = v["pc_b"];
    let header = code.blob_header(&snap, pc).unwrap();
    // `push %rbp; sub $0x30,%rsp`: HotSpot's compiled-method prologue.
    let mut prologue = [0x90u8; crate::unwind::PROLOGUE_BYTES];
    prologue[..5].copy_from_slice(&[0x55, 0x48, 0x83, 0xec, 0x30]);
    let mem = WithCode {
        inner: &snap,
        at: header.code.0,
        code: &prologue,
    };
    let r = Reader {
        mem: &mem,
        code: &code,
        layout: &layout,
        interpreter: (0, 0),
        epoch: Some(0),
    };
    let mut named = named();
    let mut ahead = Ahead::default();
    assert_eq!(ahead.jit_code(pc), None, "nothing met yet");
    ahead.read_sample(&r, &mut named, 100, (pc, 0x7fff_0000_0000, &[]));
    let found = ahead.jit_code(pc).expect("met at the drain");
    assert_eq!(found.start, header.code.0);
    assert_eq!(
        found.kind,
        JitKind::Method(JitFrame::Sized {
            ra: 0x38,
            bp: 0x30,
            body: 5
        })
    );
    assert_eq!(ahead.blob_of(pc), Some((header.code.0, header.compile_id)));
    assert_eq!(ahead.jit_code(header.code.1), None, "past its code");
}
