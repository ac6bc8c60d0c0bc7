//! Folded stacks, one line per unique stack: `root;caller;leaf COUNT`, the input of
//! inferno, flamegraph.pl and speedscope. Frames carry inferno's colour suffixes
//! (`_[k]` kernel, `_[j]` JIT, `_[i]` inlined); a `;` inside a name becomes `:`.
//! An off-CPU stack ends in one `[off-cpu: STATE]` frame, under the frame where the
//! thread blocked.
//!
//! Folding happens once, on ids: [`fold_ids`] turns the model's stacks into unique
//! stacks of [`Label`]s (a frame as folded output shows it, with the kind the model
//! gave it), which the flame graph builds its tree from and `profile diff` compares.
//! Text is made from labels only at the last step, by [`Folded::line`].

use std::collections::HashMap;
use std::io::{self, Write};

use super::{ProcessRoots, root_names, suffixed_name};
use crate::profile::{FrameClass, FunctionIndex, Profile, StackIndex, ThreadIndex};

/// How to fold.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct FoldedOptions {
    /// Root each stack at its thread name, then `tid N`. Default is false.
    pub per_thread: bool,
    /// Root each stack at its process name, then `pid N` (before the thread when both
    /// are set). Default is false.
    pub per_process: bool,
    /// Root each stack at its process name only, so that processes of one program
    /// merge into one tower (`per_process` wins when both are set). Default is false.
    pub per_program: bool,
    /// Root each stack at `service NAME`, its process's service (a recording that
    /// holds workloads), before the process. Default is false.
    pub per_service: bool,
    /// Leaf first: stacks merge by the function that was running, its callers above
    /// it. Thread and process roots stay at the root. Default is false.
    pub reverse: bool,
}

impl FoldedOptions {
    /// Options with only `per_thread` set as given.
    pub fn per_thread(per_thread: bool) -> Self {
        FoldedOptions {
            per_thread,
            ..Default::default()
        }
    }

    /// How stacks are rooted at their processes.
    pub fn process_roots(&self) -> ProcessRoots {
        if self.per_process {
            ProcessRoots::ByPid
        } else if self.per_program {
            ProcessRoots::ByName
        } else {
            ProcessRoots::None
        }
    }
}

/// Samples and CPU time of one folded line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Samples taken in the stack.
    pub samples: u64,
    /// Nanoseconds of CPU time.
    pub weight: u64,
}

/// A frame as folded output shows it: its text (with the colour suffix, `;` made
/// `:`) and the kind of code it is. Functions whose texts are equal share a label, as
/// they would share a folded line; a thread or process root shares the label of a
/// function of the same text (and so its kind), else it is a [`FrameClass::Marker`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    /// The text of the frame in a folded line.
    pub text: String,
    /// The kind the model gave the frame.
    pub class: FrameClass,
}

/// Index into [`Folded::labels`].
pub type LabelId = u32;

/// A profile folded into unique stacks of labels.
#[derive(Debug, Clone, Default)]
pub struct Folded {
    /// Every label, indexed by [`LabelId`].
    pub labels: Vec<Label>,
    /// Unique stacks, root first (roots included; leaf first below the roots when
    /// reversed), with what they hold, in the order of their label ids. A sample with
    /// no stack is the one frame `[no stack]`.
    pub stacks: Vec<(Vec<LabelId>, Counts)>,
    ids: HashMap<String, LabelId>,
}

impl Folded {
    /// The label of `text`, added as `class` if new.
    pub fn intern(&mut self, text: &str, class: FrameClass) -> LabelId {
        if let Some(&id) = self.ids.get(text) {
            return id;
        }
        let id = LabelId::try_from(self.labels.len()).expect("fewer than 2^32 labels");
        self.labels.push(Label {
            text: text.to_owned(),
            class,
        });
        self.ids.insert(text.to_owned(), id);
        id
    }

    /// The text of a label.
    pub fn text(&self, id: LabelId) -> &str {
        &self.labels[id as usize].text
    }

    /// A stack as a folded line's stack part: label texts joined by `;`.
    pub fn line(&self, stack: &[LabelId]) -> String {
        let mut s = String::new();
        for (i, &l) in stack.iter().enumerate() {
            if i > 0 {
                s.push(';');
            }
            s.push_str(self.text(l));
        }
        s
    }
}

