//! Issue 26: text other users control (a thread name set with `prctl(PR_SET_NAME)`,
//! which may hold any byte but NUL) reaches root's terminal and SVGs only escaped. A
//! real process named with ESC, BEL and CSI sequences is recorded, reported and
//! dumped: no terminal output holds a raw ESC, BEL or C1 control, and the per-thread
//! flame graph and the timeline are well-formed XML without control characters.

use std::path::Path;
use std::process::Command;

use crate::common::*;

/// The thread name: sets the window title (OSC 0 ... BEL), a one-character CSI (C1
/// 0x9b, as UTF-8) and markup; 14 bytes, under the 15 the kernel keeps.
const HOSTILE: &[u8] = b"\x1b]0;X\x07\xc2\x9b2J<&\"s";

/// How the name shows once escaped.
const ESCAPED: &str = "X\\x07\\x9b2J";

/// A raw control that a terminal would act on: C0 but LF, DEL, or C1 (as UTF-8,
/// `c2 80..c2 9f`, or a stray 0x9b byte).
fn raw_control(bytes: &[u8]) -> Option<usize> {
    bytes.iter().enumerate().position(|(i, &b)| {
        (b < 0x20 && b != b'\n')
            || b == 0x7f
            || b == 0x9b
            || (b == 0xc2 && bytes.get(i + 1).is_some_and(|n| (0x80..0xa0).contains(n)))
    })
}

fn assert_terminal_safe(what: &str, bytes: &[u8]) {
    if let Some(at) = raw_control(bytes) {
        let from = at.saturating_sub(60);
        panic!(
            "{what}: a raw control at byte {at}: {:?}",
            String::from_utf8_lossy(&bytes[from..(at + 60).min(bytes.len())])
        );
    }
}

/// Parses an SVG with a real XML parser and checks it holds no character XML 1.0
/// forbids (C0 but TAB/LF/CR) nor a C1 control.
fn assert_svg_safe(path: &Path) -> String {
    let svg = std::fs::read_to_string(path).expect("the SVG is UTF-8");
    let mut r = quick_xml::Reader::from_str(&svg);
    loop {
        match r.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("{}: not well-formed XML: {e}", path.display()),
        }
    }
    let bad = svg.chars().find(|&c| {
        (c.is_control() && !matches!(c, '\t' | '\n' | '\r')) || matches!(c, '\u{fffe}' | '\u{ffff}')
    });
    assert_eq!(bad, None, "{}", path.display());
    svg
}

fn hostile_target() -> Target {
    use std::os::unix::ffi::OsStrExt;
    let mut spec = HOSTILE.to_vec();
    spec.extend_from_slice(b":20:0");
    let mut cmd = Command::new(build_c("threads.c", &["-O2", "-g"]));
    cmd.arg(std::ffi::OsStr::from_bytes(&spec));
    Target::spawn(cmd)
}

#[test]
fn a_hostile_thread_name_is_escaped_in_terminal_output_and_svgs() {
    let target = hostile_target();
    let pid = target.pid().to_string();
    let dir = scratch();
    let rec = dir.path().join("hostile.prof");
    let o = run_profile(&["record", "-p", &pid, "-d", "1", "-o", rec.to_str().unwrap()]);
    ok(&o);
    assert_terminal_safe("record's stderr", &o.stderr);
    // The recording keeps the name as it was (JSON escapes it).
    let names = samples_by_thread(&model(&rec));
    let raw = String::from_utf8_lossy(HOSTILE).into_owned();
    assert!(names.get(&raw).is_some_and(|&n| n > 0), "{names:?}");

    let fg = dir.path().join("fg.svg");
    let tl = dir.path().join("tl.svg");
    let o = run_profile(&[
        "report",
        "-i",
        rec.to_str().unwrap(),
        "--per-thread",
        "--flamegraph",
        fg.to_str().unwrap(),
        "--timeline",
        tl.to_str().unwrap(),
        "--top",
        "20",
    ]);
    ok(&o);
    assert_terminal_safe("report's table", &o.stdout);
    assert_terminal_safe("report's stderr", &o.stderr);
    for svg in [&fg, &tl] {
        let text = assert_svg_safe(svg);
        assert!(
            text.contains(ESCAPED),
            "{}: the thread is drawn",
            svg.display()
        );
    }
    let o = run_profile(&[
        "report",
        "-i",
        rec.to_str().unwrap(),
        "--per-thread",
        "--folded",
        "-",
    ]);
    ok(&o);
    assert_terminal_safe("folded stacks", &o.stdout);
    assert!(stdout(&o).contains(ESCAPED));

    let o = run_profile(&["dump", "--pid", &pid]);
    ok(&o);
    assert_terminal_safe("dump", &o.stdout);
    let text = stdout(&o);
    let block = text
        .split("\n\n")
        .find(|b| b.starts_with("Thread ") && b.contains(ESCAPED))
        .unwrap_or_else(|| panic!("no escaped thread name in {text}"));
    // Spinning, it is sampled (or, on a machine too busy to run it within the
    // sample's wait, said so).
    assert!(
        block.contains("    burn_") || block.contains("not sampled"),
        "{block}"
    );
    // JSON keeps the name itself, escaped by JSON.
    let o = run_profile(&["dump", "--pid", &pid, "--json"]);
    ok(&o);
    // (serde_json escapes C0 controls; C1 ones are valid JSON as they are.)
    assert!(!o.stdout.iter().any(|&b| b < 0x20 && b != b'\n'));
    let d: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        d["threads"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == raw.as_str())
    );
}
