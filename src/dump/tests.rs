//! `dump` on this test process itself: a thread parked in a known function is found
//! there, named, with its state, and the JSON carries the same.

use std::sync::mpsc;
use std::time::Duration;

use super::*;

#[inline(never)]
fn dump_test_blocks_here(rx: mpsc::Receiver<()>) {
    // Blocks in futex (a channel's receive parks the thread).
    let _ = rx.recv();
    std::hint::black_box(());
}

#[test]
fn a_parked_thread_is_found_in_its_function_with_its_state() {
    let (tx, rx) = mpsc::channel();
    let t = std::thread::Builder::new()
        .name("dump-parked".into())
        .spawn(move || dump_test_blocks_here(rx))
        .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let d = dump(&DumpOptions::new(std::process::id())).unwrap();
    tx.send(()).unwrap();
    t.join().unwrap();
    let th = d
        .threads
        .iter()
        .find(|t| t.name == "dump-parked")
        .expect("the parked thread is listed");
    assert_eq!(th.capture, Capture::Proc, "{th:?}");
    // Waiting for a message is idle, not contention (issue 28).
    assert_eq!(th.state, ThreadState::Wait, "{th:?}");
    assert_eq!(th.syscall.as_deref(), Some("futex"));
    let names: Vec<&str> = th
        .frames
        .iter()
        .filter_map(|f| f.function.as_deref())
        .collect();
    assert!(
        names.iter().any(|n| n.ends_with("dump_test_blocks_here")),
        "{names:?}"
    );
    assert_eq!(d.stopped_threads, 0);
    let mut json = Vec::new();
    write_json(&d, &mut json).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let jt = v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "dump-parked")
        .unwrap();
    assert_eq!(jt["state"], "lock");
    assert_eq!(jt["capture"], "proc");
}

#[test]
fn the_frame_chain_base_is_the_lowest_link() {
    // A fake image whose only code is at 0x1000..0x2000.
    let mut image = Image {
        space: Space::default(),
        mappings: Vec::new(),
        modules: Vec::new(),
        all: Vec::new(),
    };
    let cfi = Arc::new(crate::unwind::ModuleCfi::new(Arc::new(Vec::new())));
    image.space.insert(
        0x1000,
        Mapped {
            end: 0x2000,
            id: 0,
            module: Some((cfi, 0)),
        },
    );
    let sp = 0x7000u64;
    // Words: [0] junk, [1] 0x7020 (link) [2] ra, [3] junk, [4] 0 (outermost) [5] ra.
    let words = [0x55u64, 0x7020, 0x1234, 0x9, 0, 0x1400];
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let copy = StackCopy { sp, bytes: &bytes };
    assert_eq!(frame_chain_base(&copy, &image), Some(0x7008));
    // Without a code address after it, no link.
    let words = [0x55u64, 0x7020, 0x9999, 0x9, 0, 0x1400];
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let copy = StackCopy { sp, bytes: &bytes };
    assert_eq!(frame_chain_base(&copy, &image), None);
}
