//! SVG flame graphs through inferno, titled with what was recorded.
//!
//! Widths are CPU time: each stack counts its samples' weights, in microseconds, and
//! tooltips show them (`burn_leaf (412,000 µs of CPU, 41.20%)`). Colours tell the kind
//! of code apart, the same for a name in every graph: native code red,
//! inlined functions aqua, kernel orange, JIT green, thread and process roots and other
//! markers grey; in an off-CPU recording widths are wall time and each
//! `[off-cpu: STATE]` frame has its state's shade of blue, named in the subtitle. Before inferno draws, frames narrower than the minimum width are
//! merged with their narrow siblings into one `[N frames under X% merged]` frame (with
//! no children), so a profile with a hundred thousand distinct stacks still gives an
//! SVG of a few thousand rectangles that browsers open.

use std::collections::HashMap;
use std::io::Write;

use inferno::flamegraph::color::{Color, PaletteMap};
use inferno::flamegraph::{Direction, Options};

use super::folded::{Folded, FoldedOptions, LabelId, fold_ids};
use crate::profile::{FrameClass, Profile, ThreadState};

/// Flame graph settings.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FlameGraphOptions {
    /// One tower per thread. Default is false.
    pub per_thread: bool,
    /// One tower per process (then per thread, with `per_thread`). Default is false.
    pub per_process: bool,
    /// One tower per program: processes of one name merged (`per_process` wins).
    /// Default is false.
    pub per_program: bool,
    /// One tower per service (a recording that holds workloads), above the
    /// processes. Default is false.
    pub per_service: bool,
    /// Merge stacks by their leaf: the running function at the bottom, its callers
    /// above. Default is false.
    pub reverse: bool,
    /// Icicle graph: roots at the top, growing down. Default is false.
    pub icicle: bool,
    /// Frames narrower than this percentage of the total are merged with their narrow
    /// siblings; narrower merged frames are left out. Default is 0.01 (%).
    pub min_width: f64,
    /// Title; default is none: `profile: COMMAND`.
    pub title: Option<String>,
    /// Appended to the subtitle, e.g. which filters were applied. Default is none.
    pub note: Option<String>,
}

impl Default for FlameGraphOptions {
    fn default() -> Self {
        FlameGraphOptions {
            per_thread: false,
            per_process: false,
            per_program: false,
            per_service: false,
            reverse: false,
            icicle: false,
            min_width: 0.01,
            title: None,
            note: None,
        }
    }
}

/// What drawing did, for a note on stderr.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlameGraphStats {
    /// Distinct stacks drawn.
    pub stacks: usize,
    /// Frames merged into `[N frames ...]` frames because they were too narrow.
    pub merged_frames: usize,
}

/// `: 1.19 s on CPU, 4.83 s off CPU`, the split of an off-CPU recording's wall time.
fn wall_split(profile: &Profile) -> String {
    let off: u64 = profile
        .samples
        .iter()
        .filter(|s| s.state.is_off_cpu())
        .fold(0u64, |t, s| t.saturating_add(s.weight));
    format!(
        ": {} on CPU, {} off CPU",
        super::top::human_time(profile.total_weight().saturating_sub(off)),
        super::top::human_time(off)
    )
}

/// The subtitle line: what, how long, how many samples, what was lost.
pub fn describe(profile: &Profile) -> String {
    let m = &profile.meta;
    let mut parts = Vec::new();
    // The attached or launched process, or the processes that had samples.
    if let Some(what) = super::recorded_processes(profile, true) {
        parts.push(what);
    }
    if let Some(s) = &profile.summary
        && s.end_time_ns > m.start_time_ns
    {
        parts.push(format!(
            "{:.1} s",
            (s.end_time_ns - m.start_time_ns) as f64 / 1e9
        ));
    }
    if profile.is_wall_time() {
        parts.push(format!(
            "{}, {} of wall time{}",
            profile.counts().describe(true),
            super::top::human_time(profile.total_weight()),
            wall_split(profile)
        ));
    } else {
        parts.push(format!(
            "{}, {} of CPU",
            profile.counts().describe(false),
            super::top::human_time(profile.total_weight())
        ));
    }
    parts.push(format!("{} lost", profile.lost));
    parts.push(format!(
        "{} Hz of CPU time, {} stacks",
        m.frequency_hz, m.call_graph
    ));
    if profile.damage.is_some() {
        parts.push("recording cut short".into());
    }
    parts.join(" · ")
}

/// The default title: `profile: COMMAND`, or the processes when several were
/// attached (`profile: 4 processes of postgres (pids …)`; the command line is only
/// the first one's).
pub fn title(profile: &Profile) -> String {
    if profile.meta.pids.len() > 1
        && let Some(what) = super::recorded_processes(profile, true)
    {
        return format!("profile: {what}");
    }
    let cmd = profile.meta.command.join(" ");
    if cmd.is_empty() {
        "profile".to_owned()
    } else {
        format!("profile: {cmd}")
    }
}

