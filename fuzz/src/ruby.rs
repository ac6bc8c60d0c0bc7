//! Fuzz target `ruby`: a CRuby 3.1 process's memory read as the recorder reads it
//! ([`RubyFrames`], issue 49): the thread found in the main ractor's list, its control
//! frames from where the sample's registers point (or from its current frame), each
//! frame's instruction sequence, strings, line table, method entry and the global
//! symbol table; then the `rb_vm_exec` frames of a native stack replaced, every id
//! named and the notes made.
//!
//! The process is forged into the target (`profile::interp::ruby::forged`: a VM, a
//! ractor, one thread of four frames) and the input is the sample plus patches over
//! it, so mutations reach the checks rather than stop at the first pointer.
//!
//! Input (little-endian):
//! ```text
//! 0      u8      flags: bit 0, the sample's registers are given; bits 1-2, the
//!                `rb_vm_exec` frames of the native stack (0 to 3)
//! 1      u64     the sample's r14 (pc)
//! 9      u64     the sample's r15 (control frame)
//! 17     ...     patches, to the end: u64 address, u8 length, bytes (written over the
//!                region that holds the address)
//! ```

use std::sync::Arc;

use profile::format::{Frame, FrameKind};
use profile::interp::Snapshot;
use profile::interp::ruby::{RubyFrames, Sampled, forged};

const PID: u32 = 7;

/// What one input gave: every frame's name, leaf first, and the notes.
#[derive(Debug)]
pub struct RubyRun {
    /// The merged stack's names (native frames by address).
    pub frames: Vec<String>,
    /// The summary's notes.
    pub notes: Vec<String>,
}

/// The forged memory with `patches` written over it.
fn patched(patches: &[u8]) -> Snapshot {
    let mut regions: Vec<(u64, Vec<u8>)> = (forged::memory().regions())
        .map(|(a, b)| (a, b.to_vec()))
        .collect();
    let mut rest = patches;
    while rest.len() >= 9 {
        let addr = u64::from_le_bytes(rest[..8].try_into().unwrap_or_default());
        let len = (rest[8] as usize).min(rest.len() - 9);
        let bytes = &rest[9..9 + len];
        rest = &rest[9 + len..];
        for (at, region) in &mut regions {
            let Some(off) = addr.checked_sub(*at).and_then(|o| usize::try_from(o).ok()) else {
                continue;
            };
            if off < region.len() {
                let n = bytes.len().min(region.len() - off);
                region[off..off + n].copy_from_slice(&bytes[..n]);
            }
        }
    }
    let mut snap = Snapshot::default();
    for (a, b) in regions {
        snap.insert(a, b);
    }
    snap
}

/// Runs one input; None when it is too short to hold a sample.
pub fn ruby_run(data: &[u8]) -> Option<RubyRun> {
    let flags = *data.first()?;
    let word = |at: usize| Some(u64::from_le_bytes(data.get(at..at + 8)?.try_into().ok()?));
    let (pc, cfp) = (word(1)?, word(9)?);
    let mem = patched(data.get(17..).unwrap_or_default());
    let mut stage = RubyFrames::default();
    let text = (forged::LIB, forged::LIB + 0x4000);
    let syms = Ok(Arc::new(forged::symbols()));
    stage.ruby_found(PID, "libruby.so.3.1", syms, (0, text), || {
        Some(Box::new(mem))
    });
    let native = |addr: u64| Frame {
        kind: FrameKind::Return,
        pid: PID,
        addr,
        mapping: None,
    };
    let mut stack = vec![native(text.0 + 16)];
    for k in 0..(flags >> 1) & 3 {
        stack.extend([native(forged::VM_EXEC.0 + 8), native(0x90 + u64::from(k))]);
    }
    let copy = [0u8; 64];
    let at = (flags & 1 == 1).then_some(Sampled {
        pc,
        cfp,
        stack: &copy,
    });
    stage.read_ahead(PID, forged::TID, 5, at);
    stage.expand(PID, (forged::TID, 5, None), &mut stack);
    let frames = (stack.iter())
        .map(|f| match stage.names(PID, f.addr) {
            Some((_, lines)) if f.kind == FrameKind::Interpreted => lines[0].function.clone(),
            _ => format!("{:#x}", f.addr),
        })
        .collect();
    Some(RubyRun {
        frames,
        notes: stage.notes(),
    })
}

/// The fuzz target: [`ruby_run`], results dropped.
pub fn ruby(data: &[u8]) {
    let _ = ruby_run(data);
}

/// The seeds: the forged sample with its registers, without them, and with its
/// thread's id patched away.
pub fn ruby_seeds() -> Vec<(String, Vec<u8>)> {
    let sample = |flags: u8| {
        let mut v = vec![flags];
        v.extend_from_slice(&forged::LEAF_PC.to_le_bytes());
        v.extend_from_slice(&forged::LEAF_CFP.to_le_bytes());
        v
    };
    let mut gone = sample(5);
    gone.extend_from_slice(&(forged::HEAP + 0x2000 + 88).to_le_bytes());
    gone.extend_from_slice(&[4, 99, 0, 0, 0]);
    vec![
        ("registers".into(), sample(5)),
        ("current".into(), sample(4)),
        ("no-thread".into(), gone),
    ]
}
