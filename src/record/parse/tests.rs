//! Hand-built records in the kernel's layout, decoded back.

use super::*;

fn header(kind: u32, misc: u16, body: &[u8]) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(&kind.to_le_bytes());
    r.extend_from_slice(&misc.to_le_bytes());
    r.extend_from_slice(&((8 + body.len()) as u16).to_le_bytes());
    r.extend_from_slice(body);
    r
}

fn sample_id(pid: u32, tid: u32, time: u64, cpu: u32) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&pid.to_le_bytes());
    v.extend_from_slice(&tid.to_le_bytes());
    v.extend_from_slice(&time.to_le_bytes());
    v.extend_from_slice(&cpu.to_le_bytes());
    v.extend_from_slice(&0u32.to_le_bytes());
    v.extend_from_slice(&7u64.to_le_bytes());
    v
}

fn u64s(vals: &[u64]) -> Vec<u8> {
    vals.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn sample_body(chain: &[u64], user: Option<(&[u64; 3], &[u8], u64)>) -> Vec<u8> {
    let mut b = u64s(&[7, 0x401000]); // identifier, ip
    b.extend_from_slice(&100u32.to_le_bytes());
    b.extend_from_slice(&101u32.to_le_bytes());
    b.extend_from_slice(&u64s(&[5_000_000])); // time
    b.extend_from_slice(&1u32.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&u64s(&[1_000_000, chain.len() as u64])); // period, nr
    b.extend_from_slice(&u64s(chain));
    if let Some((regs, stack, dyn_size)) = user {
        // abi, then BP, SP, IP, R13 in bit order
        b.extend_from_slice(&u64s(&[2, regs[2], regs[1], regs[0], 0x1313]));
        b.extend_from_slice(&u64s(&[stack.len() as u64]));
        b.extend_from_slice(stack);
        b.extend_from_slice(&u64s(&[dyn_size]));
    }
    b
}

#[test]
fn frame_pointer_sample() {
    let k = b::PERF_CONTEXT_KERNEL;
    let u = b::PERF_CONTEXT_USER;
    let rec = header(
        b::PERF_RECORD_SAMPLE,
        2,
        &sample_body(&[k, 0xffff_0001, u, 0x401000, 0x402000], None),
    );
    let Record::Sample(s) = parse_record(&rec).unwrap() else {
        panic!()
    };
    assert_eq!(
        (s.pid, s.tid, s.time, s.cpu, s.period),
        (100, 101, 5_000_000, 1, 1_000_000)
    );
    assert_eq!(
        s.callchain_entries().collect::<Vec<_>>(),
        [k, 0xffff_0001, u, 0x401000, 0x402000]
    );
    assert_eq!(s.regs, None);
    assert!(s.stack.is_empty());
}

#[test]
fn dwarf_sample_keeps_only_the_valid_stack_bytes() {
    let stack = [0xaau8; 64];
    let body = sample_body(
        &[],
        Some((&[0x401000, 0x7ffc_0000, 0x7ffc_0040], &stack, 24)),
    );
    let rec = header(b::PERF_RECORD_SAMPLE, 2, &body);
    let Record::Sample(s) = parse_record(&rec).unwrap() else {
        panic!()
    };
    assert_eq!(s.regs, Some([0x401000, 0x7ffc_0000, 0x7ffc_0040]));
    assert_eq!(s.r13, Some(0x1313));
    assert_eq!(s.stack.len(), 24);
}

#[test]
fn mmap2_with_build_id() {
    let mut body = Vec::new();
    body.extend_from_slice(&100u32.to_le_bytes());
    body.extend_from_slice(&100u32.to_le_bytes());
    body.extend_from_slice(&u64s(&[0x7f00_0000_0000, 0x1000, 0x2000]));
    let mut ids = [0u8; 24];
    ids[0] = 20;
    ids[4..24].copy_from_slice(&[0xab; 20]);
    body.extend_from_slice(&ids);
    body.extend_from_slice(&5u32.to_le_bytes()); // PROT_READ | PROT_EXEC
    body.extend_from_slice(&2u32.to_le_bytes());
    body.extend_from_slice(b"/usr/lib/libc.so.6\0\0\0\0\0\0");
    body.extend_from_slice(&sample_id(100, 100, 42, 0));
    let rec = header(
        b::PERF_RECORD_MMAP2,
        b::PERF_RECORD_MISC_MMAP_BUILD_ID as u16,
        &body,
    );
    let r = parse_record(&rec).unwrap();
    let Record::Mmap {
        addr,
        len,
        pgoff,
        build_id,
        executable,
        filename,
        time,
        ..
    } = r
    else {
        panic!()
    };
    assert_eq!(
        (addr, len, pgoff, time),
        (0x7f00_0000_0000, 0x1000, 0x2000, 42)
    );
    assert_eq!(build_id, Some(&[0xab; 20][..]));
    assert!(executable);
    assert_eq!(filename, b"/usr/lib/libc.so.6");
}

#[test]
fn comm_exec_fork_exit_lost() {
    let mut body = Vec::new();
    body.extend_from_slice(&100u32.to_le_bytes());
    body.extend_from_slice(&101u32.to_le_bytes());
    body.extend_from_slice(b"worker-1\0\0\0\0\0\0\0\0");
    body.extend_from_slice(&sample_id(100, 101, 9, 0));
    let rec = header(
        b::PERF_RECORD_COMM,
        b::PERF_RECORD_MISC_COMM_EXEC as u16,
        &body,
    );
    assert_eq!(
        parse_record(&rec).unwrap(),
        Record::Comm {
            pid: 100,
            tid: 101,
            time: 9,
            name: b"worker-1",
            exec: true
        }
    );

    let mut body = Vec::new();
    for v in [100u32, 100, 102, 100] {
        body.extend_from_slice(&v.to_le_bytes());
    }
    body.extend_from_slice(&u64s(&[77]));
    body.extend_from_slice(&sample_id(100, 102, 77, 0));
    let fork = header(b::PERF_RECORD_FORK, 0, &body);
    assert_eq!(
        parse_record(&fork).unwrap(),
        Record::Fork {
            pid: 100,
            ppid: 100,
            tid: 102,
            ptid: 100,
            time: 77
        }
    );
    let exit = header(b::PERF_RECORD_EXIT, 0, &body);
    assert_eq!(
        parse_record(&exit).unwrap(),
        Record::Exit {
            pid: 100,
            tid: 102,
            time: 77
        }
    );

    let mut body = u64s(&[7, 13]);
    body.extend_from_slice(&sample_id(0, 0, 55, 1));
    let lost = header(b::PERF_RECORD_LOST, 0, &body);
    assert_eq!(
        parse_record(&lost).unwrap(),
        Record::Lost {
            time: 55,
            count: 13
        }
    );
}

#[test]
fn lying_sizes_are_errors_not_panics() {
    let body = sample_body(&[1, 2, 3], None);
    let mut rec = header(b::PERF_RECORD_SAMPLE, 2, &body);
    // Claim a callchain of 2^40 entries.
    let nr_at = 8 + 8 + 8 + 8 + 8 + 8 + 8;
    rec[nr_at..nr_at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    assert_eq!(parse_record(&rec), Err(BadRecord));
    for cut in 0..rec.len() {
        let _ = parse_record(&rec[..cut]);
    }
    // split_records stops at a zero size instead of looping.
    let mut buf = header(b::PERF_RECORD_SAMPLE, 2, &body);
    buf.extend_from_slice(&[0u8; 8]);
    assert_eq!(split_records(&buf).count(), 1);
}

/// The cheap timestamp used for ordering agrees with the full decoder on every kind.
#[test]
fn record_time_matches_the_decoder() {
    let k = b::PERF_CONTEXT_KERNEL;
    let sample = header(b::PERF_RECORD_SAMPLE, 2, &sample_body(&[k, 1, 2], None));
    let mut comm = Vec::new();
    comm.extend_from_slice(&100u32.to_le_bytes());
    comm.extend_from_slice(&101u32.to_le_bytes());
    comm.extend_from_slice(b"worker\0\0");
    comm.extend_from_slice(&sample_id(100, 101, 4242, 0));
    let comm = header(b::PERF_RECORD_COMM, 0, &comm);
    let mut fork = Vec::new();
    for v in [1u32, 1, 2, 1] {
        fork.extend_from_slice(&v.to_le_bytes());
    }
    fork.extend_from_slice(&u64s(&[77]));
    fork.extend_from_slice(&sample_id(1, 2, 77, 0));
    let fork = header(b::PERF_RECORD_FORK, 0, &fork);
    for rec in [sample, comm, fork] {
        let t = parse_record(&rec).unwrap().time();
        assert!(t != 0);
        assert_eq!(record_time(&rec), t);
    }
    assert_eq!(record_time(&[1, 2, 3]), 0);
}

/// Exact accounting: a sample's own count after its period, and the final count an
/// inherited event reports as its thread exits, with the id it was inherited from.
#[test]
fn sample_count_and_read_record() {
    let k = b::PERF_CONTEXT_KERNEL;
    let mut body = sample_body(&[k, 0xffff_0001], None);
    // PERF_SAMPLE_READ: one u64 between the period and the callchain's nr.
    let nr_at = 8 * 5 + 8;
    body.splice(nr_at..nr_at, u64s(&[123_456_789]));
    let rec = header(b::PERF_RECORD_SAMPLE, 2, &body);
    let Record::Sample(s) = parse_record_as(&rec, true).unwrap() else {
        panic!()
    };
    assert_eq!((s.id, s.count, s.period), (7, Some(123_456_789), 1_000_000));
    assert_eq!(
        s.callchain_entries().collect::<Vec<_>>(),
        vec![k, 0xffff_0001]
    );
    assert_eq!(record_time(&rec), s.time);

    let mut body = Vec::new();
    body.extend_from_slice(&100u32.to_le_bytes());
    body.extend_from_slice(&102u32.to_le_bytes());
    body.extend_from_slice(&u64s(&[2_000_123]));
    body.extend_from_slice(&sample_id(100, 102, 88, 1));
    let read = header(b::PERF_RECORD_READ, 0, &body);
    assert_eq!(
        parse_record(&read).unwrap(),
        Record::Read {
            pid: 100,
            tid: 102,
            id: 7,
            count: 2_000_123,
            time: 88
        }
    );
    assert_eq!(record_time(&read), 88);
    for cut in 0..read.len() {
        let _ = parse_record(&read[..cut]);
    }
}

#[test]
fn tracepoint_samples_are_told_apart_by_their_event_id() {
    // identifier 9, ip, pid/tid, time, cpu, period, then the raw fields.
    let mut body = u64s(&[9, 0xffff_8000]);
    body.extend_from_slice(&100u32.to_le_bytes());
    body.extend_from_slice(&101u32.to_le_bytes());
    body.extend_from_slice(&u64s(&[6_000_000]));
    body.extend_from_slice(&1u32.to_le_bytes());
    body.extend_from_slice(&0u32.to_le_bytes());
    body.extend_from_slice(&u64s(&[1]));
    let fields = [0x5au8; 36];
    body.extend_from_slice(&36u32.to_le_bytes());
    body.extend_from_slice(&fields);
    let rec = header(b::PERF_RECORD_SAMPLE, 2, &body);
    let ids: std::collections::HashSet<u64> = [9].into_iter().collect();
    let layout = Layout {
        read: true,
        raw_ids: &ids,
    };
    let Record::Sample(s) = parse_record_with(&rec, &layout).unwrap() else {
        panic!()
    };
    assert_eq!((s.id, s.tid, s.time, s.count), (9, 101, 6_000_000, None));
    assert_eq!(s.raw, &fields[..]);
    assert!(s.callchain.is_empty());
    // A raw size past the record's end is an error.
    let mut short = body.clone();
    let at = short.len() - 40;
    short[at..at + 4].copy_from_slice(&400u32.to_le_bytes());
    let rec = header(b::PERF_RECORD_SAMPLE, 2, &short);
    assert!(parse_record_with(&rec, &layout).is_err());
}