/// A name as a folded label: `;` (the frame separator) as `:`, and control characters
/// (a thread name is any bytes its process chose) as visible escapes, so that a
/// folded line stays one line of frames and is safe on a terminal and in an SVG.
fn label_text(name: &str) -> String {
    crate::text::terminal(name, usize::MAX).replace(';', ":")
}

/// Folds the profile's stacks into unique label stacks (the one folding every
/// folded-stack output shares).
pub fn fold_ids(profile: &Profile, opts: FoldedOptions) -> Folded {
    // Count per (thread?, stack) first, then fold each distinct key once.
    let processes = opts.process_roots();
    let rooted = opts.per_thread || processes != ProcessRoots::None || opts.per_service;
    let mut counts: HashMap<(Option<ThreadIndex>, StackIndex), Counts> = HashMap::new();
    for s in &profile.samples {
        let thread = rooted.then_some(s.thread);
        let c = counts.entry((thread, s.stack)).or_default();
        c.samples += 1;
        c.weight = c.weight.saturating_add(s.weight);
    }
    let mut folded = Folded::default();
    // Every function's label; of functions sharing a text, the last one's kind
    // stands for it.
    let mut function_labels = Vec::with_capacity(profile.functions.len());
    for (f, func) in profile.functions.iter().enumerate() {
        let text = label_text(&suffixed_name(profile, FunctionIndex::next(f)));
        let id = folded.intern(&text, func.class);
        folded.labels[id as usize].class = func.class;
        function_labels.push(id);
    }
    let mut thread_roots: HashMap<ThreadIndex, Vec<LabelId>> = HashMap::new();
    let mut stacks: HashMap<Vec<LabelId>, Counts> = HashMap::new();
    let no_stack = [folded.intern("[no stack]", FrameClass::Marker)];
    for ((thread, stack), n) in counts {
        let mut parts: Vec<LabelId> = match thread {
            Some(t) => thread_roots
                .entry(t)
                .or_insert_with(|| {
                    root_names(profile, t, opts.per_service, processes, opts.per_thread)
                        .iter()
                        .map(|r| folded.intern(&label_text(r), FrameClass::Marker))
                        .collect()
                })
                .clone(),
            None => Vec::new(),
        };
        let first = parts.len();
        let funcs = profile.stack(stack);
        parts.extend(funcs.iter().map(|&f| function_labels[f.index()]));
        if parts.len() == first {
            parts.extend(no_stack);
        }
        if opts.reverse {
            parts[first..].reverse();
        }
        let c = stacks.entry(parts).or_default();
        c.samples += n.samples;
        c.weight = c.weight.saturating_add(n.weight);
    }
    folded.stacks = stacks.into_iter().collect();
    folded.stacks.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    folded
}

/// Unique stacks with their sample counts, sorted by stack.
pub fn fold(profile: &Profile, opts: FoldedOptions) -> Vec<(String, u64)> {
    fold_counts(profile, opts)
        .into_iter()
        .map(|(s, c)| (s, c.samples))
        .collect()
}

/// Unique stacks with their sample counts and CPU time, sorted by stack.
pub fn fold_counts(profile: &Profile, opts: FoldedOptions) -> Vec<(String, Counts)> {
    let folded = fold_ids(profile, opts);
    let mut lines: Vec<(String, Counts)> = folded
        .stacks
        .iter()
        .map(|(stack, c)| (folded.line(stack), *c))
        .collect();
    lines.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    lines
}

/// Writes one `STACK COUNT` line per unique stack, sorted by stack: COUNT is
/// samples, or in an off-CPU recording (wall time) nanoseconds, so off-CPU stacks
/// weigh what they waited. A stack ending in `[unsampled]` (CPU time no sample stands
/// for, one marker sample per thread) counts in the same unit as the others: its time
/// in sample periods, so its share is the one the flame graph and the table show.
pub fn write(profile: &Profile, opts: FoldedOptions, out: &mut dyn Write) -> io::Result<()> {
    let mut out = io::BufWriter::new(out);
    let wall = profile.is_wall_time();
    let period = profile.meta.sample_period_ns.max(1);
    let unsampled = crate::format::Truncation::Unsampled.label();
    for (stack, c) in fold_counts(profile, opts) {
        let n = if wall {
            c.weight
        } else if stack.rsplit(';').next() == Some(unsampled) {
            // Rounded to the nearest period; a remainder is never 0 of them.
            (c.weight.saturating_add(period / 2) / period).max(1)
        } else {
            c.samples
        };
        writeln!(out, "{stack} {n}")?;
    }
    out.flush()
}
