//! `profile top`: the functions and threads with the most time over a sliding window of
//! a live recording, as text lines sized to a terminal. Pure: the command feeds it
//! the recorder's windows ([`crate::record::Window`]'s recordings) and draws the lines.

pub mod keys;
mod processes;

pub use processes::Lineage;

use std::collections::{HashMap, HashSet, VecDeque};

use crate::format::{Recording, ThreadEvent, ThreadState};
use crate::output::top::{human_time, rows};
use crate::profile::{Profile, ProfileOptions};

/// What one window of the recording held, aggregated by function name and thread.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WindowStats {
    /// Wall nanoseconds the window lasted.
    pub duration_ns: u64,
    /// Per function name: self and total time, total time by state.
    pub functions: HashMap<String, FunctionStats>,
    /// Per thread (by tid).
    pub threads: HashMap<u32, ThreadStats>,
    /// Time by state over all threads (indexed by [`ThreadState`] code).
    pub states: [u64; ThreadState::COUNT],
    /// Samples the kernel dropped in the window.
    pub lost: u64,
    /// CPU time no sample stands for (`[unsampled]`): part of the running time, in
    /// no function's row.
    pub unsampled_ns: u64,
    /// The processes started in the window: (pid, parent's pid).
    pub starts: Vec<(u32, u32)>,
}

/// One function's time in a window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FunctionStats {
    /// Nanoseconds with the function at the top of the stack.
    pub self_ns: u64,
    /// Nanoseconds with the function anywhere on the stack.
    pub total_ns: u64,
}

/// One thread's time in a window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThreadStats {
    /// Process id.
    pub pid: u32,
    /// The thread's name.
    pub name: String,
    /// Its process's name.
    pub process: String,
    /// A runtime's own thread (a JVM's GC, JIT compiler, housekeeping): its group.
    pub group: Option<crate::profile::vm_threads::ThreadGroup>,
    /// Time by state (indexed by [`ThreadState`] code).
    pub states: [u64; ThreadState::COUNT],
    /// On-CPU nanoseconds by leaf function.
    pub leaves: HashMap<String, u64>,
}

impl WindowStats {
    /// Aggregates one window's recording; with `runtime_only`, in the runtimes' view
    /// ([`crate::profile::filter::Filter::runtime_only`]).
    pub fn from_recording(rec: &Recording, runtime_only: bool) -> WindowStats {
        let mut profile = Profile::from_recording(rec, ProfileOptions::default());
        if runtime_only {
            let f = crate::profile::filter::Filter {
                runtime_only: true,
                ..Default::default()
            };
            // A filter of no names or patterns cannot fail.
            if let Ok(view) = profile.filter(&f) {
                profile = view;
            }
        }
        let mut w = WindowStats {
            duration_ns: rec
                .summary
                .as_ref()
                .map_or(0, |s| s.end_time_ns.saturating_sub(rec.meta.start_time_ns)),
            lost: rec.lost,
            unsampled_ns: profile.coverage().unsampled_ns,
            starts: rec
                .thread_events
                .iter()
                .filter_map(|e| match *e {
                    ThreadEvent::Start { pid, ppid, tid, .. } if pid == tid => Some((pid, ppid)),
                    _ => None,
                })
                .collect(),
            ..WindowStats::default()
        };
        for r in rows(&profile) {
            let name = profile.function(r.function).name.clone();
            let f = w.functions.entry(name).or_default();
            f.self_ns += r.self_weight;
            f.total_ns += r.total_weight;
        }
        for s in &profile.samples {
            let t = profile.thread(s.thread);
            let ts = w.threads.entry(t.tid).or_insert_with(|| ThreadStats {
                pid: t.pid,
                name: t.name.clone(),
                process: t.process.clone(),
                group: t.group,
                ..ThreadStats::default()
            });
            let state = s.state as usize;
            ts.states[state] = ts.states[state].saturating_add(s.weight);
            w.states[state] = w.states[state].saturating_add(s.weight);
            if s.state == ThreadState::Running
                && !profile.is_unsampled(s.stack)
                && let Some(&leaf) = profile.stack(s.stack).last()
            {
                *ts.leaves
                    .entry(profile.function(leaf).name.clone())
                    .or_default() += s.weight;
            }
        }
        w
    }
}

/// How the function rows are sorted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    /// By self time.
    SelfTime,
    /// By total time.
    Total,
}

/// Which table is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// Functions.
    Functions,
    /// Threads, with their hottest function.
    Threads,
    /// Processes, each under the one that started it, with their hottest function.
    Processes,
}

impl View {
    /// The next view `t` shows.
    pub fn next(self) -> View {
        match self {
            View::Functions => View::Threads,
            View::Threads => View::Processes,
            View::Processes => View::Functions,
        }
    }
}

/// The sliding window: the last `keep` windows.
#[derive(Debug, Clone)]
pub struct Top {
    windows: VecDeque<WindowStats>,
    keep: usize,
    /// Samples lost since the start.
    pub lost_total: u64,
    /// Windows seen since the start.
    pub windows_seen: u64,
    /// Who started each process of the window (the processes view's tree).
    lineage: Lineage,
}

