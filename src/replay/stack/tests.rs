//! The stack builder's decisions, each on a hand-made sample.

use super::*;
use crate::unwind::addrspace::{Mapped, Space};

fn chain(entries: &[u64]) -> Vec<u8> {
    entries.iter().flat_map(|e| e.to_le_bytes()).collect()
}

/// Process 7 with one executable mapping, 0x40_0000..0x50_0000.
fn spaces() -> AddressSpaces {
    let mut s = AddressSpaces::default();
    s.space_mut(7).insert(
        0x40_0000,
        Mapped {
            end: 0x50_0000,
            id: 0,
            module: None,
        },
    );
    s
}

fn kinds(frames: &[Frame]) -> Vec<(FrameKind, u64)> {
    frames.iter().map(|f| (f.kind, f.addr)).collect()
}

#[test]
fn frame_pointer_callchains_become_kernel_then_user_frames() {
    let c = chain(&[
        context::KERNEL,
        0xffff_0001,
        context::USER,
        0x40_1000,
        0x40_2000,
    ]);
    let s = Sample {
        pid: 7,
        callchain: &c,
        ..Sample::default()
    };
    let mut b = StackBuilder::new(false, 127);
    b.begin(&s);
    assert_eq!(
        b.unwind(&s, &Space::default(), false),
        None,
        "nothing to unwind"
    );
    let f = b.finish(7, &spaces());
    assert_eq!(
        kinds(f),
        [
            (FrameKind::Kernel, 0xffff_0001),
            (FrameKind::User, 0x40_1000),
            (FrameKind::Return, 0x40_2000)
        ]
    );
    assert!(!b.was_cut());
}

#[test]
fn a_walk_that_found_no_caller_is_marked_but_a_sample_without_chain_is_not() {
    let spaces = spaces();
    let c = chain(&[context::USER, 0x40_1000]);
    let with_chain = Sample {
        pid: 7,
        callchain: &c,
        ..Sample::default()
    };
    let mut b = StackBuilder::new(false, 127);
    b.begin(&with_chain);
    let f = b.finish(7, &spaces).to_vec();
    assert_eq!(f.last(), Some(&Frame::marker(Truncation::NoFramePointer)));
    // perf record without -g: the sampled address alone, not a broken walk.
    let bare = Sample {
        pid: 7,
        ip: Some(0x40_1000),
        ..Sample::default()
    };
    b.begin(&bare);
    assert_eq!(kinds(b.finish(7, &spaces)), [(FrameKind::User, 0x40_1000)]);
    let in_kernel = Sample {
        ip: Some(0xffff_0002),
        in_kernel: true,
        ..bare
    };
    b.begin(&in_kernel);
    assert_eq!(
        kinds(b.finish(7, &spaces)),
        [(FrameKind::Kernel, 0xffff_0002)]
    );
}

#[test]
fn a_chain_as_long_as_the_kernel_gives_was_cut() {
    let mut entries = vec![context::USER];
    entries.extend((0..4).map(|i| 0x40_1000 + i));
    let c = chain(&entries);
    let s = Sample {
        pid: 7,
        callchain: &c,
        ..Sample::default()
    };
    let mut b = StackBuilder::new(false, 5);
    b.begin(&s);
    let f = b.finish(7, &spaces());
    assert_eq!(f.len(), 5);
    assert_eq!(f.last(), Some(&Frame::marker(Truncation::TooDeep)));
}

#[test]
fn a_frame_pointer_chain_that_leaves_mapped_code_stops_there() {
    let c = chain(&[context::USER, 0x40_1000, 0x40_2000, 0xdead_0000, 0x40_3000]);
    let s = Sample {
        pid: 7,
        callchain: &c,
        ..Sample::default()
    };
    let mut b = StackBuilder::new(false, 127);
    b.begin(&s);
    let f = b.finish(7, &spaces());
    assert_eq!(f.len(), 3);
    assert_eq!(f.last(), Some(&Frame::marker(Truncation::NoFramePointer)));
}
