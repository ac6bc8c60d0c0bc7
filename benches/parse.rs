//! Cost of decoding the kernel's records as the recorder reads them from a ring:
//! `split_records` over a buffer of whole records, then `Layout::decode` on each. Two
//! buffers built in the kernel's layout: DWARF-mode samples (a short callchain, user
//! registers and a 16 KiB stack copy of which 4 KiB is valid, as `--stack-size 16384`
//! leaves it) and frame-pointer samples (a 12-entry callchain, no stack), each with an
//! MMAP2 and a COMM record every 64 samples as a live target produces them.
//! Throughput is reported in records per second.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use perf_event_open_sys::bindings as b;
use profile::replay::decode::{Layout, Record, sample, split_records};

const RECORDS: usize = 4096;

fn record(kind: u32, misc: u16, body: &[u8]) -> Vec<u8> {
    let mut r = Vec::with_capacity(8 + body.len());
    r.extend_from_slice(&kind.to_le_bytes());
    r.extend_from_slice(&misc.to_le_bytes());
    r.extend_from_slice(&u16::try_from(8 + body.len()).unwrap().to_le_bytes());
    r.extend_from_slice(body);
    r
}

fn u64s(out: &mut Vec<u8>, vals: &[u64]) {
    for v in vals {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

fn u32s(out: &mut Vec<u8>, vals: &[u32]) {
    for v in vals {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// The `sample_id` trailer of non-sample records: pid/tid, time, cpu/res, id.
fn sample_id(out: &mut Vec<u8>, time: u64) {
    u32s(out, &[100, 101]);
    u64s(out, &[time]);
    u32s(out, &[1, 0]);
    u64s(out, &[7]);
}

fn sample(i: u64, chain: &[u64], stack: Option<(usize, usize)>) -> Vec<u8> {
    let mut body = Vec::new();
    u64s(&mut body, &[7, 0x40_1000 + i]); // identifier, ip
    u32s(&mut body, &[100, 101]); // pid, tid
    u64s(&mut body, &[1_000_000 * i]); // time
    u32s(&mut body, &[1, 0]); // cpu, res
    u64s(&mut body, &[1_010_101, chain.len() as u64]); // period, nr
    u64s(&mut body, chain);
    if let Some((size, valid)) = stack {
        u64s(
            &mut body,
            &[2, 1, 0x7ffc_0040, 0x7ffc_0000, 0x40_1000 + i, 2, 3, 4, 5],
        ); // abi, BX, BP, SP, IP, R12-R15
        u64s(&mut body, &[size as u64]);
        body.resize(body.len() + size, 0xab);
        u64s(&mut body, &[valid as u64]);
    }
    record(b::PERF_RECORD_SAMPLE, 2, &body)
}

fn side_record(i: u64) -> Vec<u8> {
    let mut body = Vec::new();
    if i.is_multiple_of(2) {
        u32s(&mut body, &[100, 101]);
        u64s(&mut body, &[0x7f00_0000_0000 + (i << 20), 0x2_0000, 0]); // addr, len, pgoff
        body.extend_from_slice(&[0u8; 24]); // maj, min, ino, ino_generation
        u32s(&mut body, &[5, 2]); // prot (read | exec), flags
        body.extend_from_slice(b"/usr/lib/x86_64-linux-gnu/libexample.so.1\0\0\0\0\0\0\0");
        sample_id(&mut body, 1_000_000 * i);
        record(b::PERF_RECORD_MMAP2, 0, &body)
    } else {
        u32s(&mut body, &[100, 101]);
        body.extend_from_slice(b"worker-7\0\0\0\0\0\0\0\0");
        sample_id(&mut body, 1_000_000 * i);
        record(b::PERF_RECORD_COMM, 0, &body)
    }
}

fn buffer(dwarf: bool) -> Vec<u8> {
    let k = b::PERF_CONTEXT_KERNEL;
    let u = b::PERF_CONTEXT_USER;
    let mut buf = Vec::new();
    for i in 0..RECORDS as u64 {
        let rec = if i % 64 == 63 {
            side_record(i)
        } else if dwarf {
            sample(
                i,
                &[k, 0xffff_ffff_8100_0000 + i, 0xffff_ffff_8100_2000, u],
                Some((16384, 4096)),
            )
        } else {
            let mut chain = vec![k, 0xffff_ffff_8100_0000 + i, u];
            chain.extend((0..9).map(|d| 0x40_1000 + d * 0x100 + i));
            sample(i, &chain, None)
        };
        buf.extend_from_slice(&rec);
    }
    buf
}

/// The recorder's layout: identifier, ip, tid, time, cpu, period, callchain, and in
/// DWARF mode the user registers (bp, sp, ip) and stack.
fn layout(dwarf: bool) -> Layout {
    let mut l = Layout {
        sample_type: sample::IDENTIFIER
            | sample::IP
            | sample::TID
            | sample::TIME
            | sample::CPU
            | sample::PERIOD
            | sample::CALLCHAIN,
        sample_id_all: true,
        ..Layout::default()
    };
    if dwarf {
        l.sample_type |= sample::REGS_USER | sample::STACK_USER;
        l.sample_regs_user = 0b111 << 6;
    }
    l
}

fn decode_all(buf: &[u8], layout: &Layout) -> (usize, u64) {
    let (mut n, mut sum) = (0, 0u64);
    for rec in split_records(buf) {
        if let Ok(Record::Sample(s)) = layout.decode(rec) {
            sum = sum.wrapping_add(s.ip.unwrap_or(0) ^ s.stack.len() as u64);
        }
        n += 1;
    }
    (n, sum)
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("parse");
    for (name, dwarf) in [("dwarf_samples", true), ("fp_samples", false)] {
        let buf = buffer(dwarf);
        let layout = layout(dwarf);
        assert_eq!(decode_all(&buf, &layout).0, RECORDS, "every record decodes");
        group.throughput(Throughput::Elements(RECORDS as u64));
        group.bench_function(name, |bch| {
            bch.iter(|| decode_all(black_box(&buf), &layout))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
