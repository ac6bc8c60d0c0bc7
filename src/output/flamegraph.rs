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

use super::folded::{FoldedOptions, fold_counts};
use crate::profile::{FrameClass, Profile};

/// Flame graph settings.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FlameGraphOptions {
    /// One tower per thread. Default is false.
    pub per_thread: bool,
    /// One tower per process (then per thread, with `per_thread`). Default is false.
    pub per_process: bool,
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

/// The subtitle line: what, how long, how many samples, what was lost.
pub fn describe(profile: &Profile) -> String {
    let m = &profile.meta;
    let mut parts = Vec::new();
    // The attached process, else the launched one (the first seen).
    if let Some(pid) = m
        .pid
        .or_else(|| profile.threads.iter().map(|t| t.pid).min())
    {
        parts.push(format!("pid {pid}"));
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
        let off: u64 = profile
            .samples
            .iter()
            .filter(|s| s.state.is_off_cpu())
            .map(|s| s.weight)
            .sum();
        parts.push(format!(
            "{} of wall time: {} on CPU, {} off CPU",
            super::top::human_time(profile.total_weight()),
            super::top::human_time(profile.total_weight() - off),
            super::top::human_time(off)
        ));
    } else {
        parts.push(format!(
            "{} samples, {} of CPU",
            profile.samples.len(),
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

/// The default title: `profile: COMMAND`.
pub fn title(profile: &Profile) -> String {
    let cmd = profile.meta.command.join(" ");
    if cmd.is_empty() {
        "profile".to_owned()
    } else {
        format!("profile: {cmd}")
    }
}

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
        reverse: opts.reverse,
    };
    let mut tree = Tree::default();
    let mut stacks = 0;
    for (line, c) in fold_counts(profile, fold_opts) {
        tree.add(line.split(';'), c.weight);
        stacks += 1;
    }
    let min_width = opts.min_width.max(0.0);
    let threshold = (tree.nodes[0].total as f64 * min_width / 100.0) as u64;
    let merged_frames = tree.merge_narrow(0, threshold, min_width);
    let mut lines = Vec::new();
    tree.lines(0, &mut String::new(), &mut lines);

    let mut palette = palette(profile, &lines);
    let mut o = Options::default();
    o.title = opts.title.clone().unwrap_or_else(|| title(profile));
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
    if profile.is_wall_time() {
        sub.push_str(" · off-CPU frames: ");
        sub.push_str(&super::state_legend());
    }
    o.subtitle = Some(sub);
    o.count_name = if profile.is_wall_time() {
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
    o.notes = if profile.is_wall_time() {
        format!(
            "colours: native red, inlined aqua, kernel orange, JIT green, markers grey; off-CPU {}",
            super::state_legend()
        )
    } else {
        "colours: native red, inlined aqua, kernel orange, JIT green, markers grey".to_owned()
    };
    inferno::flamegraph::from_lines(&mut o, lines.iter().map(String::as_str), out)?;
    Ok(FlameGraphStats {
        stacks,
        merged_frames,
    })
}

/// The call tree of the folded stacks, weights in nanoseconds.
#[derive(Default)]
struct Tree {
    nodes: Vec<Node>,
}

#[derive(Default)]
struct Node {
    name: String,
    /// Weight of stacks ending here.
    own: u64,
    /// Weight of stacks through here (own included).
    total: u64,
    children: HashMap<String, usize>,
}

impl Tree {
    fn add<'a>(&mut self, frames: impl Iterator<Item = &'a str>, weight: u64) {
        if self.nodes.is_empty() {
            self.nodes.push(Node::default());
        }
        let mut at = 0;
        self.nodes[0].total += weight;
        for f in frames {
            let next = match self.nodes[at].children.get(f) {
                Some(&n) => n,
                None => {
                    let n = self.nodes.len();
                    self.nodes.push(Node {
                        name: f.to_owned(),
                        ..Node::default()
                    });
                    self.nodes[at].children.insert(f.to_owned(), n);
                    n
                }
            };
            at = next;
            self.nodes[at].total += weight;
        }
        self.nodes[at].own += weight;
    }

    /// Replaces the children of each node that are narrower than `threshold` (two or
    /// more of them) with one leaf holding their weight. Returns how many frames
    /// (the merged children and everything above them) went.
    fn merge_narrow(&mut self, at: usize, threshold: u64, pct: f64) -> usize {
        let mut narrow: Vec<usize> = self.nodes[at]
            .children
            .values()
            .copied()
            .filter(|&c| self.nodes[c].total < threshold)
            .collect();
        let mut merged = 0;
        if narrow.len() >= 2 {
            narrow.sort_unstable();
            let weight: u64 = narrow.iter().map(|&c| self.nodes[c].total).sum();
            for &c in &narrow {
                merged += self.count(c);
                let name = std::mem::take(&mut self.nodes[c].name);
                self.nodes[at].children.remove(&name);
            }
            let name = format!("[{merged} frames under {pct}% merged]");
            let n = self.nodes.len();
            self.nodes.push(Node {
                name: name.clone(),
                own: weight,
                total: weight,
                children: HashMap::new(),
            });
            self.nodes[at].children.insert(name, n);
        }
        let kids: Vec<usize> = self.nodes[at].children.values().copied().collect();
        for c in kids {
            merged += self.merge_narrow(c, threshold, pct);
        }
        merged
    }

    /// Frames in the subtree at `at`, itself included.
    fn count(&self, at: usize) -> usize {
        1 + self.nodes[at]
            .children
            .values()
            .map(|&c| self.count(c))
            .sum::<usize>()
    }

    /// Folded lines in microseconds, children in name order (prefixes adjacent, as
    /// inferno needs).
    fn lines(&self, at: usize, prefix: &mut String, out: &mut Vec<String>) {
        let node = &self.nodes[at];
        let us = node.own.div_ceil(1000);
        if at != 0 && node.own > 0 {
            out.push(format!("{prefix} {us}"));
        }
        let mut kids: Vec<&usize> = node.children.values().collect();
        kids.sort_by(|&&a, &&b| self.nodes[a].name.cmp(&self.nodes[b].name));
        for &c in kids {
            let len = prefix.len();
            if at != 0 {
                prefix.push(';');
            }
            prefix.push_str(&self.nodes[c].name);
            self.lines(c, prefix, out);
            prefix.truncate(len);
        }
    }
}

/// A colour for every frame name in `lines`, fixed by its kind and name.
fn palette(profile: &Profile, lines: &[String]) -> PaletteMap {
    let mut classes: HashMap<String, FrameClass> = HashMap::new();
    for (i, f) in profile.functions.iter().enumerate() {
        let name = super::suffixed_name(profile, i as u32).replace(';', ":");
        classes.insert(name, f.class);
    }
    let mut map = PaletteMap::default();
    // inferno's root frame, `all`, is named "".
    map.insert("", colour(FrameClass::Marker, ""));
    for line in lines {
        let stack = line.rsplit_once(' ').map_or(line.as_str(), |(s, _)| s);
        for name in stack.split(';') {
            if map.get(name).is_none() {
                let class = classes.get(name).copied().unwrap_or(FrameClass::Marker);
                map.insert(name, colour(class, name));
            }
        }
    }
    map
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
mod tests {
    use super::*;

    #[test]
    fn narrow_siblings_merge_into_one_leaf() {
        let mut t = Tree::default();
        t.add(["main", "big"].into_iter(), 900);
        for i in 0..50 {
            let name = format!("small{i}");
            t.add(["main", name.as_str(), "deeper"].into_iter(), 2);
        }
        // 1% of 1000 = 10: the 50 small frames and their children go.
        let merged = t.merge_narrow(0, 10, 1.0);
        assert_eq!(merged, 100);
        let mut lines = Vec::new();
        t.lines(0, &mut String::new(), &mut lines);
        assert_eq!(lines, ["main;[100 frames under 1% merged] 1", "main;big 1"]);
    }
}
