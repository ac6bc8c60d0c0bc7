//! The thread timeline: an SVG with one row per thread (name and tid), time across,
//! each stretch coloured by what the thread was doing.
//!
//! In an off-CPU recording every nanosecond of a thread's life is accounted for:
//! its off-CPU intervals carry their state, and the time between them is running.
//! In a CPU-only recording the rows show where the CPU samples fell (running) and
//! leave the rest blank. Each row is cut into pixel columns; a column is a stacked
//! strip of its states in proportion to their time in it (running at the bottom),
//! so a thread that runs 60 µs out of every 19 ms pixel still shows its running
//! share at any zoom. Runs of columns with the same proportions (to a quarter
//! pixel) become one strip whose hover titles say each state's time and the
//! function at the top of the stack that held most of the main state's time (for an
//! off-CPU stretch the innermost user function where the thread blocked). Each
//! row's totals by state are written at its right end. So the file's size follows
//! the number of changes a reader can see, not the number of context switches, and
//! when even that is large (thousands of threads switching in every column) the
//! column count is halved until the file fits its budget.

use std::collections::HashMap;
use std::io::{self, Write};

use crate::profile::filter::TimeRange;
use crate::profile::{FrameClass, FunctionIndex, Profile, StackIndex, ThreadIndex, ThreadState};

/// Timeline settings.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TimelineOptions {
    /// Pixel columns of the time axis. Default is 1200.
    pub width: u32,
    /// Most rectangles drawn in all; past it the columns are widened. Default is 40,000
    /// (a few MB of SVG).
    pub max_rects: usize,
    /// Title; default is none: `profile: COMMAND`.
    pub title: Option<String>,
    /// The time window the axis spans (`report --time`), nanoseconds from the start
    /// of the recording; stretches are cut at its edges. Default is the whole
    /// recording.
    pub time: TimeRange,
    /// Appended to the subtitle, e.g. which filters were applied. Default is none.
    pub note: Option<String>,
}

impl Default for TimelineOptions {
    fn default() -> Self {
        TimelineOptions {
            width: 1200,
            max_rects: 40_000,
            title: None,
            time: TimeRange::default(),
            note: None,
        }
    }
}

/// A column's height is cut in this many parts to tell proportions apart.
const UNITS: u32 = 56;

/// One run of columns with the same proportions of states.
struct Run {
    /// The state that held most of its time.
    state: ThreadState,
    first: u32,
    /// One past the last column.
    end: u32,
    /// Time per state (indexed by code).
    times: [u64; ThreadState::COUNT],
    /// Each state's share of the column height, in [`UNITS`], display order.
    mix: Vec<(ThreadState, u32)>,
    /// The stack that held most of the main state's time.
    stack: Option<StackIndex>,
}

/// What a row holds: runs, and the thread's time per state.
struct Row {
    thread: ThreadIndex,
    runs: Vec<Run>,
    totals: [u64; ThreadState::COUNT],
}

/// Writes the timeline.
pub fn write(profile: &Profile, opts: &TimelineOptions, out: &mut dyn Write) -> io::Result<()> {
    let end = recording_end(profile);
    // Off-CPU recordings account for time from the attach on: start the axis there.
    let origin = profile
        .summary
        .as_ref()
        .filter(|_| profile.is_wall_time())
        .map_or(0, |s| {
            s.attached_ns.saturating_sub(profile.meta.start_time_ns)
        })
        .min(end.saturating_sub(1));
    // A `--time` window narrows the axis to itself (within the recording).
    let end = opts.time.end.map_or(end, |e| e.min(end));
    let origin = opts.time.start.map_or(origin, |s| s.max(origin));
    let window = (origin.min(end.saturating_sub(1)), end.max(1));
    let mut order: Vec<ThreadIndex> = (0..profile.threads.len()).map(ThreadIndex::next).collect();
    order.sort_by_key(|&t| {
        let th = profile.thread(t);
        (th.pid, th.tid, t)
    });
    let mut by_thread: Vec<Vec<usize>> = vec![Vec::new(); profile.threads.len()];
    for (i, iv) in profile.intervals.iter().enumerate() {
        by_thread[iv.thread.index()].push(i);
    }
    let mut samples_by_thread: Vec<Vec<usize>> = vec![Vec::new(); profile.threads.len()];
    for (i, s) in profile.samples.iter().enumerate() {
        if !s.state.is_off_cpu() {
            samples_by_thread[s.thread.index()].push(i);
        }
    }
    let mut cols = opts.width.max(10);
    let rows = loop {
        let rows: Vec<Row> = order
            .iter()
            .map(|&t| row(profile, t, window, cols, &by_thread, &samples_by_thread))
            .collect();
        let rects: usize = rows.iter().flat_map(|r| &r.runs).map(|r| r.mix.len()).sum();
        if rects <= opts.max_rects || cols <= 50 {
            break rows;
        }
        cols /= 2;
    };
    let mut svg = String::with_capacity(1 << 16);
    svg::render(profile, opts, window, cols, &rows, &mut svg);
    out.write_all(svg.as_bytes())?;
    out.flush()
}

