//! Round-trip and damage tests of the recording format on synthetic recordings.

use super::*;

mod meta;
mod workloads;

fn meta() -> Meta {
    Meta {
        tool_version: "test".into(),
        pid: Some(42),
        event: "task-clock".into(),
        sample_period_ns: 1_000_000,
        frequency_hz: 1000,
        call_graph: crate::format::CallGraph::Fp,
        ..Meta::default()
    }
}

fn user(addr: u64, mapping: Option<MappingId>) -> Frame {
    Frame {
        kind: FrameKind::User,
        pid: 42,
        addr,
        mapping,
    }
}

/// A recording with two chunks of events, symbols and a summary.
fn sample_recording() -> Vec<u8> {
    let mut w = RecordingWriter::new(Vec::new(), &meta()).unwrap();
    let m = w.mapping(&Mapping {
        pid: 42,
        start: 0x1000,
        end: 0x5000,
        file_offset: 0,
        path: "/bin/x".into(),
        build_id: Some(vec![1, 2, 3]),
        time: 5,
    });
    w.thread_event(&ThreadEvent::Name {
        time: 10,
        pid: 42,
        tid: 43,
        name: "worker".into(),
    });
    let s1 = w.intern_stack(&[user(0x1100, Some(m)), user(0x1200, Some(m))]);
    let s2 = w.intern_stack(&[user(0x1300, Some(m)), user(0x1200, Some(m))]);
    for (i, s) in [s1, s2, s1].into_iter().enumerate() {
        w.sample(&Sample {
            time: 100 + i as u64 * 1_000_000,
            pid: 42,
            tid: 43,
            cpu: 1,
            weight: 1_000_000,
            stack: s,
        });
    }
    w.flush_chunk().unwrap();
    w.lost(2_000_000, 7);
    w.sample(&Sample {
        time: 1_500_000, // out of order across rings: deltas may be negative
        pid: 42,
        tid: 42,
        cpu: 0,
        weight: 1_000_000,
        stack: None,
    });
    w.thread_event(&ThreadEvent::Exit {
        time: 3_000_000,
        pid: 42,
        tid: 43,
    });
    w.symbols(&[FrameSymbols {
        frame: 0,
        source: SymbolSource::Native,
        lines: vec![
            SymbolLine {
                function: "inner".into(),
                file: Some("x.c".into()),
                line: Some(3),
                inlined: true,
            },
            SymbolLine {
                function: "outer".into(),
                file: Some("x.c".into()),
                line: Some(9),
                inlined: false,
            },
        ],
    }])
    .unwrap();
    w.finish(&Summary {
        samples: 4,
        lost: 7,
        stop_reason: crate::format::StopReason::Duration,
        ..Summary::default()
    })
    .unwrap()
}

#[test]
fn round_trip() {
    let bytes = sample_recording();
    let r = Recording::from_bytes(&bytes, "t").unwrap();
    assert_eq!(r.damage, None);
    assert_eq!(r.meta, meta());
    assert_eq!(r.mappings.len(), 1);
    assert_eq!(r.mappings[0].build_id.as_deref(), Some(&[1u8, 2, 3][..]));
    assert_eq!(r.frames.len(), 3, "0x1200 is shared by both stacks");
    assert_eq!(r.nodes.len(), 3, "the root-side node is shared");
    assert_eq!(r.samples.len(), 4);
    assert_eq!(r.samples[3].time, 1_500_000);
    assert_eq!(r.samples[3].stack, None);
    let leaf_first: Vec<u64> = r
        .stack_frames(r.samples[1].stack)
        .map(|f| r.frames[f as usize].addr)
        .collect();
    assert_eq!(leaf_first, [0x1300, 0x1200]);
    assert_eq!(r.lost, 7);
    let names: Vec<&str> = r.symbols[0]
        .as_ref()
        .unwrap()
        .lines
        .iter()
        .map(|l| l.function.as_str())
        .collect();
    assert_eq!(names, ["inner", "outer"]);
    assert_eq!(r.symbols[1], None);
    assert_eq!(
        r.summary.unwrap().stop_reason,
        crate::format::StopReason::Duration
    );
}

