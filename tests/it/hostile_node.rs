//! Issue 47: a process that passes for Node (tests/data/fakenode.c: named `node`, it
//! exports V8's postmortem symbols and spins in a frame shaped like V8's interpreter's)
//! and keeps pointing that frame at forged objects: strings that loop or claim 2 GiB, a
//! function whose map is not a map, a pointer to nothing, and more distinct names than
//! a 1 MiB budget keeps. The recorder finishes, every frame it read is named from a
//! forged function's own string or marked, never from garbage, and nothing panics.

use crate::common::*;

#[test]
fn a_forged_node_gets_marked_frames_and_bounded_reads() {
    let (main, all) = record_forged("fakenode.c", "node");
    let mut read = 0;
    let mut forged = 0;
    for (frames, count) in &main {
        let user = user_part(frames);
        let Some(leaf) = user.last() else { continue };
        let ok = leaf.starts_with("forged_")
            || *leaf == "[js: unreadable]_[j]"
            || *leaf == "[js: names budget spent]_[j]"
            || *leaf == "Builtins_InterpreterEntryTrampoline"
            || leaf.starts_with("[unsampled");
        assert!(ok, "leaf {leaf:?} in {frames:?}");
        if leaf.starts_with("forged_") {
            // The forged string's own text, cut at the name bound.
            let name = leaf.trim_end_matches("_[j]");
            assert!(name.len() <= 256 && name.len() >= 12, "{name}");
            forged += count;
        }
        if leaf.ends_with("_[j]") {
            read += count;
        }
    }
    assert!(read >= 100, "only {read} samples read: {all:?}");
    assert!(forged > 0, "no forged function named: {all:?}");
}
