//! Flame graphs as SVG: well-formed XML with the expected frames, tooltips in CPU
//! time, colours by kind; reversed, icicle and per-thread variants differ as they
//! should; a million-sample profile still gives a small SVG.

use profile::output::flamegraph::{FlameGraphOptions, colour};
use profile::profile::{
    FrameClass, Function, FunctionIndex, Location, LocationIndex, Profile, ProfileSample,
    StackIndex, Thread, ThreadIndex,
};

use super::report_ok;

/// Frames of an SVG flame graph: (tooltip, y of the rect, fill).
fn svg_frames(svg: &str) -> Vec<(String, f64, String)> {
    use quick_xml::events::Event;
    let mut r = quick_xml::Reader::from_str(svg);
    let mut out = Vec::new();
    let (mut in_title, mut title) = (false, String::new());
    loop {
        match r.read_event().expect("SVG is well-formed XML") {
            Event::Eof => break,
            Event::Start(e) if e.name().as_ref() == b"title" => {
                in_title = true;
                title.clear();
            }
            Event::End(e) if e.name().as_ref() == b"title" => in_title = false,
            Event::Text(t) if in_title => title.push_str(&t.decode().unwrap()),
            Event::GeneralRef(g) if in_title => title.push(match &*g.decode().unwrap() {
                "lt" => '<',
                "gt" => '>',
                "amp" => '&',
                _ => '?',
            }),
            Event::Empty(e) if e.name().as_ref() == b"rect" && !title.is_empty() => {
                let attr = |k: &[u8]| {
                    e.attributes()
                        .flatten()
                        .find(|a| a.key.as_ref() == k)
                        .map(|a| String::from_utf8_lossy(&a.value).into_owned())
                        .unwrap_or_default()
                };
                out.push((title.clone(), attr(b"y").parse().unwrap(), attr(b"fill")));
                title.clear();
            }
            _ => {}
        }
    }
    out
}

/// Names one level away from the root frame `all`.
fn first_level(frames: &[(String, f64, String)], icicle: bool) -> Vec<String> {
    let root_y = frames.iter().find(|f| f.0.starts_with("all (")).unwrap().1;
    let next = frames
        .iter()
        .map(|f| f.1)
        .filter(|&y| if icicle { y > root_y } else { y < root_y })
        .fold(None, |acc: Option<f64>, y| {
            Some(acc.map_or(y, |a| if icicle { a.min(y) } else { a.max(y) }))
        })
        .unwrap();
    frames
        .iter()
        .filter(|f| f.1 == next)
        .map(|f| f.0.split(" (").next().unwrap().to_owned())
        .collect()
}

#[test]
fn flame_graphs_are_xml_with_the_expected_frames() {
    let svg = |args: &[&str]| {
        let mut all = vec!["-i", "threads.prof", "--flamegraph", "-"];
        all.extend_from_slice(args);
        svg_frames(&report_ok(&all))
    };
    let plain = svg(&[]);
    assert_eq!(first_level(&plain, false), ["clone3"]);
    let leaf = plain
        .iter()
        .find(|f| f.0.starts_with("burn_leaf ("))
        .unwrap();
    assert!(
        leaf.0.contains(" µs of CPU, "),
        "tooltip in CPU time: {}",
        leaf.0
    );
    let rgb = |class, name| {
        let c = colour(class, name);
        format!("rgb({},{},{})", c.r, c.g, c.b)
    };
    assert_eq!(leaf.2, rgb(FrameClass::Native, "burn_leaf"));
    let kernel = plain
        .iter()
        .find(|f| f.0.starts_with("do_syscall_64 ("))
        .unwrap();
    assert_eq!(kernel.2, rgb(FrameClass::Kernel, "do_syscall_64_[k]"));
    let inlined = plain.iter().find(|f| f.0.starts_with("now (")).unwrap();
    assert_eq!(inlined.2, rgb(FrameClass::Inlined, "now_[i]"));

    let reversed = svg(&["--reverse"]);
    assert!(first_level(&reversed, false).contains(&"burn_leaf".to_owned()));
    assert!(!first_level(&reversed, false).contains(&"clone3".to_owned()));

    let icicle = svg(&["--icicle"]);
    assert_eq!(first_level(&icicle, true), ["clone3"]);
    assert_eq!(icicle.len(), plain.len());

    let per_thread = svg(&["--per-thread"]);
    let mut threads = first_level(&per_thread, false);
    threads.sort();
    assert_eq!(threads, ["alpha", "beta", "gamma"]);
}

/// A million samples over 100k distinct stacks still gives an SVG of a few MB, with
/// the narrow frames merged.
#[test]
fn huge_profiles_give_small_svgs() {
    let mut p = Profile::default();
    p.threads.push(Thread {
        pid: 1,
        tid: 1,
        name: "main".into(),
        process: "main".into(),
        group: None,
        service: None,
        container: None,
        exe: None,
        program: "main".into(),
    });
    let func = |name: String| Function {
        name,
        class: FrameClass::Native,
        file: None,
        line: None,
    };
    for i in 0..1000 {
        p.functions.push(func(format!("function_number_{i}")));
        p.locations.push(Location {
            address: i,
            module: None,
            functions: vec![FunctionIndex(i as u32)],
            lines: Vec::new(),
        });
    }
    let mut x: u64 = 1;
    for s in 0..100_000u32 {
        let depth = 8 + s % 16;
        let locs: Vec<u32> = (0..depth)
            .map(|d| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                if d < 3 { d } else { ((x >> 33) % 1000) as u32 }
            })
            .collect();
        p.stacks
            .push(locs.iter().map(|&l| FunctionIndex(l)).collect());
        p.stack_locations
            .push(locs.iter().map(|&l| LocationIndex(l)).collect());
    }
    for i in 0..1_000_000u64 {
        p.samples.push(ProfileSample {
            time: i * 1000,
            thread: ThreadIndex(0),
            weight: 1_000_000,
            stack: StackIndex((i % 100_000) as u32),
            state: profile::profile::ThreadState::Running,
        });
    }
    let mut svg = Vec::new();
    let stats =
        profile::output::flamegraph::write(&p, &FlameGraphOptions::default(), &mut svg).unwrap();
    let svg = String::from_utf8(svg).unwrap();
    let frames = svg_frames(&svg);
    eprintln!("{stats:?}, {} bytes, {} frames", svg.len(), frames.len());
    assert!(stats.merged_frames > 100_000, "{stats:?}");
    assert!(svg.len() < 5_000_000, "{} bytes", svg.len());
    assert!(frames.len() < 20_000, "{} frames", frames.len());
    assert!(svg.contains("frames under 0.01% merged"));
}