impl Top {
    /// A view over the last `keep` windows (at least one).
    pub fn new(keep: usize) -> Top {
        Top {
            windows: VecDeque::new(),
            keep: keep.max(1),
            lost_total: 0,
            windows_seen: 0,
            lineage: Lineage::default(),
        }
    }

    /// Adds a window, forgetting the oldest beyond `keep`.
    pub fn push(&mut self, w: WindowStats) {
        self.lost_total += w.lost;
        self.windows_seen += 1;
        self.lineage.learn(&w);
        self.windows.push_back(w);
        while self.windows.len() > self.keep {
            self.windows.pop_front();
        }
        let pids: HashSet<u32> = (self.windows.iter())
            .flat_map(|w| w.threads.values().map(|t| t.pid))
            .collect();
        self.lineage.prune(&pids);
    }

    /// The sliding window's totals, as one window.
    pub fn merged(&self) -> WindowStats {
        let mut m = WindowStats::default();
        for w in &self.windows {
            m.duration_ns += w.duration_ns;
            m.lost += w.lost;
            m.unsampled_ns = m.unsampled_ns.saturating_add(w.unsampled_ns);
            for (s, v) in m.states.iter_mut().zip(w.states) {
                *s += v;
            }
            for (name, f) in &w.functions {
                let e = m.functions.entry(name.clone()).or_default();
                e.self_ns += f.self_ns;
                e.total_ns += f.total_ns;
            }
            for (tid, t) in &w.threads {
                let e = m.threads.entry(*tid).or_insert_with(|| ThreadStats {
                    pid: t.pid,
                    ..ThreadStats::default()
                });
                // The latest name wins (threads rename themselves).
                e.name.clone_from(&t.name);
                e.process.clone_from(&t.process);
                e.group = t.group;
                for (s, v) in e.states.iter_mut().zip(t.states) {
                    *s += v;
                }
                for (leaf, v) in &t.leaves {
                    *e.leaves.entry(leaf.clone()).or_default() += v;
                }
            }
        }
        m
    }
}

/// What the screen shows besides the table.
#[derive(Debug, Clone, Default)]
pub struct Header {
    /// What is profiled (`pid 4242 (app)`).
    pub target: String,
    /// Whether the display is paused.
    pub paused: bool,
    /// Whether off-CPU time is recorded (states shown).
    pub off_cpu: bool,
    /// The key help line is shown (a terminal), not in plain mode.
    pub keys: bool,
    /// Processes the attached ones started before attach and `top` does not watch
    /// (without `--children=all`): named in a note while the attached ones idle.
    pub unwatched: Vec<(u32, String)>,
}

/// Below this width the function table drops its time columns.
const NARROW: usize = 60;

