//! `profile top`: the functions and threads with the most time over a sliding window of
//! a live recording, as text lines sized to a terminal. Pure: the command feeds it
//! the recorder's windows ([`crate::record::Window`]'s recordings) and draws the lines.

pub mod keys;
mod processes;
mod screen;

pub use processes::Lineage;
pub use screen::{Header, render};

use std::collections::{HashMap, HashSet, VecDeque};

use crate::format::{Recording, ThreadEvent, ThreadState};
use crate::output::top::rows;
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
