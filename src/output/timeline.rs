//! The thread timeline: an SVG with one row per thread (name and tid), time across,
//! each stretch coloured by what the thread was doing.
//!
//! In an off-CPU recording every nanosecond of a thread's life is accounted for:
//! its off-CPU intervals carry their state, and the time between them is running.
//! In a CPU-only recording the rows show where the CPU samples fell (running) and
//! leave the rest blank. Each row is cut into pixel columns; a column takes the
//! state that held most of its time, and runs of columns in one state become one
//! rectangle whose hover title says the state, how long, and the function at the
//! top of the stack that held most of that time (for an off-CPU stretch the
//! innermost user function where the thread blocked). So the file's size follows
//! the number of state changes a reader can see, not the number of context
//! switches, and when even that is large (thousands of threads switching in every
//! column) the column count is halved until the file fits its budget.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use super::state_colour;
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
}

impl Default for TimelineOptions {
    fn default() -> Self {
        TimelineOptions {
            width: 1200,
            max_rects: 40_000,
            title: None,
            time: TimeRange::default(),
        }
    }
}

const LABEL_W: f64 = 260.0;
const ROW_H: f64 = 16.0;
const TOP: f64 = 70.0;

/// One run of columns in one state.
struct Run {
    state: ThreadState,
    first: u32,
    /// One past the last column.
    end: u32,
    time: u64,
    /// The stack that held most of the run's time.
    stack: Option<StackIndex>,
}

/// What a row holds: runs, and the thread's time per state.
struct Row {
    thread: ThreadIndex,
    runs: Vec<Run>,
    totals: [u64; 6],
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
        let rects: usize = rows.iter().map(|r| r.runs.len()).sum();
        if rects <= opts.max_rects || cols <= 50 {
            break rows;
        }
        cols /= 2;
    };
    let mut svg = String::with_capacity(1 << 16);
    render(profile, opts, window, cols, &rows, &mut svg);
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