/// inferno's default drawing width.
const DEFAULT_WIDTH_PX: usize = 1200;

/// Draws the profile's flame graph as SVG.
pub fn write(
    profile: &Profile,
    opts: &FlameGraphOptions,
    out: &mut dyn Write,
) -> anyhow::Result<FlameGraphStats> {
    if profile.samples.is_empty() {
        anyhow::bail!(
            "the recording has no samples: nothing to draw (did the target use any CPU?)"
        );
    }
    let fold_opts = FoldedOptions {
        per_thread: opts.per_thread,
        per_process: opts.per_process,
        per_program: opts.per_program,
        per_service: opts.per_service,
        reverse: opts.reverse,
    };
    let mut folded = fold_ids(profile, fold_opts);
    let mut tree = Tree::new();
    for (stack, c) in &folded.stacks {
        tree.add(stack, c.weight);
    }
    let stacks = folded.stacks.len();
    let min_width = opts.min_width.max(0.0);
    let threshold = (tree.nodes[0].total as f64 * min_width / 100.0) as u64;
    let merged_frames = tree.merge_narrow(&mut folded, threshold, min_width);
    let lines = tree.lines(&folded);
    let mut palette = tree.palette(&folded);

    let mut o = Options::default();
    // The command line, a thread or file name: text others chose, XML-safe (inferno
    // escapes `& < >` but passes control characters through).
    o.title =
        crate::text::xml_chars(&opts.title.clone().unwrap_or_else(|| title(profile))).into_owned();
    let sub = subtitle(profile, opts, merged_frames, min_width);
    // The subtitle is one centred line: widen the drawing rather than clip it.
    let subtitle_px = px(&sub);
    if subtitle_px > DEFAULT_WIDTH_PX {
        o.image_width = Some(subtitle_px);
    }
    o.subtitle = Some(crate::text::xml_chars(&sub).into_owned());
    let wall = profile.is_wall_time();
    o.count_name = if wall {
        "µs of wall time".to_owned()
    } else {
        "µs of CPU".to_owned()
    };
    o.name_type = "Function:".to_owned();
    o.min_width = min_width;
    o.direction = if opts.icicle {
        Direction::Inverted
    } else {
        Direction::Straight
    };
    o.palette_map = Some(&mut palette);
    o.notes = if wall {
        format!(
            "colours: native red, inlined aqua, kernel orange, JIT green, markers grey; off-CPU {}",
            super::state_legend()
        )
    } else {
        "colours: native red, inlined aqua, kernel orange, JIT green, markers grey".to_owned()
    };
    if wall {
        // Swatches in the states' colours before their names in the subtitle.
        let mut svg = Vec::new();
        inferno::flamegraph::from_lines(&mut o, lines.iter().map(String::as_str), &mut svg)?;
        let text = String::from_utf8_lossy(&svg);
        out.write_all(with_swatches(&text).as_bytes())?;
    } else {
        inferno::flamegraph::from_lines(&mut o, lines.iter().map(String::as_str), out)?;
    }
    Ok(FlameGraphStats {
        stacks,
        merged_frames,
    })
}

/// A line's width in pixels: about 7.5 px a character at the default 12 px
/// monospace font, and a margin.
fn px(s: &str) -> usize {
    s.chars().count() * 15 / 2 + 60
}

/// The subtitle: what the profile holds, the filter's note, the frames merged, the
/// direction and the recorder's notes; in a wall-time profile, the states' legend,
/// dropping what else it says (rate, merged frames, the wall split, a zero lost
/// count) rather than widening the drawing.
fn subtitle(
    profile: &Profile,
    opts: &FlameGraphOptions,
    merged_frames: usize,
    min_width: f64,
) -> String {
    let mut sub = describe(profile);
    if let Some(note) = &opts.note {
        sub.push_str(" · ");
        sub.push_str(note);
    }
    if merged_frames > 0 {
        sub.push_str(&format!(
            " · {merged_frames} frames under {min_width}% merged"
        ));
    }
    if opts.reverse {
        sub.push_str(" · reversed: callers above the running function");
    }
    // What the recorder said of the naming and the runtimes (unnamed JIT code, a
    // runtime reader's budgets), as the table's footer and JSON say it.
    if let Some(notes) = super::notes_line(profile) {
        sub.push_str(" · ");
        sub.push_str(&notes);
    }
    if profile.is_wall_time() {
        // The legend: each state's name after a swatch of its colour (drawn below),
        // two characters wider than the name. It must not widen the drawing: the
        // recording's rate and stack mode go first, then what else the table says.
        let legend = legend_text();
        let rate = format!(
            " · {} Hz of CPU time, {} stacks",
            profile.meta.frequency_hz, profile.meta.call_graph
        );
        let merged = format!(" · {merged_frames} frames under {min_width}% merged");
        // Then the split of the wall time (the table has it), and a zero lost count;
        // never the counts.
        let lost = if profile.lost == 0 {
            " · 0 lost".to_owned()
        } else {
            String::new()
        };
        for optional in [rate, merged, wall_split(profile), lost] {
            if optional.is_empty() {
                continue;
            }
            if px(&sub) + px(&legend) - 60 > DEFAULT_WIDTH_PX {
                sub = sub.replacen(&optional, "", 1);
            }
        }
        sub.push_str(&legend);
    }
    sub
}

