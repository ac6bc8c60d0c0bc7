//! The golden test of the programs: their listings (each instruction's slot, encoding
//! and meaning, maps by name) against tests/data/bpf/programs.txt. `PROFILE_BLESS=1`
//! rewrites the file; review its diff like code. The kernel's verifier, run by the
//! integration tests that record with the filter and the capture, checks the rest.

use super::asm::Map;
use super::capture_program::CaptureMaps;
use super::filter::program;

/// The programs the recorder loads, over maps with stand-in descriptors.
fn listings() -> String {
    let map = |name, fd| Map { name, fd };
    let filtered = map("filtered", 3);
    let capture = CaptureMaps {
        threads: map("threads", 4),
        scratch: map("scratch", 5),
        out: map("out", 6),
    };
    let mut out = String::from(
        "# The recorder's BPF programs (src/sys/bpf), as assembled: slot, opcode,\n\
         # registers (src << 4 | dst), offset, immediate, then what it does. Map\n\
         # descriptors are stand-ins: filtered 3, threads 4, scratch 5, out 6.\n\
         # PROFILE_BLESS=1 cargo test --lib sys::bpf rewrites this file.\n",
    );
    for (name, capture, filter) in [
        ("the thread filter", None, true),
        ("the thread filter with the capture", Some(capture), true),
        (
            "the capture alone (a filtered thread's own events)",
            Some(capture),
            false,
        ),
    ] {
        let p = program(filtered, capture, filter).expect("the program assembles");
        out += &format!("\n## {name}: {} instructions\n", p.insns().len());
        out += &p.listing();
    }
    out
}

#[test]
fn the_programs_match_their_golden_listing() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/bpf/programs.txt");
    let actual = listings();
    if std::env::var_os("PROFILE_BLESS").is_some() {
        std::fs::create_dir_all(std::path::Path::new(path).parent().unwrap()).unwrap();
        std::fs::write(path, &actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        expected == actual,
        "{path} differs (run with PROFILE_BLESS=1 and review the diff):\n{actual}"
    );
}

#[test]
fn every_jump_lands_inside_its_program() {
    let listing = listings();
    for section in listing.split("\n## ").skip(1) {
        let slots: Vec<(i64, u8, i16)> = (section.lines())
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let slot = f.next()?.parse().ok()?;
                let code = u8::from_str_radix(f.next()?, 16).ok()?;
                let _regs = f.next()?;
                let off = u16::from_str_radix(f.next()?, 16).ok()? as i16;
                Some((slot, code, off))
            })
            .collect();
        let end = slots.last().map_or(0, |s| s.0 + 1);
        for &(slot, code, off) in &slots {
            let jump = code & 0x07 == 0x05 && code != 0x85 && code != 0x95;
            if jump {
                let to = slot + 1 + i64::from(off);
                assert!((0..end).contains(&to), "jump at {slot} to {to}");
            }
        }
        assert_eq!(slots.last().map(|s| s.1), Some(0x95), "ends with exit");
    }
}
