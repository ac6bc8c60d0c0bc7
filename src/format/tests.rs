//! Round-trip and damage tests of the recording format on synthetic recordings.

use super::*;

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

/// `bytes` with its META chunk's JSON replaced by `json` (checksum redone).
fn with_meta_json(bytes: &[u8], json: &str) -> Vec<u8> {
    let len = u32::from_le_bytes(bytes[HEADER_LEN + 4..HEADER_LEN + 8].try_into().unwrap());
    let rest = &bytes[HEADER_LEN + CHUNK_HEADER_LEN + len as usize..];
    let mut out = bytes[..HEADER_LEN].to_vec();
    out.extend_from_slice(&chunk::META.to_le_bytes());
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(json.as_bytes()).to_le_bytes());
    out.extend_from_slice(json.as_bytes());
    out.extend_from_slice(rest);
    out
}

#[test]
fn a_recording_from_before_cpu_model_reads_with_it_empty() {
    // The META JSON exactly as release 0.2 wrote it: no `cpu_model`.
    let old = r#"{"tool_version":"0.2.0","command":["./bench"],"pid":42,"launched":true,"event":"task-clock","sample_period_ns":1001001,"frequency_hz":999,"call_graph":"dwarf","stack_size":16384,"start_time_ns":5,"start_unix_ns":6,"hostname":"ci-7","kernel":"6.1.0"}"#;
    let r = Recording::from_bytes(&with_meta_json(&sample_recording(), old), "old").unwrap();
    assert_eq!(r.damage, None);
    assert_eq!(r.meta.hostname, "ci-7");
    assert_eq!(r.meta.cpu_model, "");
    assert_eq!(r.samples.len(), 4);
}

#[test]
fn the_cpu_model_round_trips_and_is_left_out_when_unknown() {
    let mut m = meta();
    m.cpu_model = "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz".into();
    let mut bytes = Vec::new();
    RecordingWriter::new(&mut bytes, &m).unwrap();
    assert_eq!(Recording::from_bytes(&bytes, "t").unwrap().meta, m);
    let mut bytes = Vec::new();
    RecordingWriter::new(&mut bytes, &meta()).unwrap();
    assert!(!String::from_utf8_lossy(&bytes).contains("cpu_model"));
}

#[test]
fn the_cpu_model_is_read_from_cpuinfo() {
    let x86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R)  CPU @ 2.90GHz\n\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R)  CPU @ 2.90GHz\n";
    assert_eq!(cpu_model_of(x86), "Intel(R) Xeon(R) CPU @ 2.90GHz");
    let arm = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n";
    assert_eq!(cpu_model_of(arm), "0xd0c");
    assert_eq!(cpu_model_of(""), "");
}

#[test]
fn workloads_round_trip_and_old_readers_read_the_rest_as_before() {
    let w0 = WorkloadEvent {
        time: 7,
        pid: 42,
        cgroup: "/system.slice/nginx.service".into(),
        exe: "/usr/sbin/nginx".into(),
        kernel: false,
        delegated: Some(Delegation {
            depth: 3,
            uid: Some(1000),
        }),
    };
    let w1 = WorkloadEvent {
        time: 900,
        pid: 2,
        cgroup: "/".into(),
        exe: String::new(),
        kernel: true,
        delegated: None,
    };
    let mut w = RecordingWriter::new(Vec::new(), &meta()).unwrap();
    w.workload(&w0);
    let s = w.intern_stack(&[user(0x1100, None)]);
    w.sample(&Sample {
        time: 100,
        pid: 42,
        tid: 42,
        cpu: 0,
        weight: 1,
        stack: s,
    });
    w.flush_chunk().unwrap();
    // A workload alone still goes out at the next flush.
    w.workload(&w1);
    w.flush_chunk().unwrap();
    let bytes = w.finish(&Summary::default()).unwrap();
    let rec = Recording::from_bytes(&bytes, "w").unwrap();
    assert_eq!(rec.workloads, vec![w0, w1]);
    assert!(rec.damage.is_none());
    // What a reader that does not know WORKLOADS chunks reads: the same file without
    // them (unknown kinds are skipped whole, by their length).
    let mut stripped = bytes[..HEADER_LEN].to_vec();
    let mut pos = HEADER_LEN;
    let mut kinds = Vec::new();
    while pos < bytes.len() {
        let kind = u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap());
        let len = u32::from_le_bytes(bytes[pos + 4..pos + 8].try_into().unwrap()) as usize;
        let end = pos + CHUNK_HEADER_LEN + len;
        kinds.push(kind);
        if kind != chunk::OWNED_WORKLOADS {
            stripped.extend_from_slice(&bytes[pos..end]);
        }
        pos = end;
    }
    assert_eq!(
        kinds,
        [
            chunk::META,
            chunk::OWNED_WORKLOADS,
            chunk::EVENTS,
            chunk::OWNED_WORKLOADS,
            chunk::END
        ]
    );
    let old = Recording::from_bytes(&stripped, "old").unwrap();
    assert!(old.workloads.is_empty());
    assert_eq!(old.samples, rec.samples);
    assert_eq!(old.frames, rec.frames);
    assert_eq!(old.summary, rec.summary);
    // A damaged WORKLOADS payload ends the readable part like any chunk.
    let mut bad = bytes.clone();
    let at = HEADER_LEN
        + (CHUNK_HEADER_LEN
            + u32::from_le_bytes(bytes[HEADER_LEN + 4..HEADER_LEN + 8].try_into().unwrap())
                as usize);
    let len = u32::from_le_bytes(bad[at + 4..at + 8].try_into().unwrap()) as usize;
    // Cut its last string short but keep the CRC right: it does not decode.
    let payload = bad[at + CHUNK_HEADER_LEN..at + CHUNK_HEADER_LEN + len - 1].to_vec();
    bad.splice(at..at + CHUNK_HEADER_LEN + len, {
        let mut c = Vec::new();
        c.extend_from_slice(&chunk::OWNED_WORKLOADS.to_le_bytes());
        c.extend_from_slice(&((len - 1) as u32).to_le_bytes());
        c.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        c.extend_from_slice(&payload);
        c
    });
    let r = Recording::from_bytes(&bad, "bad").unwrap();
    assert!(r.damage.is_some_and(|d| d.contains("does not decode")));
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

