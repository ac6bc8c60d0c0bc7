//! The flame graph's tree, colours and SVG on small profiles.

use super::*;

fn tree_of(folded: &mut Folded, stacks: &[(&[&str], u64)]) -> Tree {
    let mut t = Tree::new();
    for (frames, w) in stacks {
        let ids: Vec<LabelId> = frames
            .iter()
            .map(|f| folded.intern(f, FrameClass::Native))
            .collect();
        t.add(&ids, *w);
    }
    t
}

#[test]
fn narrow_siblings_merge_into_one_leaf() {
    let mut folded = Folded::default();
    let names: Vec<String> = (0..50).map(|i| format!("small{i}")).collect();
    let mut stacks: Vec<(&[&str], u64)> = vec![(&["main", "big"], 900)];
    let paths: Vec<[&str; 3]> = names.iter().map(|n| ["main", n, "deeper"]).collect();
    stacks.extend(paths.iter().map(|p| (&p[..], 2)));
    let mut t = tree_of(&mut folded, &stacks);
    // 1% of 1000 = 10: the 50 small frames and their children go.
    let merged = t.merge_narrow(&mut folded, 10, 1.0);
    assert_eq!(merged, 100);
    let lines = t.lines(&folded);
    assert_eq!(lines, ["main;[100 frames under 1% merged] 1", "main;big 1"]);
    let palette = t.palette(&folded);
    assert_eq!(
        palette.get("[100 frames under 1% merged]"),
        Some(colour(FrameClass::Marker, "[100 frames under 1% merged]"))
    );
    assert_eq!(palette.get("big"), Some(colour(FrameClass::Native, "big")));
}

/// Issue 14: the recursive walks overflowed the stack at depth 50,000.
#[test]
fn a_stack_50000_frames_deep_draws() {
    let mut folded = Folded::default();
    let ids: Vec<LabelId> = (0..50_000)
        .map(|i| folded.intern(&format!("f{}", i % 7), FrameClass::Native))
        .collect();
    let mut t = Tree::new();
    t.add(&ids, 3_000);
    t.add(&ids[..10], 1_000);
    assert_eq!(t.count(0), 50_001);
    assert_eq!(t.merge_narrow(&mut folded, 10, 0.01), 0);
    let lines = t.lines(&folded);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0], "f0;f1;f2;f3;f4;f5;f6;f0;f1;f2 1");
    assert_eq!(lines[1].matches(';').count(), 49_999);
    assert!(lines[1].ends_with(" 3"));
}

/// The same through inferno, from a profile model.
#[test]
fn a_profile_50000_frames_deep_draws() {
    let p = one_sample(7, (0..50_000).map(|i| i % 7).collect());
    let mut svg = Vec::new();
    let stats = write(&p, &FlameGraphOptions::default(), &mut svg).unwrap();
    assert_eq!(stats.stacks, 1);
    let svg = String::from_utf8(svg).unwrap();
    assert!(
        svg.contains("f6 (1,000 µs of CPU, 100.00%)"),
        "{}",
        &svg[..2000]
    );
}

/// A subtitle longer than the default 1200 px widens the drawing instead of being
/// clipped at both ends (wall-time graphs list the state colours there).
#[test]
fn a_long_subtitle_widens_the_drawing() {
    let p = one_sample(1, vec![0]);
    let width = |note: &str| {
        let opts = FlameGraphOptions {
            note: Some(note.to_owned()),
            ..FlameGraphOptions::default()
        };
        let mut svg = Vec::new();
        write(&p, &opts, &mut svg).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        let at = svg.find("width=\"").unwrap() + 7;
        svg[at..]
            .split('"')
            .next()
            .unwrap()
            .parse::<usize>()
            .unwrap()
    };
    assert_eq!(width("short"), 1200);
    let long = "x".repeat(300);
    assert!(width(&long) >= 300 * 7, "{}", width(&long));
}

/// A profile of one thread and one 1 ms sample whose stack is `stack` (root
/// first) over `functions` functions named f0, f1, ...
fn one_sample(functions: u32, stack: Vec<u32>) -> Profile {
    use crate::profile::{Function, FunctionIndex, ProfileSample, StackIndex, Thread, ThreadIndex};
    Profile {
        functions: (0..functions)
            .map(|i| Function {
                name: format!("f{i}"),
                class: FrameClass::Native,
                file: None,
                line: None,
            })
            .collect(),
        stacks: vec![stack.into_iter().map(FunctionIndex).collect()],
        threads: vec![Thread {
            pid: 1,
            tid: 1,
            name: "t".into(),
            process: "t".into(),
            group: None,
            service: None,
            container: None,
            exe: None,
            program: "t".into(),
        }],
        samples: vec![ProfileSample {
            time: 0,
            thread: ThreadIndex(0),
            weight: 1_000_000,
            stack: StackIndex(0),
            state: crate::profile::ThreadState::Running,
        }],
        ..Profile::default()
    }
}
