//! Issue 49: a process that passes for CRuby (tests/data/fakeruby.c: named `ruby`, it
//! exports `ruby_version`, `ruby_current_vm_ptr` and `rb_vm_exec` and spins inside
//! `rb_vm_exec` over a forged VM) and keeps rewriting what the reader follows: a
//! label of 2 GiB, a thread list that loops, a current frame outside the VM stack,
//! an instruction sequence that is no object, fresh names. The recorder finishes,
//! every Ruby frame it gave is the forged method's or marked, never garbage, and
//! nothing panics.

use crate::common::*;

#[test]
fn a_forged_ruby_gets_marked_frames_and_bounded_reads() {
    let (main, all) = record_forged("fakeruby.c", "ruby");
    let (mut forged, mut marked) = (0, 0);
    for (frames, count) in &main {
        for f in frames.iter().filter_map(|f| f.strip_suffix("_[j]")) {
            if f.starts_with("forged") {
                forged += count;
            } else {
                assert!(f.starts_with("[ruby: "), "{f:?} in {frames:?}");
                marked += count;
            }
        }
    }
    assert!(forged > 0, "no forged frame named: {all:?}");
    assert!(marked > 0, "no frame marked: {all:?}");
}
