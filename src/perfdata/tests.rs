//! The perf.data reader on files built here byte by byte (the layout perf record
//! writes for `-e task-clock -g`): what it reads, and that no cut or corrupted file
//! panics, hangs or allocates past its size.

use super::*;
use crate::format::FrameKind;
use crate::format::ThreadEvent;
use crate::replay::decode;

const IP: u64 = 1;
const TID: u64 = 2;
const TIME: u64 = 4;
const CALLCHAIN: u64 = 32;
const CPU: u64 = 128;
const PERIOD: u64 = 256;

fn record(kind: u32, misc: u16, body: &[u8]) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend(kind.to_le_bytes());
    r.extend(misc.to_le_bytes());
    r.extend(((body.len() + 8) as u16).to_le_bytes());
    r.extend(body);
    r
}

/// The `sample_id` trailer for TID | TIME | CPU.
fn trailer(pid: u32, tid: u32, time: u64) -> Vec<u8> {
    let mut t = Vec::new();
    t.extend(pid.to_le_bytes());
    t.extend(tid.to_le_bytes());
    t.extend(time.to_le_bytes());
    t.extend(0u64.to_le_bytes());
    t
}

fn sample(pid: u32, tid: u32, time: u64, chain: &[u64]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(
        chain
            .iter()
            .rev()
            .find(|&&a| a < decode::context::MAX)
            .unwrap_or(&0)
            .to_le_bytes(),
    );
    b.extend(pid.to_le_bytes());
    b.extend(tid.to_le_bytes());
    b.extend(time.to_le_bytes());
    b.extend(1u32.to_le_bytes());
    b.extend(0u32.to_le_bytes());
    b.extend(250_000u64.to_le_bytes());
    b.extend((chain.len() as u64).to_le_bytes());
    for a in chain {
        b.extend(a.to_le_bytes());
    }
    record(9, 2, &b)
}

/// A whole file: two threads named by COMM records, an executable mapping, three
/// task-clock samples with user callchains (one with a kernel part), a host name.
fn file() -> Vec<u8> {
    let mut data = Vec::new();
    let mut comm = Vec::new();
    comm.extend(100u32.to_le_bytes());
    comm.extend(100u32.to_le_bytes());
    comm.extend(b"main-thread\0\0\0\0\0");
    comm.extend(trailer(100, 100, 5));
    data.extend(record(3, 0, &comm));
    let mut comm = Vec::new();
    comm.extend(100u32.to_le_bytes());
    comm.extend(101u32.to_le_bytes());
    comm.extend(b"worker\0\0");
    comm.extend(trailer(100, 101, 6));
    data.extend(record(3, 0, &comm));
    let mut mmap = Vec::new();
    mmap.extend(100u32.to_le_bytes());
    mmap.extend(100u32.to_le_bytes());
    mmap.extend(0x40_0000u64.to_le_bytes());
    mmap.extend(0x1000u64.to_le_bytes());
    mmap.extend(0u64.to_le_bytes());
    mmap.extend([0u8; 24]);
    mmap.extend(5u32.to_le_bytes()); // PROT_READ | PROT_EXEC
    mmap.extend(2u32.to_le_bytes());
    mmap.extend(b"/nonexistent/app\0\0\0\0\0\0\0\0");
    mmap.extend(trailer(100, 100, 7));
    data.extend(record(10, 2, &mmap));
    let user = decode::context::USER;
    let kernel = decode::context::KERNEL;
    data.extend(sample(100, 100, 10, &[user, 0x40_0100, 0x40_0200]));
    data.extend(sample(100, 101, 20, &[user, 0x40_0300, 0x40_0200]));
    data.extend(sample(
        100,
        101,
        30,
        &[kernel, 0xffff_ffff_8100_0000, user, 0x40_0300, 0x40_0200],
    ));
    // A record whose time sorts it before the samples: perf's order is by time.
    let mut exit = Vec::new();
    for v in [100u32, 100, 101, 100] {
        exit.extend(v.to_le_bytes());
    }
    exit.extend(40u64.to_le_bytes());
    exit.extend(trailer(100, 101, 40));
    data.extend(record(4, 0, &exit));

    let mut attr = vec![0u8; 128];
    attr[0..4].copy_from_slice(&1u32.to_le_bytes()); // PERF_TYPE_SOFTWARE
    attr[4..8].copy_from_slice(&128u32.to_le_bytes());
    attr[8..16].copy_from_slice(&1u64.to_le_bytes()); // task-clock
    attr[16..24].copy_from_slice(&250_000u64.to_le_bytes());
    attr[24..32].copy_from_slice(&(IP | TID | TIME | CALLCHAIN | CPU | PERIOD).to_le_bytes());
    attr[40..48].copy_from_slice(&(1u64 << 18).to_le_bytes()); // sample_id_all

    let mut host = Vec::new();
    host.extend(8u32.to_le_bytes());
    host.extend(b"testhost");

    let attrs_at = 104u64;
    let attrs_len = 128 + 16;
    let data_at = attrs_at + attrs_len;
    let features_at = data_at + data.len() as u64;
    let host_at = features_at + 16;
    let mut f = Vec::new();
    f.extend(b"PERFILE2");
    f.extend(104u64.to_le_bytes());
    f.extend(attrs_len.to_le_bytes());
    f.extend(attrs_at.to_le_bytes());
    f.extend(attrs_len.to_le_bytes());
    f.extend(data_at.to_le_bytes());
    f.extend((data.len() as u64).to_le_bytes());
    f.extend([0u8; 16]);
    let mut bitmap = [0u8; 32];
    bitmap[0] = 1 << parse::feature::HOSTNAME;
    f.extend(bitmap);
    assert_eq!(f.len(), 104);
    f.extend(&attr);
    f.extend(0u64.to_le_bytes()); // no ids
    f.extend(0u64.to_le_bytes());
    f.extend(&data);
    f.extend(host_at.to_le_bytes());
    f.extend((host.len() as u64).to_le_bytes());
    f.extend(&host);
    f
}