/// Nanoseconds from the start to the end of the recording.
fn recording_end(profile: &Profile) -> u64 {
    let from_summary = profile
        .summary
        .as_ref()
        .map(|s| s.end_time_ns.saturating_sub(profile.meta.start_time_ns))
        .unwrap_or(0);
    let from_spans = profile.spans.iter().map(|s| s.1).max().unwrap_or(0);
    let from_samples = profile.samples.iter().map(|s| s.time).max().unwrap_or(0);
    let from_intervals = profile
        .intervals
        .iter()
        .map(|i| i.time.saturating_add(i.duration))
        .max()
        .unwrap_or(0);
    from_summary
        .max(from_spans)
        .max(from_samples)
        .max(from_intervals)
        .max(1)
}

/// One thread's time per column and state, and per column, state and function.
struct Columns {
    origin: u64,
    end: u64,
    time: Vec<[u64; ThreadState::COUNT]>,
    /// Per column and state, time per function (few entries: kept small).
    funcs: Vec<HashMap<(u8, StackIndex), u64>>,
    totals: [u64; ThreadState::COUNT],
}

impl Columns {
    fn new((origin, end): (u64, u64), cols: u32) -> Columns {
        let n = cols as usize;
        Columns {
            origin,
            end,
            time: vec![[0u64; ThreadState::COUNT]; n],
            funcs: vec![HashMap::new(); n],
            totals: [0u64; ThreadState::COUNT],
        }
    }

    fn col_of(&self, t: u64) -> usize {
        let (n, span) = (self.time.len(), u128::from(self.end - self.origin));
        ((u128::from(t.saturating_sub(self.origin)) * n as u128 / span) as usize).min(n - 1)
    }

    fn col_start(&self, c: usize) -> u64 {
        let (n, span) = (self.time.len(), u128::from(self.end - self.origin));
        self.origin + (c as u128 * span / n as u128) as u64
    }

    /// Spreads [a, b) of `state` (running function `f`) over the columns it covers.
    fn add(&mut self, a: u64, b: u64, state: ThreadState, f: Option<StackIndex>) {
        let (a, b) = (a.max(self.origin), b.min(self.end));
        if b <= a {
            return;
        }
        self.totals[state as usize] = self.totals[state as usize].saturating_add(b - a);
        let (c0, c1) = (self.col_of(a), self.col_of(b.saturating_sub(1)));
        for c in c0..=c1 {
            let lo = a.max(self.col_start(c));
            let hi = b.min(self.col_start(c + 1));
            if hi > lo {
                let t = &mut self.time[c][state as usize];
                *t = t.saturating_add(hi - lo);
                if let Some(f) = f {
                    let t = self.funcs[c].entry((state as u8, f)).or_default();
                    *t = t.saturating_add(hi - lo);
                }
            }
        }
    }

    /// Runs of columns of the same mix of states, each with its main state and the
    /// function with the most time in it.
    fn runs(&self) -> Vec<Run> {
        let mut runs: Vec<Run> = Vec::new();
        for (c, col) in self.time.iter().enumerate() {
            let mix = proportions(col);
            let Some(&(state, _)) = mix.iter().max_by_key(|(s, u)| (*u, col[*s as usize])) else {
                continue;
            };
            match runs.last_mut() {
                Some(r) if r.mix == mix && r.end == c as u32 => {
                    r.end += 1;
                    for (t, v) in r.times.iter_mut().zip(col) {
                        *t = t.saturating_add(*v);
                    }
                }
                _ => runs.push(Run {
                    state,
                    first: c as u32,
                    end: c as u32 + 1,
                    times: *col,
                    mix,
                    stack: None,
                }),
            }
        }
        for r in &mut runs {
            // The main state over the whole run.
            if let Some(s) = ThreadState::ALL
                .into_iter()
                .max_by_key(|s| r.times[*s as usize])
            {
                r.state = s;
            }
            r.stack = self.main_function(r);
        }
        runs
    }

    /// A run's function: the one with the most time in the run's state.
    fn main_function(&self, r: &Run) -> Option<StackIndex> {
        let mut acc: HashMap<StackIndex, u64> = HashMap::new();
        for c in r.first..r.end {
            for (&(st, f), &w) in &self.funcs[c as usize] {
                if st == r.state as u8 {
                    let t = acc.entry(f).or_default();
                    *t = t.saturating_add(w);
                }
            }
        }
        acc.into_iter()
            .max_by_key(|&(f, w)| (w, std::cmp::Reverse(f)))
            .map(|(f, _)| f)
    }
}