/// The lines to show, at most `height` of them, none wider than `width` characters.
pub fn render(
    top: &Top,
    header: &Header,
    view: View,
    sort: Sort,
    width: usize,
    height: usize,
) -> Vec<String> {
    let m = top.merged();
    let wall = m.duration_ns.max(1);
    let cpu_ns = m.states[ThreadState::Running as usize];
    let mut lines = Vec::new();
    lines.push(format!(
        "profile top: {}  CPU {:.0}%  {} thread{}  lost {}  last {:.1} s{}",
        header.target,
        cpu_ns as f64 * 100.0 / wall as f64,
        m.threads.len(),
        if m.threads.len() == 1 { "" } else { "s" },
        top.lost_total,
        m.duration_ns as f64 / 1e9,
        if header.paused { "  [paused]" } else { "" },
    ));
    // Several processes (-a, or -p A,B): which one uses the most CPU.
    let mut by_process: HashMap<u32, (u64, &str)> = HashMap::new();
    for t in m.threads.values() {
        let e = by_process.entry(t.pid).or_insert((0, &t.process));
        e.0 += t.states[ThreadState::Running as usize];
    }
    if by_process.len() > 1
        && let Some((pid, (ns, name))) = by_process
            .iter()
            .max_by(|a, b| a.1.0.cmp(&b.1.0).then(b.0.cmp(a.0)))
    {
        lines.push(format!(
            "{}; busiest: {name} (pid {pid}) CPU {:.0}%",
            crate::output::plural(by_process.len(), "process", "processes"),
            *ns as f64 * 100.0 / wall as f64
        ));
    }
    if !header.unwatched.is_empty() {
        let attached: u64 = (m.threads.values())
            .filter(|t| top.lineage.is_attached(t.pid))
            .map(|t| t.states[ThreadState::Running as usize])
            .sum();
        // Idle: under 5% of one CPU.
        if attached * 20 < wall {
            lines.push(format!(
                "note: the target is idle; {} it started before attach ({}) not watched: pass --children=all",
                crate::output::plural(header.unwatched.len(), "process", "processes"),
                crate::text::by_name(&header.unwatched)
            ));
        }
    }
    if m.unsampled_ns > 0 {
        lines.push(format!(
            "uncovered CPU {:.1}% ({}): [unsampled], threads running less than a sample period at a time",
            m.unsampled_ns as f64 * 100.0 / cpu_ns.max(1) as f64,
            human_time(m.unsampled_ns)
        ));
    }
    if header.off_cpu {
        let all: u64 = m.states.iter().sum::<u64>().max(1);
        let parts: Vec<String> = ThreadState::ALL
            .iter()
            .filter(|s| m.states[**s as usize] > 0)
            .map(|s| {
                format!(
                    "{} {:.0}%",
                    s.name(),
                    m.states[*s as usize] as f64 * 100.0 / all as f64
                )
            })
            .collect();
        lines.push(format!("time by state: {}", parts.join("  ")));
    }
    lines.push(String::new());
    // Percentages of CPU time, or of all time when off-CPU time is recorded.
    let base = if header.off_cpu {
        m.states.iter().sum::<u64>()
    } else {
        cpu_ns
    }
    .max(1);
    let pct = |ns: u64| ns as f64 * 100.0 / base as f64;
    let footer = usize::from(header.keys);
    let room = height.saturating_sub(lines.len() + 1 + footer);
    match view {
        View::Functions => {
            let mark = |s: Sort, name: &str| {
                if s == sort {
                    format!("{name}*")
                } else {
                    name.to_owned()
                }
            };
            // A narrow terminal keeps the shares and the names, not the times.
            let narrow = width < NARROW;
            lines.push(if narrow {
                format!(
                    "{:>6} {:>7}  FUNCTION",
                    mark(Sort::SelfTime, "SELF%"),
                    mark(Sort::Total, "TOTAL%")
                )
            } else {
                format!(
                    "{:>6} {:>9} {:>7} {:>9}  FUNCTION",
                    mark(Sort::SelfTime, "SELF%"),
                    "SELF",
                    mark(Sort::Total, "TOTAL%"),
                    "TOTAL"
                )
            });
            let mut fns: Vec<(&String, &FunctionStats)> = m.functions.iter().collect();
            fns.sort_by(|a, b| {
                let key = |f: &FunctionStats| match sort {
                    Sort::SelfTime => (f.self_ns, f.total_ns),
                    Sort::Total => (f.total_ns, f.self_ns),
                };
                key(b.1).cmp(&key(a.1)).then_with(|| a.0.cmp(b.0))
            });
            for (name, f) in fns.into_iter().take(room) {
                lines.push(if narrow {
                    format!(
                        "{:>5.1}% {:>6.1}%  {}",
                        pct(f.self_ns),
                        pct(f.total_ns),
                        name
                    )
                } else {
                    format!(
                        "{:>5.1}% {:>9} {:>6.1}% {:>9}  {}",
                        pct(f.self_ns),
                        human_time(f.self_ns),
                        pct(f.total_ns),
                        human_time(f.total_ns),
                        name
                    )
                });
            }
        }
        View::Processes => {
            lines.extend(processes::lines(
                &m,
                &top.lineage,
                wall,
                header.off_cpu,
                room + 1,
            ));
        }
        View::Threads => {
            lines.push(format!(
                "{:>8} {:<16} {:>6} {:>9}  HOTTEST FUNCTION",
                "TID", "NAME", "CPU%", "CPU"
            ));
            let mut ts: Vec<(&u32, &ThreadStats)> = m.threads.iter().collect();
            let running = |t: &ThreadStats| t.states[ThreadState::Running as usize];
            ts.sort_by(|a, b| running(b.1).cmp(&running(a.1)).then(a.0.cmp(b.0)));
            let several = by_process.len() > 1;
            for (tid, t) in ts.into_iter().take(room) {
                let hottest = t
                    .leaves
                    .iter()
                    .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
                    .map(|(name, _)| name.as_str())
                    .unwrap_or(if header.off_cpu { "(off the CPU)" } else { "" });
                let hottest = match t.group {
                    Some(g) => format!("[{g}] {hottest}"),
                    None => hottest.to_owned(),
                };
                let cpu = running(t);
                let name = if several && t.process != t.name {
                    format!("{}/{}", t.process, t.name)
                } else {
                    t.name.clone()
                };
                lines.push(format!(
                    "{:>8} {:<16} {:>5.1}% {:>9}  {}",
                    tid,
                    truncate(&name, 16),
                    cpu as f64 * 100.0 / wall as f64,
                    human_time(cpu),
                    hottest
                ));
            }
        }
    }
    if header.keys {
        while lines.len() + 1 < height {
            lines.push(String::new());
        }
        lines.push(format!(
            "q quit  s sort by {}  t {}  p {}",
            if sort == Sort::SelfTime {
                "total"
            } else {
                "self"
            },
            match view.next() {
                View::Functions => "functions",
                View::Threads => "threads",
                View::Processes => "processes",
            },
            if header.paused { "resume" } else { "pause" },
        ));
    }
    lines.truncate(height);
    // Thread, process and function names are other users' text: every control
    // character escaped before the line is fitted to the terminal.
    lines
        .iter()
        .map(|l| truncate(&crate::text::terminal(l, usize::MAX), width))
        .collect()
}

/// `s` cut to `width` characters, the cut marked with `…`.
pub fn truncate(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_owned();
    }
    if width == 0 {
        return String::new();
    }
    let mut out: String = s.chars().take(width - 1).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests;
