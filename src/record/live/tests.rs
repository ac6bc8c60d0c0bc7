//! Unit tests of what a live window keeps and forgets at its cut.

use super::*;

fn node(parent: Option<StackId>, frame: FrameId) -> StackNode {
    StackNode { parent, frame }
}

#[test]
fn threads_whose_last_event_is_their_exit_are_gone() {
    let name = |tid| ThreadEvent::Name {
        time: 1,
        pid: 1,
        tid,
        name: "t".into(),
    };
    let exit = |tid| ThreadEvent::Exit {
        time: 2,
        pid: 1,
        tid,
    };
    // 7 exits; 8 exits and its tid is reused by a new thread; 9 lives on.
    let mut gone = exited_threads(&[name(7), name(8), exit(7), exit(8), name(8), name(9)]);
    gone.sort_unstable();
    assert_eq!(gone, [7]);
}

#[test]
fn a_window_keeps_only_its_stacks_renumbered_parents_first() {
    // Recording: 0 root(f0) <- 1 (f1) <- 2 (f2); 3 root(f3); 4 (f1) under 0... and
    // a stack 5 (f5) under 3 that the window does not use.
    let all = [
        node(None, 0),
        node(Some(0), 1),
        node(Some(1), 2),
        node(None, 3),
        node(Some(0), 4),
        node(Some(3), 5),
    ];
    let mut c = Compact::default();
    let a = c.stack(&all, 2).unwrap();
    let b = c.stack(&all, 4).unwrap();
    let again = c.stack(&all, 2).unwrap();
    assert_eq!(a, again);
    assert_eq!(c.nodes.len(), 4, "the shared root once: {:?}", c.nodes);
    for (i, n) in c.nodes.iter().enumerate() {
        assert!(n.parent.is_none_or(|p| (p as usize) < i), "parents first");
    }
    // Walking the window's stack gives the recording's frames, leaf first.
    let walk = |mut at: Option<StackId>| {
        let mut frames = Vec::new();
        while let Some(id) = at {
            let n = c.nodes[id as usize];
            frames.push(c.frame_order[n.frame as usize]);
            at = n.parent;
        }
        frames
    };
    assert_eq!(walk(Some(a)), vec![2, 1, 0]);
    assert_eq!(walk(Some(b)), vec![4, 0]);
    assert!(!c.frame_order.contains(&5) && !c.frame_order.contains(&3));
    // An id the recording does not have is no stack, not a panic.
    assert_eq!(c.stack(&all, 99), None);
}

#[test]
fn a_window_of_a_later_generation_reads_its_nodes_from_the_base() {
    // Nodes 10 and 11 of the recording, the first two of this generation.
    let all = [node(None, 0), node(Some(10), 1)];
    let mut c = Compact {
        base: 10,
        ..Compact::default()
    };
    let leaf = c.stack(&all, 11).unwrap();
    assert_eq!(c.nodes.len(), 2);
    assert_eq!(c.nodes[leaf as usize].parent, Some(0));
    assert_eq!(c.frame_order, [0, 1]);
    // An id of a forgotten generation is no stack, not a panic.
    assert_eq!(c.stack(&all, 3), None);
}