#[test]
fn every_truncation_point_reads_a_prefix_without_panicking() {
    let bytes = sample_recording();
    let full = Recording::from_bytes(&bytes, "t").unwrap();
    let mut last_samples = 0;
    for cut in 0..bytes.len() {
        match Recording::from_bytes(&bytes[..cut], "t") {
            Ok(r) => {
                assert!(r.damage.is_some() || r.summary.is_none(), "cut at {cut}");
                assert!(
                    r.samples.len() >= last_samples,
                    "a longer prefix never reads less"
                );
                last_samples = r.samples.len();
                assert!(r.samples.len() <= full.samples.len());
            }
            Err(ReadError::NotARecording(_)) => assert!(cut < HEADER_LEN),
            Err(ReadError::NoMeta(_)) => assert!(cut >= HEADER_LEN),
            Err(e) => panic!("cut at {cut}: {e}"),
        }
    }
    // Cut inside the second events chunk: the first chunk's three samples survive.
    let mut boundaries = vec![];
    let mut pos = HEADER_LEN;
    while pos < bytes.len() {
        let len = u32::from_le_bytes(bytes[pos + 4..pos + 8].try_into().unwrap()) as usize;
        pos += CHUNK_HEADER_LEN + len;
        boundaries.push(pos);
    }
    // meta, events, events, symbols, end
    assert_eq!(boundaries.len(), 5);
    let r = Recording::from_bytes(&bytes[..boundaries[1] + 5], "t").unwrap();
    assert_eq!(r.samples.len(), 3);
    assert!(r.damage.unwrap().contains("ends inside a chunk"));
}

#[test]
fn a_flipped_byte_is_caught_by_the_checksum() {
    let mut bytes = sample_recording();
    let n = bytes.len();
    bytes[n - 30] ^= 0x55;
    let r = Recording::from_bytes(&bytes, "t").unwrap();
    assert!(r.damage.unwrap().contains("checksum"));
    assert_eq!(r.samples.len(), 4, "chunks before the damage are kept");
}

#[test]
fn wrong_magic_and_newer_versions_are_clear_errors() {
    let err = Recording::from_bytes(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\0", "x").unwrap_err();
    assert!(err.to_string().contains("not a profile recording"));
    let mut bytes = sample_recording();
    bytes[8] = 99;
    let err = Recording::from_bytes(&bytes, "x").unwrap_err();
    assert!(err.to_string().contains("version 99"), "{err}");
}

#[test]
fn samples_are_small() {
    // 1,000 samples over 50 distinct 20-frame stacks: the per-sample cost must stay far
    // below the 200-byte budget.
    let mut w = RecordingWriter::new(Vec::new(), &meta()).unwrap();
    let stacks: Vec<_> = (0..50u64)
        .map(|s| {
            let frames: Vec<Frame> = (0..20u64)
                .map(|d| user(0x40_0000 + d * 64 + s * 4096 * (d / 15), None))
                .collect();
            w.intern_stack(&frames)
        })
        .collect();
    for i in 0..1000u64 {
        w.sample(&Sample {
            time: 1_000_000_000 + i * 1_000_137,
            pid: 42,
            tid: 42 + (i % 3) as u32,
            cpu: (i % 2) as u32,
            weight: 1_000_000,
            stack: stacks[(i * 7 % 50) as usize],
        });
    }
    let bytes = w.finish(&Summary::default()).unwrap();
    let per_sample = bytes.len() / 1000;
    assert!(per_sample < 40, "{per_sample} bytes per sample");
}

/// Issue 14: a file cut exactly at a chunk boundary (the writer killed between two
/// chunks) read as whole, with no warning.
#[test]
fn a_file_cut_at_a_chunk_boundary_says_it_is_cut() {
    let bytes = sample_recording();
    let mut pos = HEADER_LEN;
    let mut boundaries = vec![];
    while pos < bytes.len() {
        let len = u32::from_le_bytes(bytes[pos + 4..pos + 8].try_into().unwrap()) as usize;
        pos += CHUNK_HEADER_LEN + len;
        boundaries.push(pos);
    }
    for &cut in &boundaries[..boundaries.len() - 1] {
        let r = Recording::from_bytes(&bytes[..cut], "t").unwrap();
        let damage = r.damage.expect("a warning");
        assert!(
            damage.contains(&format!("cut at byte {cut}")),
            "{cut}: {damage}"
        );
        assert!(damage.contains("no closing chunk"), "{damage}");
    }
    assert_eq!(Recording::from_bytes(&bytes, "t").unwrap().damage, None);
}

#[test]
fn cpu_only_recordings_have_no_off_cpu_fields() {
    let bytes = sample_recording();
    assert_eq!(
        u32::from_le_bytes(bytes[8..12].try_into().unwrap()),
        VERSION
    );
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        !text.contains("off_cpu"),
        "META of a CPU-only recording is unchanged"
    );
}