#[test]
fn a_task_clock_file_becomes_a_recording() {
    let rec = decode(&file(), "t.data").unwrap();
    assert_eq!(rec.meta.event, "task-clock");
    assert_eq!(rec.meta.call_graph, crate::format::CallGraph::Fp);
    assert_eq!(rec.meta.hostname, "testhost");
    assert_eq!(rec.meta.pid, Some(100));
    assert_eq!(rec.meta.start_time_ns, 10);
    assert_eq!(rec.samples.len(), 3);
    assert!(rec.samples.iter().all(|s| s.weight == 250_000));
    let summary = rec.summary.as_ref().unwrap();
    assert_eq!((summary.samples, summary.cpu_time_ns), (3, 750_000));
    let names: Vec<(u32, &str)> = rec
        .thread_events
        .iter()
        .filter_map(|e| match e {
            ThreadEvent::Name { tid, name, .. } => Some((*tid, name.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(names, [(100, "main-thread"), (101, "worker")]);
    // The last sample: the kernel frame, the sampled pc, its caller; leaf first.
    let mut stack = Vec::new();
    let mut node = rec.samples[2].stack;
    while let Some(n) = node {
        let n = rec.nodes[n as usize];
        let f = rec.frames[n.frame as usize];
        stack.push((f.kind, f.addr, f.mapping));
        node = n.parent;
    }
    assert_eq!(
        stack,
        [
            (FrameKind::Kernel, 0xffff_ffff_8100_0000, None),
            (FrameKind::User, 0x40_0300, Some(0)),
            (FrameKind::Return, 0x40_0200, Some(0)),
        ]
    );
    assert_eq!(rec.mappings[0].path, "/nonexistent/app");
}

#[test]
fn every_cut_gives_an_error_or_fewer_samples() {
    let f = file();
    for len in 0..f.len() {
        match decode(&f[..len], "t.data") {
            Ok(rec) => assert!(rec.samples.len() <= 3, "{len}"),
            Err(e) => assert!(e.to_string().contains("t.data"), "{len}: {e}"),
        }
    }
}

#[test]
fn a_killed_perf_record_is_read_to_its_end() {
    // perf record killed before it finished the file: data size 0, no features.
    let mut f = file();
    f[48..56].copy_from_slice(&0u64.to_le_bytes());
    f.truncate(f.len() - 40);
    let rec = decode(&f, "t.data").unwrap();
    assert_eq!(rec.samples.len(), 3);
    assert!(rec.damage.as_deref().unwrap_or("").contains("not finished"));
}

#[test]
fn corrupted_bytes_never_panic() {
    let f = file();
    for at in 0..f.len() {
        for value in [0u8, 0x7f, 0xff] {
            let mut g = f.clone();
            g[at] = value;
            let _ = decode(&g, "t.data");
        }
    }
}

#[test]
fn other_events_and_big_endian_files_are_refused_with_the_alternative() {
    let mut f = file();
    f[104 + 8..104 + 16].copy_from_slice(&2u64.to_le_bytes()); // page-faults
    let e = decode(&f, "t.data").unwrap_err().to_string();
    assert!(e.contains("record with `perf record -e task-clock`"), "{e}");
    let mut f = file();
    f[..8].copy_from_slice(b"2ELIFREP");
    let e = decode(&f, "t.data").unwrap_err().to_string();
    assert!(e.contains("big-endian"), "{e}");
}

#[test]
fn cycles_become_time_at_the_nominal_clock() {
    assert_eq!(
        nominal_mhz(Some("Intel(R) Xeon(R) CPU E5-2650 v4 @ 2.20GHz")),
        Some(2200)
    );
    assert_eq!(nominal_mhz(Some("AMD EPYC 7B13")), None);
    let mut f = file();
    f[104..108].copy_from_slice(&0u32.to_le_bytes()); // PERF_TYPE_HARDWARE
    f[104 + 8..104 + 16].copy_from_slice(&0u64.to_le_bytes()); // cycles
    let rec = decode(&f, "t.data").unwrap();
    assert_eq!(rec.meta.event, "cycles");
    // 250,000 cycles at the 1 GHz assumed when the file does not say: 250 us.
    assert!(rec.samples.iter().all(|s| s.weight == 250_000));
    assert!(
        rec.damage
            .unwrap()
            .contains("at 1 GHz (shares are exact, times are not)")
    );
}