/// Accumulates one thread's time per column and state, then merges columns into runs.
fn row(
    profile: &Profile,
    thread: ThreadIndex,
    window: (u64, u64),
    cols: u32,
    intervals: &[Vec<usize>],
    samples: &[Vec<usize>],
) -> Row {
    let mut c = Columns::new(window, cols);
    let samples = &samples[thread.index()];
    if profile.is_wall_time() {
        let life = (profile.spans.get(thread.index()))
            .copied()
            .unwrap_or((0, window.1));
        add_wall(&mut c, profile, life, &intervals[thread.index()], samples);
    } else {
        for &i in samples {
            let s = profile.samples[i];
            let a = s.time.saturating_sub(s.weight);
            let b = s.time.max(a.saturating_add(1));
            c.add(a, b, ThreadState::Running, Some(s.stack));
        }
    }
    Row {
        thread,
        runs: c.runs(),
        totals: c.totals,
    }
}

/// A wall-time thread's time over its life `(born, died)`: its off-CPU intervals,
/// and running in between, its function from the CPU sample nearest after each
/// point.
fn add_wall(
    c: &mut Columns,
    profile: &Profile,
    (born, died): (u64, u64),
    intervals: &[usize],
    samples: &[usize],
) {
    let sample_times: Vec<(u64, Option<StackIndex>)> = samples
        .iter()
        .map(|&i| (profile.samples[i].time, Some(profile.samples[i].stack)))
        .collect();
    let fn_at = |t: u64| {
        let k = sample_times.partition_point(|(st, _)| *st < t);
        sample_times.get(k).and_then(|s| s.1)
    };
    let mut at = born;
    for &i in intervals {
        let iv = profile.intervals[i];
        let (a, b) = (
            iv.time.max(born),
            iv.time.saturating_add(iv.duration).min(died.max(born)),
        );
        if a > at {
            c.add(at, a, ThreadState::Running, fn_at(at));
        }
        c.add(a.max(at), b, iv.state, iv.stack);
        at = at.max(b);
    }
    if died > at {
        c.add(at, died, ThreadState::Running, fn_at(at));
    }
}

/// Each state's share of a column's time in [`UNITS`] (largest remainders, so they
/// add up to `UNITS`), in display order, states with no time left out; a state with
/// any time gets at least one unit.
fn proportions(col: &[u64; ThreadState::COUNT]) -> Vec<(ThreadState, u32)> {
    let total: u128 = col.iter().map(|&v| u128::from(v)).sum();
    if total == 0 {
        return Vec::new();
    }
    let mut parts: Vec<(ThreadState, u32, u128)> = ThreadState::ALL
        .into_iter()
        .filter(|s| col[*s as usize] > 0)
        .map(|s| {
            let exact = u128::from(col[s as usize]) * u128::from(UNITS);
            let whole = ((exact / total) as u32).max(1);
            (s, whole, exact % total)
        })
        .collect();
    let mut sum: u32 = parts.iter().map(|p| p.1).sum();
    while sum < UNITS {
        if let Some(p) = parts.iter_mut().max_by_key(|p| p.2) {
            p.1 += 1;
            p.2 = 0;
        }
        sum += 1;
    }
    while sum > UNITS {
        if let Some(p) = parts.iter_mut().filter(|p| p.1 > 1).max_by_key(|p| p.1) {
            p.1 -= 1;
        }
        sum -= 1;
    }
    parts.into_iter().map(|(s, u, _)| (s, u)).collect()
}

/// The innermost user-space functions of a stack, innermost first, at most three
/// and inlined ones left out (`__GI___libc_read ← read_pipe ← piper`): where the
/// thread was running or where it blocked, and who called it. Kernel frames when
/// there is no user frame.
fn where_in(profile: &Profile, stack: StackIndex) -> String {
    let Some(funcs) = profile.stacks.get(stack.index()) else {
        return String::new();
    };
    let is = |f: FunctionIndex, k: &[FrameClass]| k.contains(&profile.function(f).class);
    let real: Vec<FunctionIndex> = funcs
        .iter()
        .rev()
        .copied()
        .filter(|&f| !matches!(profile.function(f).class, FrameClass::OffCpu(_)))
        .collect();
    // Inlined frames are left out: they repeat what the compiled function says.
    let user: Vec<FunctionIndex> = real
        .iter()
        .copied()
        .filter(|&f| {
            !is(
                f,
                &[FrameClass::Kernel, FrameClass::Marker, FrameClass::Inlined],
            )
        })
        .collect();
    let chosen = if user.is_empty() { real } else { user };
    let mut names: Vec<&str> = Vec::new();
    for f in chosen {
        let name = profile.function(f).name.as_str();
        if names.last() != Some(&name) {
            names.push(name);
        }
        if names.len() == 3 {
            break;
        }
    }
    names.join(" ← ")
}

mod svg;
#[cfg(test)]
mod tests;