/// Accumulates one thread's time per column and state, then merges columns into runs.
fn row(
    profile: &Profile,
    thread: ThreadIndex,
    (origin, end): (u64, u64),
    cols: u32,
    intervals: &[Vec<usize>],
    samples: &[Vec<usize>],
) -> Row {
    let n = cols as usize;
    let mut time = vec![[0u64; 6]; n];
    // Per column and state, time per function (few entries: kept small).
    let mut funcs: Vec<HashMap<(u8, StackIndex), u64>> = vec![HashMap::new(); n];
    let mut totals = [0u64; 6];
    let span = u128::from(end - origin);
    let col_of =
        |t: u64| ((u128::from(t.saturating_sub(origin)) * n as u128 / span) as usize).min(n - 1);
    let col_start = |c: usize| origin + (c as u128 * span / n as u128) as u64;
    // Spreads [a, b) of `state` over the columns it covers.
    let mut add = |a: u64, b: u64, state: ThreadState, f: Option<StackIndex>| {
        let (a, b) = (a.max(origin), b.min(end));
        if b <= a {
            return;
        }
        totals[state as usize] = totals[state as usize].saturating_add(b - a);
        let (c0, c1) = (col_of(a), col_of(b.saturating_sub(1)));
        for c in c0..=c1 {
            let lo = a.max(col_start(c));
            let hi = b.min(col_start(c + 1));
            if hi > lo {
                let t = &mut time[c][state as usize];
                *t = t.saturating_add(hi - lo);
                if let Some(f) = f {
                    let t = funcs[c].entry((state as u8, f)).or_default();
                    *t = t.saturating_add(hi - lo);
                }
            }
        }
    };
    let wall = profile.is_wall_time();
    let (born, died) = profile
        .spans
        .get(thread.index())
        .copied()
        .unwrap_or((0, end));
    // Running functions, from the CPU samples.
    let running_fn = |i: usize| Some(profile.samples[i].stack);
    if wall {
        // Running is the complement of the off-CPU intervals within the thread's life;
        // its function comes from the CPU sample nearest after each point.
        let sample_times: Vec<(u64, Option<StackIndex>)> = samples[thread.index()]
            .iter()
            .map(|&i| (profile.samples[i].time, running_fn(i)))
            .collect();
        let fn_at = |t: u64| {
            let k = sample_times.partition_point(|(st, _)| *st < t);
            sample_times.get(k).and_then(|s| s.1)
        };
        let mut at = born;
        for &i in &intervals[thread.index()] {
            let iv = profile.intervals[i];
            let (a, b) = (
                iv.time.max(born),
                iv.time.saturating_add(iv.duration).min(died.max(born)),
            );
            if a > at {
                add(at, a, ThreadState::Running, fn_at(at));
            }
            let f = iv.stack;
            add(a.max(at), b, iv.state, f);
            at = at.max(b);
        }
        if died > at {
            add(at, died, ThreadState::Running, fn_at(at));
        }
    } else {
        for &i in &samples[thread.index()] {
            let s = profile.samples[i];
            let a = s.time.saturating_sub(s.weight);
            add(
                a,
                s.time.max(a.saturating_add(1)),
                ThreadState::Running,
                running_fn(i),
            );
        }
    }
    let mut runs: Vec<Run> = Vec::new();
    for (c, col) in time.iter().enumerate() {
        let Some(state) = ThreadState::ALL
            .into_iter()
            .filter(|s| col[*s as usize] > 0)
            .max_by_key(|s| col[*s as usize])
        else {
            continue;
        };
        match runs.last_mut() {
            Some(r) if r.state == state && r.end == c as u32 => {
                r.end += 1;
                r.time = r.time.saturating_add(col[state as usize]);
            }
            _ => runs.push(Run {
                state,
                first: c as u32,
                end: c as u32 + 1,
                time: col[state as usize],
                stack: None,
            }),
        }
    }
    // Each run's function: the one with the most time in the run's state.
    for r in &mut runs {
        let mut acc: HashMap<StackIndex, u64> = HashMap::new();
        for c in r.first..r.end {
            for (&(st, f), &w) in &funcs[c as usize] {
                if st == r.state as u8 {
                    let t = acc.entry(f).or_default();
                    *t = t.saturating_add(w);
                }
            }
        }
        r.stack = acc
            .into_iter()
            .max_by_key(|&(f, w)| (w, std::cmp::Reverse(f)))
            .map(|(f, _)| f);
    }
    Row {
        thread,
        runs,
        totals,
    }
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

fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            c if (c as u32) < 0x20 => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

fn hex((r, g, b): (u8, u8, u8)) -> String {
    format!("#{r:02x}{g:02x}{b:02x}")
}

fn render(
    profile: &Profile,
    opts: &TimelineOptions,
    (origin, end): (u64, u64),
    cols: u32,
    rows: &[Row],
    svg: &mut String,
) {
    let plot_w = f64::from(opts.width.max(10));
    let col_w = plot_w / f64::from(cols);
    let width = LABEL_W + plot_w + 20.0;
    let height = TOP + ROW_H * rows.len() as f64 + 40.0;
    let title = opts
        .title
        .clone()
        .unwrap_or_else(|| super::flamegraph::title(profile));
    let wall = profile.is_wall_time();
    let _ = writeln!(
        svg,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="Verdana, sans-serif" font-size="11">"#
    );
    svg.push_str("<style>");
    for s in ThreadState::ALL {
        let _ = write!(svg, ".s{}{{fill:{}}}", s as u8, hex(state_colour(s)));
    }
    svg.push_str("text.l{dominant-baseline:middle}</style>\n");
    let _ = writeln!(
        svg,
        r##"<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>
<text x="{}" y="20" font-size="15" text-anchor="middle">{}</text>"##,
        width / 2.0,
        esc(&title)
    );
    let window = if opts.time == TimeRange::default() {
        String::new()
    } else {
        format!(
            " ({:.3} s to {:.3} s)",
            origin as f64 / 1e9,
            end as f64 / 1e9
        )
    };
    let sub = format!(
        "{} threads · {:.2} s{window}{}",
        rows.len(),
        (end - origin) as f64 / 1e9,
        if wall {
            " · every thread's wall time by state"
        } else {
            " · CPU samples only (record --off-cpu for the states)"
        }
    );
    let _ = writeln!(
        svg,
        r##"<text x="{}" y="36" text-anchor="middle" fill="#555555">{}</text>"##,
        width / 2.0,
        esc(&sub)
    );
    // Legend: the states the recording can hold.
    let states: &[ThreadState] = if wall {
        &ThreadState::ALL
    } else {
        &[ThreadState::Running]
    };
    let mut x = LABEL_W;
    let _ = writeln!(svg, r#"<g class="legend">"#);
    for &s in states {
        let _ = writeln!(
            svg,
            r#"<rect class="s{}" x="{x}" y="44" width="12" height="12"/><text x="{}" y="54">{}</text>"#,
            s as u8,
            x + 16.0,
            s.name()
        );
        x += 24.0 + 7.0 * s.name().len() as f64 + 16.0;
    }
    svg.push_str("</g>\n");
    // Time axis: about ten ticks at round seconds. Counted, not stepped until past
    // the end: near u64::MAX (times a file can claim) a step would wrap and the loop
    // write ticks for ever.
    let step = tick_step(end - origin);
    let first = origin.div_ceil(step).checked_mul(step);
    let (first, ticks) = match first {
        Some(first) if first <= end => (first, (end - first) / step + 1),
        _ => (0, 0),
    };
    let axis_y = TOP + ROW_H * rows.len() as f64 + 4.0;
    svg.push_str(r##"<g class="axis" fill="#555555">"##);
    for k in 0..ticks {
        let t = first + k * step;
        let xx = LABEL_W + (t - origin) as f64 / (end - origin) as f64 * plot_w;
        let _ = write!(
            svg,
            r##"<line x1="{xx:.1}" y1="{TOP}" x2="{xx:.1}" y2="{axis_y}" stroke="#dddddd"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            axis_y + 14.0,
            fmt_secs(t, step)
        );
    }
    svg.push_str("</g>\n");
    for (i, r) in rows.iter().enumerate() {
        let th = profile.thread(r.thread);
        let y = TOP + ROW_H * i as f64;
        let life: u64 = r.totals.iter().sum();
        let mut summary = String::new();
        for s in ThreadState::ALL {
            let v = r.totals[s as usize];
            if v > 0 {
                let _ = write!(
                    summary,
                    "\n{}: {} ({:.1}%)",
                    s.name(),
                    super::top::human_time(v),
                    v as f64 * 100.0 / life.max(1) as f64
                );
            }
        }
        let _ = writeln!(
            svg,
            r#"<g class="row" data-tid="{}"><title>{} (tid {}, pid {}){}</title><text class="l" x="{}" y="{}" text-anchor="end">{} {}</text>"#,
            th.tid,
            esc(&th.name),
            th.tid,
            th.pid,
            esc(&summary),
            LABEL_W - 6.0,
            y + ROW_H / 2.0,
            esc(&th.name),
            th.tid
        );
        for run in &r.runs {
            let f = run
                .stack
                .map(|st| where_in(profile, st))
                .unwrap_or_default();
            let _ = writeln!(
                svg,
                r#"<rect class="s{}" x="{:.2}" y="{}" width="{:.2}" height="{}"><title>{}: {}{}{}</title></rect>"#,
                run.state as u8,
                LABEL_W + f64::from(run.first) * col_w,
                y + 1.0,
                f64::from(run.end - run.first) * col_w,
                ROW_H - 2.0,
                run.state.name(),
                super::top::human_time(run.time),
                if f.is_empty() { "" } else { " in " },
                esc(&f)
            );
        }
        svg.push_str("</g>\n");
    }
    svg.push_str("</svg>\n");
}

/// A tick spacing giving about ten ticks: 1, 2 or 5 times a power of ten ns.
fn tick_step(end: u64) -> u64 {
    let target = (end / 10).max(1);
    let mut p = 1u64;
    loop {
        for m in [1, 2, 5] {
            if p * m >= target {
                return p * m;
            }
        }
        p *= 10;
    }
}

fn fmt_secs(t: u64, step: u64) -> String {
    let digits = if step >= 1_000_000_000 {
        0
    } else if step >= 100_000_000 {
        1
    } else if step >= 10_000_000 {
        2
    } else {
        3
    };
    format!("{:.*} s", digits, t as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Function, Interval, ProfileSample, Thread};

    /// One thread, one function, a sample at 1 ms and `samples`/`intervals` more.
    fn profile(wall: bool, samples: &[(u64, u64)], intervals: &[(u64, u64)]) -> Profile {
        let mut p = Profile {
            functions: vec![Function {
                name: "f".into(),
                class: FrameClass::Native,
                file: None,
                line: None,
            }],
            stacks: vec![vec![FunctionIndex(0)]],
            threads: vec![Thread {
                pid: 1,
                tid: 1,
                name: "t".into(),
                process: "t".into(),
                group: None,
                service: None,
            }],
            ..Profile::default()
        };
        p.meta.off_cpu = wall;
        for &(time, weight) in [(1_000_000, 1_000_000)].iter().chain(samples) {
            p.samples.push(ProfileSample {
                time,
                thread: ThreadIndex(0),
                weight,
                stack: StackIndex(0),
                state: ThreadState::Running,
            });
        }
        for &(time, duration) in intervals {
            p.intervals.push(Interval {
                thread: ThreadIndex(0),
                time,
                duration,
                state: ThreadState::Sleep,
                stack: None,
            });
        }
        p
    }

    fn draw(p: &Profile) -> String {
        let mut out = Vec::new();
        write(p, &TimelineOptions::default(), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Fuzzing (issue 14): a sample time near u64::MAX, one changed byte in a
    /// recording, made the axis loop step past u64::MAX and wrap, writing ticks until
    /// a wrap happened to land past the end: 361 MB of SVG from a 2.4 KB file in
    /// release builds, an overflow panic in debug ones. The axis has about ten ticks
    /// whatever the times.
    #[test]
    fn times_near_u64_max_give_a_ten_tick_axis() {
        for p in [
            profile(false, &[(u64::MAX - 5, 3_344_481), (u64::MAX, 0)], &[]),
            profile(true, &[], &[(u64::MAX - 10, 1_000), (5, u64::MAX)]),
            profile(false, &[(18_446_737_943_050_000_000, 3_344_481)], &[]),
        ] {
            let svg = draw(&p);
            let ticks = svg.matches("<line ").count();
            assert!((1..=12).contains(&ticks), "{ticks} ticks");
            assert!(svg.len() < 16_384, "{} bytes", svg.len());
        }
    }

    /// An ordinary recording keeps its round-second ticks: 0 s to 2 s.
    #[test]
    fn a_two_second_recording_has_ticks_every_200_ms() {
        let svg = draw(&profile(false, &[(2_000_000_000, 1_000_000)], &[]));
        assert_eq!(svg.matches("<line ").count(), 11);
        assert!(svg.contains(">0.0 s</text>"), "{svg}");
        assert!(svg.contains(">0.2 s</text>"), "{svg}");
        assert!(svg.contains(">2.0 s</text>"), "{svg}");
    }
}
