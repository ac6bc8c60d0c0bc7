//! Names from outside in a diff's output: a folded file's frames (or a recording's
//! names) with control characters still make a well-formed flame graph (issue 26).

use super::*;

/// Issue 26: frames of a folded file (or names of a recording) with control
/// characters made a diff flame graph that is not well-formed XML.
#[test]
fn a_diff_flame_graph_of_hostile_names_is_well_formed() {
    let base = Run::from_folded(
        "main;work\u{1b}[2J 10\nmain;idle 5\n",
        "a\u{7}.folded".into(),
    )
    .unwrap();
    let new = Run::from_folded(
        "main;work\u{1b}[2J 30\nmain;idle\u{9b} 5\n",
        "b.folded".into(),
    )
    .unwrap();
    let mut svg = Vec::new();
    crate::diff::flamegraph::write(&[base], &[new], false, &mut svg).unwrap();
    let svg = String::from_utf8(svg).unwrap();
    let mut r = quick_xml::Reader::from_str(&svg);
    loop {
        match r.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("not well-formed: {e}"),
        }
    }
    assert!(
        !svg.chars()
            .any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
    );
    assert!(svg.contains("work\\e[2J"), "{svg}");
}