/// The subtitle's legend of off-CPU states, as plain text: each name after a square
/// that [`with_swatches`] colours.
fn legend_text() -> String {
    let names: Vec<String> = ThreadState::ALL
        .iter()
        .filter(|s| s.is_off_cpu())
        .map(|s| format!("■ {}", s.name()))
        .collect();
    format!(" · off-CPU frames: {}", names.join(" "))
}

/// Colours the legend's squares (`■ NAME`) in the subtitle of an SVG inferno drew.
fn with_swatches(svg: &str) -> String {
    let Some(at) = svg.find(r#"<text id="subtitle""#) else {
        return svg.to_owned();
    };
    let end = svg[at..].find("</text>").map_or(svg.len(), |e| at + e);
    let mut line = svg[at..end].to_owned();
    for s in ThreadState::ALL.iter().filter(|s| s.is_off_cpu()) {
        let (r, g, b) = super::state_colour(*s);
        line = line.replacen(
            &format!("■ {}", s.name()),
            &format!(r#"<tspan fill="rgb({r},{g},{b})">■</tspan> {}"#, s.name()),
            1,
        );
    }
    format!("{}{line}{}", &svg[..at], &svg[end..])
}

/// The call tree of the folded stacks, by label, weights in nanoseconds. Every walk
/// over it is iterative: a stack as deep as a file can make it does not overflow
/// ours.
struct Tree {
    /// Node 0 is the root (inferno's `all`); it has no label.
    nodes: Vec<Node>,
}

struct Node {
    label: LabelId,
    /// Weight of stacks ending here.
    own: u64,
    /// Weight of stacks through here (own included).
    total: u64,
    children: HashMap<LabelId, usize>,
}

impl Node {
    fn new(label: LabelId) -> Node {
        Node {
            label,
            own: 0,
            total: 0,
            children: HashMap::new(),
        }
    }
}

impl Tree {
    fn new() -> Tree {
        Tree {
            nodes: vec![Node::new(LabelId::MAX)],
        }
    }

    fn add(&mut self, stack: &[LabelId], weight: u64) {
        let mut at = 0;
        self.nodes[0].total = self.nodes[0].total.saturating_add(weight);
        for &label in stack {
            let next = match self.nodes[at].children.get(&label) {
                Some(&n) => n,
                None => {
                    let n = self.nodes.len();
                    self.nodes.push(Node::new(label));
                    self.nodes[at].children.insert(label, n);
                    n
                }
            };
            at = next;
            self.nodes[at].total = self.nodes[at].total.saturating_add(weight);
        }
        self.nodes[at].own = self.nodes[at].own.saturating_add(weight);
    }

    /// Replaces the children of each node that are narrower than `threshold` (two or
    /// more of them) with one leaf holding their weight, labelled
    /// `[N frames under X% merged]`. Returns how many frames (the merged children and
    /// everything above them) went.
    fn merge_narrow(&mut self, folded: &mut Folded, threshold: u64, pct: f64) -> usize {
        let mut merged = 0;
        let mut todo = vec![0];
        while let Some(at) = todo.pop() {
            let mut narrow: Vec<(LabelId, usize)> = self.nodes[at]
                .children
                .iter()
                .map(|(&l, &c)| (l, c))
                .filter(|&(_, c)| self.nodes[c].total < threshold)
                .collect();
            let mut here = 0;
            if narrow.len() >= 2 {
                narrow.sort_unstable();
                let mut weight = 0u64;
                for &(label, c) in &narrow {
                    weight = weight.saturating_add(self.nodes[c].total);
                    here += self.count(c);
                    self.nodes[at].children.remove(&label);
                }
                let label = folded.intern(
                    &format!("[{here} frames under {pct}% merged]"),
                    FrameClass::Marker,
                );
                let n = self.nodes.len();
                self.nodes.push(Node {
                    own: weight,
                    total: weight,
                    ..Node::new(label)
                });
                // A merged frame beside a sibling of the same text adds to it.
                match self.nodes[at].children.get(&label) {
                    Some(&old) => {
                        self.nodes[old].own = self.nodes[old].own.saturating_add(weight);
                        self.nodes[old].total = self.nodes[old].total.saturating_add(weight);
                        self.nodes.pop();
                    }
                    None => {
                        self.nodes[at].children.insert(label, n);
                    }
                }
            }
            merged += here;
            todo.extend(self.nodes[at].children.values().copied());
        }
        merged
    }

    /// Frames in the subtree at `at`, itself included.
    fn count(&self, at: usize) -> usize {
        let mut n = 0;
        let mut todo = vec![at];
        while let Some(i) = todo.pop() {
            n += 1;
            todo.extend(self.nodes[i].children.values().copied());
        }
        n
    }

    /// Folded lines in microseconds, children in text order (prefixes adjacent, as
    /// inferno needs): the only place the tree becomes text.
    fn lines(&self, folded: &Folded) -> Vec<String> {
        let mut out = Vec::new();
        let mut prefix = String::new();
        // (node, length of its parent's line so far; none under the root).
        let mut todo: Vec<(usize, Option<usize>)> = Vec::new();
        self.push_children(0, None, folded, &mut todo);
        while let Some((at, parent)) = todo.pop() {
            match parent {
                Some(len) => {
                    prefix.truncate(len);
                    prefix.push(';');
                }
                None => prefix.clear(),
            }
            let node = &self.nodes[at];
            prefix.push_str(&crate::text::xml_chars(folded.text(node.label)));
            if node.own > 0 {
                out.push(format!("{prefix} {}", node.own.div_ceil(1000)));
            }
            self.push_children(at, Some(prefix.len()), folded, &mut todo);
        }
        out
    }

    /// Pushes the children of `at` last in text order first, so they pop in order.
    fn push_children(
        &self,
        at: usize,
        parent: Option<usize>,
        folded: &Folded,
        todo: &mut Vec<(usize, Option<usize>)>,
    ) {
        let first = todo.len();
        todo.extend(self.nodes[at].children.values().map(|&c| (c, parent)));
        todo[first..].sort_by(|&(a, _), &(b, _)| {
            folded
                .text(self.nodes[b].label)
                .cmp(folded.text(self.nodes[a].label))
        });
    }

    /// A colour for every frame in the tree, fixed by its label's kind and text.
    fn palette(&self, folded: &Folded) -> PaletteMap {
        let mut map = PaletteMap::default();
        // inferno's root frame, `all`, is named "".
        map.insert("", colour(FrameClass::Marker, ""));
        for node in &self.nodes[1..] {
            let label = &folded.labels[node.label as usize];
            let text = crate::text::xml_chars(&label.text);
            if map.get(&text).is_none() {
                map.insert(&text, colour(label.class, &label.text));
            }
        }
        map
    }
}

/// The colour of a frame: its kind picks the hue, its name the shade.
pub fn colour(class: FrameClass, name: &str) -> Color {
    // FNV-1a: stable across runs and platforms, unlike the std hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let v = |shift: u32| ((h >> shift) & 0xff) as f64 / 255.0;
    let (v1, v2) = (v(8), v(24));
    let c = |x: f64| x.round().clamp(0.0, 255.0) as u8;
    let (r, g, b) = match class {
        FrameClass::Native => (200.0 + 55.0 * v1, 50.0 + 80.0 * v2, 50.0 + 80.0 * v2),
        FrameClass::Inlined => (50.0 + 60.0 * v1, 165.0 + 55.0 * v2, 165.0 + 55.0 * v2),
        FrameClass::Kernel => (225.0 + 30.0 * v1, 140.0 + 50.0 * v2, 0.0),
        FrameClass::Jit => (50.0 + 60.0 * v1, 200.0 + 55.0 * v2, 50.0 + 60.0 * v1),
        FrameClass::Python => (150.0 + 50.0 * v1, 90.0 + 40.0 * v2, 210.0 + 45.0 * v1),
        FrameClass::Interpreted => (120.0 + 50.0 * v1, 120.0 + 50.0 * v1, 215.0 + 40.0 * v2),
        FrameClass::Marker => (170.0 + 40.0 * v1, 170.0 + 40.0 * v1, 170.0 + 40.0 * v1),
        FrameClass::OffCpu(state) => {
            let (r, g, b) = super::state_colour(state);
            (f64::from(r), f64::from(g), f64::from(b))
        }
    };
    Color {
        r: c(r),
        g: c(g),
        b: c(b),
    }
}

#[cfg(test)]
#[path = "flamegraph_tests.rs"]
mod tests;
