//! Parsing and merging perf maps: lines, later lines winning, and the bounds (issue 26:
//! a JVM that rewrites a large map with fresh names at each request must not grow the
//! recorder without limit).

use super::*;

#[test]
fn node_python_and_java_lines() {
    let map = PerfMap::parse(
        "3ef414c0 398 RegExp:[{(]\n\
         7f2b3c2d1000 b py::foo:/srv/app/x.py\n\
         0x00007f00c0001000 0x0000000000000140 java.lang.String::hashCode()\n\
         1000 10 LazyCompile:~f /a b/c.js:1:2\r\n\
         bogus line\n\
         2000 zz bad size\n\
         3000 10\n",
    );
    assert_eq!(map.len(), 4);
    assert_eq!(map.lookup(0x3ef414c0 + 0x397), Some("RegExp:[{(]"));
    assert_eq!(map.lookup(0x3ef414c0 + 0x398), None);
    assert_eq!(map.lookup(0x7f2b3c2d1005), Some("py::foo:/srv/app/x.py"));
    assert_eq!(
        map.lookup(0x7f00c0001100),
        Some("java.lang.String::hashCode()")
    );
    assert_eq!(map.lookup(0x1008), Some("LazyCompile:~f /a b/c.js:1:2"));
    assert_eq!(map.lookup(0x3005), None);
}

#[test]
fn later_lines_win() {
    let map = PerfMap::parse(
        "100 100 old\n\
         180 10 inner\n\
         300 10 keep\n\
         0 1000 everything\n\
         400 10 newest\n",
    );
    assert_eq!(map.lookup(0x185), Some("everything"));
    assert_eq!(map.lookup(0x305), Some("everything"));
    assert_eq!(map.lookup(0x3ff), Some("everything"));
    assert_eq!(map.lookup(0x405), Some("newest"));
    assert_eq!(map.lookup(0x410), Some("everything"));

    let mut map = PerfMap::parse("100 100 old\n150 10 new\n");
    // The same snapshot merged again changes nothing; a new line does.
    assert!(!map.merge("100 100 old\n150 10 new\n"));
    assert_eq!(map.lookup(0x155), Some("new"));
    assert_eq!(map.weight(), 2 * ENTRY_COST + 6);
    assert_eq!(map.region(0x1ff), Some((0x160, 0x200, "old")));
    assert_eq!(map.lookup(0x120), Some("old"));
    assert_eq!(map.lookup(0x155), Some("new"));
    assert_eq!(map.lookup(0x160), Some("old"));
    assert_eq!(map.lookup(0x1ff), Some("old"));
    assert_eq!(map.lookup(0x200), None);
}

#[test]
fn merge_says_what_changed() {
    let mut map = PerfMap::parse("100 100 a\n300 10 b\n");
    // Known lines change nothing; new ones are reported sorted, overlaps joined.
    assert_eq!(map.merge_ranges("100 100 a\n300 10 b\n"), vec![]);
    assert_eq!(
        map.merge_ranges("300 10 b\n500 10 d\n150 10 c\n158 10 e\n"),
        vec![(0x150, 0x168), (0x500, 0x510)]
    );
    // The same address again with another name or size is a change.
    assert_eq!(map.merge_ranges("300 20 b\n"), vec![(0x300, 0x320)]);
    assert_eq!(map.lookup(0x15f), Some("e"));
}

/// A file of `n` lines with fresh names, each `len` bytes of name.
fn snapshot(n: u64, base: u64, tag: &str) -> std::io::Cursor<Vec<u8>> {
    let mut out = String::new();
    for i in 0..n {
        out.push_str(&format!("{:x} 10 {tag}_{i:08}\n", base + i * 0x10));
    }
    std::io::Cursor::new(out.into_bytes())
}

#[test]
fn a_merge_stays_within_its_budget() {
    let budget = 100 * (ENTRY_COST + 16);
    let mut map = PerfMap::default();
    // 60 lines fit.
    let m = map
        .merge_from(&mut snapshot(60, 0x1000, "aaaaaa"), budget)
        .unwrap();
    assert!(!m.rebuilt && !m.cut, "{m:?}");
    assert_eq!(map.len(), 60);
    // The same again changes nothing and costs nothing.
    let m = map
        .merge_from(&mut snapshot(60, 0x1000, "aaaaaa"), budget)
        .unwrap();
    assert_eq!(m.changed, Changed::Ranges(vec![]));
    // 60 fresh names would overflow: the map is rebuilt from them alone.
    let m = map
        .merge_from(&mut snapshot(60, 0x1000, "bbbbbb"), budget)
        .unwrap();
    assert!(m.rebuilt && !m.cut && m.changed == Changed::All, "{m:?}");
    assert_eq!(map.lookup(0x1005), Some("bbbbbb_00000000"));
    assert_eq!(map.len(), 60);
    assert!(map.weight() <= budget);
    // A snapshot larger than the budget is cut at it.
    let m = map
        .merge_from(&mut snapshot(500, 0x1000, "cccccc"), budget)
        .unwrap();
    assert!(m.rebuilt && m.cut, "{m:?}");
    assert!(map.weight() <= budget);
    assert!(map.len() <= 100 && map.len() >= 90, "{}", map.len());
    assert_eq!(map.lookup(0x1005), Some("cccccc_00000000"));
    assert_eq!(map.lookup(0x1000 + 499 * 0x10), None);
}

#[test]
fn long_lines_are_cut_and_a_last_line_without_newline_counts() {
    let mut text = format!("1000 10 {}\n", "n".repeat(3 * MAX_LINE));
    text.push_str("2000 10 last");
    let mut map = PerfMap::default();
    map.merge_from(&mut std::io::Cursor::new(text.into_bytes()), usize::MAX)
        .unwrap();
    let long = map.lookup(0x1000).unwrap();
    assert!(
        long.len() < MAX_LINE && long.len() > MAX_LINE - 20,
        "{}",
        long.len()
    );
    assert_eq!(map.lookup(0x2000), Some("last"));
}

#[test]
fn only_the_regions_hit_are_kept() {
    let map = PerfMap::parse("100 100 a\n300 10 b\n400 10 c\n150 10 d\n");
    let kept = map.only(&[0x120, 0x125, 0x155, 0x405, 0x900]);
    assert_eq!(kept.len(), 3);
    assert_eq!(kept.lookup(0x120), Some("a"));
    assert_eq!(kept.lookup(0x155), Some("d"));
    assert_eq!(kept.lookup(0x405), Some("c"));
    assert_eq!(kept.lookup(0x305), None);
    assert_eq!(kept.weight(), 3 * (1 + ENTRY_COST));
}
