//! What the file says of the machine and the run: the META chunk's words, the CPU
//! model, the CPU accounting, read the same by older and newer builds.

use super::*;

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