/// The summary's CPU accounting reads back as written; absent (format version 1) or a
/// value this build does not know, it claims the least: estimated.
#[test]
fn cpu_accounting_reads_back_and_unknown_values_are_estimated() {
    let read = |json: &str| {
        serde_json::from_str::<Summary>(json)
            .unwrap()
            .cpu_accounting
    };
    assert_eq!(read(r#"{"cpu_accounting":"exact"}"#), CpuAccounting::Exact);
    assert_eq!(
        read(r#"{"cpu_accounting":"estimated"}"#),
        CpuAccounting::Estimated
    );
    assert_eq!(
        read(r#"{"cpu_accounting":"sideways"}"#),
        CpuAccounting::Estimated
    );
    assert_eq!(read("{}"), CpuAccounting::Estimated);
    let exact = Summary {
        cpu_accounting: CpuAccounting::Exact,
        ..Summary::default()
    };
    let json = serde_json::to_string(&exact).unwrap();
    assert!(json.contains(r#""cpu_accounting":"exact""#), "{json}");
}

#[test]
fn the_files_words_are_the_same_and_unknown_ones_read() {
    use crate::format::{CallGraph, StopReason};
    fn word<T: serde::Serialize>(v: &T) -> String {
        serde_json::to_string(v).unwrap()
    }
    // The words recordings already hold.
    for (g, w) in [
        (CallGraph::Dwarf, "dwarf"),
        (CallGraph::Fp, "fp"),
        (CallGraph::NoStacks, "none"),
    ] {
        assert_eq!(word(&g), format!("\"{w}\""));
        assert_eq!(g.to_string(), w);
        assert_eq!(serde_json::from_str::<CallGraph>(&word(&g)).unwrap(), g);
    }
    for (r, w) in [
        (StopReason::Duration, "duration"),
        (StopReason::Signal, "signal"),
        (StopReason::TargetExited, "target-exited"),
        (StopReason::Error, "error"),
        (StopReason::Requested, "requested"),
        (StopReason::Window, "window"),
        (StopReason::End, "end"),
        (StopReason::PerfData, "perf.data"),
    ] {
        assert_eq!(word(&r), format!("\"{w}\""));
        assert_eq!(r.as_str(), w);
        assert_eq!(serde_json::from_str::<StopReason>(&word(&r)).unwrap(), r);
    }
    // A newer recorder's words read as unknown, not as an error.
    assert_eq!(
        serde_json::from_str::<CallGraph>("\"lbr\"").unwrap(),
        CallGraph::Unknown
    );
    assert_eq!(
        serde_json::from_str::<StopReason>("\"oom\"").unwrap(),
        StopReason::Unknown
    );
}

#[test]
fn workloads_of_older_files_are_read_bounded_at_a_users_manager_only() {
    use super::codec::{put_str, put_u64};
    let w = RecordingWriter::new(Vec::new(), &meta()).unwrap();
    let mut bytes = w.finish(&Summary::default()).unwrap();
    // A WORKLOADS chunk as builds before issue 46 wrote it, after META.
    let mut payload = Vec::new();
    put_u64(&mut payload, 7);
    put_u64(&mut payload, 42);
    put_str(
        &mut payload,
        "/user.slice/user-1000.slice/user@1000.service/app.slice/nginx.service",
    );
    put_str(&mut payload, "/usr/sbin/nginx");
    payload.push(0);
    let meta_len =
        u32::from_le_bytes(bytes[HEADER_LEN + 4..HEADER_LEN + 8].try_into().unwrap()) as usize;
    let at = HEADER_LEN + CHUNK_HEADER_LEN + meta_len;
    let mut c = Vec::new();
    c.extend_from_slice(&chunk::WORKLOADS.to_le_bytes());
    c.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    c.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    c.extend_from_slice(&payload);
    bytes.splice(at..at, c);
    let rec = Recording::from_bytes(&bytes, "old").unwrap();
    assert!(rec.damage.is_none());
    assert_eq!(rec.workloads.len(), 1);
    assert_eq!(rec.workloads[0].delegated, None);
    let w = crate::workload::Workload::from_event(&rec.workloads[0]);
    assert_eq!(w.unit.as_deref(), Some("user@1000.service"));
    assert_eq!(w.service_unit(), None);
}