#[test]
fn off_cpu_intervals_round_trip() {
    let mut m = meta();
    m.off_cpu = true;
    let mut w = RecordingWriter::new(Vec::new(), &m).unwrap();
    let s = w.intern_stack(&[user(0x1100, None), user(0x1200, None)]);
    let intervals = [
        OffCpu {
            time: 5_000,
            pid: 42,
            tid: 43,
            cpu: 1,
            duration: 1_000_000,
            state: ThreadState::Lock,
            weight: 1_000_000,
            stack: s,
        },
        OffCpu {
            time: 2_000_000,
            pid: 42,
            tid: 43,
            cpu: 0,
            duration: 700,
            state: ThreadState::Runnable,
            weight: 0,
            stack: None,
        },
    ];
    for o in &intervals {
        w.off_cpu(o);
    }
    let bytes = w.finish(&Summary::default()).unwrap();
    assert_eq!(
        u32::from_le_bytes(bytes[8..12].try_into().unwrap()),
        VERSION
    );
    let r = Recording::from_bytes(&bytes, "t").unwrap();
    assert_eq!(r.damage, None);
    assert!(r.meta.off_cpu);
    assert_eq!(r.off_cpu, intervals);
    // A state code that is not an off-CPU state is malformed, not misread.
    let mut bad = RecordingWriter::new(Vec::new(), &m).unwrap();
    bad.off_cpu(&OffCpu {
        state: ThreadState::Running,
        ..intervals[1]
    });
    let bytes = bad.finish(&Summary::default()).unwrap();
    let r = Recording::from_bytes(&bytes, "t").unwrap();
    assert!(r.damage.unwrap().contains("does not decode"));
    assert!(r.off_cpu.is_empty());
}

#[test]
fn off_cpu_intervals_are_small() {
    // Intervals without a stack (the bounded-rate case) cost a handful of bytes.
    let mut m = meta();
    m.off_cpu = true;
    let mut w = RecordingWriter::new(Vec::new(), &m).unwrap();
    let base = w.pending_bytes();
    for i in 0..1000u64 {
        w.off_cpu(&OffCpu {
            time: 1_000_000_000 + i * 20_137,
            pid: 42,
            tid: 43 + (i % 2) as u32,
            cpu: (i % 2) as u32,
            duration: 9_000 + i % 300,
            state: ThreadState::Lock,
            weight: 0,
            stack: None,
        });
    }
    let per = (w.pending_bytes() - base) / 1000;
    assert!(per <= 16, "{per} bytes per off-CPU interval");
}

/// A new generation forgets the interned frames, nodes and mappings, but the ids go
/// on: the file reads as if the same frame had been written twice (a host agent
/// writes each window's stacks anew), and every sample's stack is what was given.
#[test]
fn a_new_generation_writes_frames_again_under_new_ids() {
    let mut w = RecordingWriter::new(Vec::new(), &meta()).unwrap();
    w.enable_live();
    let path = |i| Mapping {
        pid: 42,
        start: 0x1000,
        end: 0x5000,
        file_offset: 0,
        path: format!("/bin/x{i}"),
        build_id: None,
        time: 5,
    };
    let m0 = w.mapping(&path(0));
    let stack = |m| [user(0x1100, Some(m)), user(0x1200, Some(m))];
    let s0 = w.intern_stack(&stack(m0)).unwrap();
    let sample = |s| Sample {
        time: 100,
        pid: 42,
        tid: 43,
        cpu: 0,
        weight: 1,
        stack: Some(s),
    };
    w.sample(&sample(s0));
    assert_eq!((w.frames().len(), w.live_nodes().len()), (2, 2));
    let (base, old) = w.new_generation();
    assert_eq!((base, old.len()), (0, 1));
    assert!(w.frames().is_empty() && w.live_nodes().is_empty() && w.mappings().is_empty());
    assert_eq!((w.frame_base(), w.node_base(), w.mapping_base()), (2, 2, 1));
    // The mapping still in use is recorded again; the same stack gets new ids.
    let m1 = w.mapping(&path(0));
    assert_eq!(m1, 1);
    let s1 = w.intern_stack(&stack(m1)).unwrap();
    assert_eq!(s1, 3, "nodes 2 and 3, after the forgotten 0 and 1");
    assert_eq!(w.live_nodes()[(s1 - w.node_base()) as usize].frame, 3);
    w.sample(&sample(s1));
    let bytes = w.finish(&Summary::default()).unwrap();
    let r = Recording::from_bytes(&bytes, "gen").unwrap();
    assert_eq!((r.frames.len(), r.nodes.len(), r.mappings.len()), (4, 4, 2));
    for (s, want) in r.samples.iter().zip([[1, 0], [3, 2]]) {
        let leaf = r.nodes[s.stack.unwrap() as usize];
        let root = r.nodes[leaf.parent.unwrap() as usize];
        assert_eq!([leaf.frame, root.frame], want);
        assert_eq!(r.frames[leaf.frame as usize].addr, 0x1100);
        assert_eq!(r.frames[root.frame as usize].addr, 0x1200);
        let m = r.frames[leaf.frame as usize].mapping.unwrap();
        assert_eq!(r.mappings[m as usize].path, "/bin/x0");
    }
}
