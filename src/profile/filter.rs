//! Filters every output shares, applied once to the model: which threads, which time
//! window, which samples by the frames on their stack, and where stacks start.
//!
//! Include and exclude work on whole samples, as in `perf report` and pprof: a sample
//! stays when any frame of its stack matches an include pattern and none matches an
//! exclude pattern; its stack is left as it was. Focus keeps only samples whose stack
//! holds the focused function and cuts each stack above the outermost such frame, so
//! the function becomes the root. The result is compacted: threads, functions,
//! locations and modules no kept sample uses are gone.

use std::collections::HashMap;
use std::str::FromStr;

use regex::Regex;

mod compact;
mod masks;

use super::{
    FrameClass, Interval, Location, LocationIndex, Profile, ProfileSample, StackIndex, ThreadState,
};

/// Which samples outputs see, and where their stacks start.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Filter {
    /// Keep only samples of threads with one of these names or tids. Default is
    /// empty: every thread.
    pub threads: Vec<String>,
    /// Keep only samples taken in this window. Default is the whole recording.
    pub time: TimeRange,
    /// Keep only samples with a frame whose name one of these matches (anywhere in the
    /// name). Default is empty: no such condition.
    pub include: Vec<Regex>,
    /// Drop samples with a frame whose name one of these matches. Default is empty.
    pub exclude: Vec<Regex>,
    /// Re-root stacks at the outermost frame of this function: its exact name, or
    /// when no function has that name, a regular expression matched anywhere in the
    /// name. Samples without it are dropped. Default is none.
    pub focus: Option<String>,
    /// Keep only samples in these states (`running` for CPU samples, the off-CPU
    /// states for off-CPU stacks). Default is empty: every state.
    pub states: Vec<ThreadState>,
    /// Leave out the threads idle for the whole recording ([`Profile::idle_threads`]).
    /// Default is false.
    pub hide_idle: bool,
    /// Keep only samples of processes of these services (`report --service`).
    /// Default is empty: every process.
    pub services: Vec<String>,
    /// Keep only samples of processes with one of these names (the main thread's) or
    /// pids (`report --process`). Default is empty: every process.
    pub processes: Vec<String>,
    /// The runtimes' view (`report --runtime-only`): in a stack with a runtime frame
    /// (Python, a JVM method, JIT code), the native frames before the first one stay
    /// and every native or kernel frame after it is folded into the runtime frame
    /// that called it. Stacks without one are kept whole. Default is false.
    pub runtime_only: bool,
}

impl Filter {
    /// True when the filter keeps everything as it is.
    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
            && self.time == TimeRange::default()
            && self.include.is_empty()
            && self.exclude.is_empty()
            && self.focus.is_none()
            && self.states.is_empty()
            && !self.hide_idle
            && self.services.is_empty()
            && self.processes.is_empty()
            && !self.runtime_only
    }

    /// A few words on what the filter keeps, for titles (empty when nothing).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.services.is_empty() {
            parts.push(format!("service {}", self.services.join(", ")));
        }
        if !self.processes.is_empty() {
            parts.push(format!("process {}", self.processes.join(", ")));
        }
        if !self.threads.is_empty() {
            parts.push(format!("thread {}", self.threads.join(", ")));
        }
        if self.time != TimeRange::default() {
            parts.push(format!("time {}", self.time));
        }
        for r in &self.include {
            parts.push(format!("include /{r}/"));
        }
        for r in &self.exclude {
            parts.push(format!("exclude /{r}/"));
        }
        if let Some(f) = &self.focus {
            parts.push(format!("focus {f}"));
        }
        if !self.states.is_empty() {
            let names: Vec<&str> = self.states.iter().map(|s| s.name()).collect();
            parts.push(format!("state {}", names.join(", ")));
        }
        if self.hide_idle {
            parts.push("idle threads left out".to_owned());
        }
        if self.runtime_only {
            parts.push("runtime frames only".to_owned());
        }
        parts.join(", ")
    }
}

/// A window of the recording, in nanoseconds from its start: `start <= t < end`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeRange {
    /// Default is none: from the start.
    pub start: Option<u64>,
    /// Default is none: to the end.
    pub end: Option<u64>,
}

impl TimeRange {
    /// Whether `t` (nanoseconds from the start) is inside the window.
    pub fn contains(&self, t: u64) -> bool {
        self.start.is_none_or(|s| t >= s) && self.end.is_none_or(|e| t < e)
    }
}

impl std::fmt::Display for TimeRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = |v: Option<u64>| v.map(|ns| format!("{}", ns as f64 / 1e9));
        write!(
            f,
            "{}..{} s",
            secs(self.start).unwrap_or_default(),
            secs(self.end).unwrap_or_default()
        )
    }
}

/// `START..END` in seconds from the start of the recording; either end may be left
/// out (`2..`, `..1.5`).
impl FromStr for TimeRange {
    type Err = FilterError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || FilterError::BadTimeRange(s.to_owned());
        let (a, b) = s.split_once("..").ok_or_else(bad)?;
        let secs = |v: &str| -> Result<Option<u64>, FilterError> {
            let v = v.trim();
            if v.is_empty() {
                return Ok(None);
            }
            let x: f64 = v.parse().map_err(|_| bad())?;
            if !(x >= 0.0 && x.is_finite()) {
                return Err(bad());
            }
            Ok(Some((x * 1e9).round() as u64))
        };
        let r = TimeRange {
            start: secs(a)?,
            end: secs(b)?,
        };
        if let (Some(a), Some(b)) = (r.start, r.end)
            && a >= b
        {
            return Err(bad());
        }
        Ok(r)
    }
}

/// Why a filter cannot be applied.
#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    #[error(
        "time window `{0}`: expected START..END in seconds from the start of the recording, START < END (e.g. 1.5..3, 2.., ..0.5)"
    )]
    /// A `--time` value that is not `START..END`.
    BadTimeRange(String),
    #[error("no thread is named `{0}` or has that tid; the recording has: {1}")]
    /// No thread has the name or tid; the second field lists those there are.
    NoSuchThread(String, String),
    #[error("no function is named `{0}`, and as a regular expression it matches none (`{1}`)")]
    /// No function has the name or matches it as a regular expression.
    NoSuchFunction(String, String),
    #[error("no process is named `{0}` or has that pid; the recording has: {1}")]
    /// No process has the name or pid; the second field lists those there are.
    NoSuchProcess(String, String),
    #[error("no process of the recording is in service {0}; it has: {1}")]
    /// No process belongs to the services; the second field lists those there are.
    NoSuchService(String, String),
    #[error(
        "the recording holds no workloads (services): it was made before profile recorded workloads, or is a perf.data file"
    )]
    /// `--service` on a recording without workloads.
    NoServices,
}

impl Profile {
    /// The profile as `filter` narrows it (a copy; `self` is untouched).
    pub fn filter(&self, filter: &Filter) -> Result<Profile, FilterError> {
        if filter.is_empty() {
            return Ok(self.clone());
        }
        let threads = self.kept_threads(filter)?;
        let matches = |res: &[Regex]| -> Vec<bool> {
            self.functions
                .iter()
                .map(|f| res.iter().any(|r| r.is_match(&f.name)))
                .collect()
        };
        let include = matches(&filter.include);
        let exclude = matches(&filter.exclude);
        let focus = match &filter.focus {
            Some(f) => Some(self.focus_mask(f)?),
            None => None,
        };
        let mut out = Profile {
            meta: self.meta.clone(),
            summary: self.summary.clone(),
            lost: self.lost,
            damage: self.damage.clone(),
            threads: self.threads.clone(),
            functions: self.functions.clone(),
            locations: self.locations.clone(),
            modules: self.modules.clone(),
            spans: self.spans.clone(),
            ..Profile::default()
        };
        let state_ok = |st: ThreadState| filter.states.is_empty() || filter.states.contains(&st);
        // Old stack -> new stack (None: dropped), decided once per stack.
        let mut kept: HashMap<StackIndex, Option<StackIndex>> = HashMap::new();
        let mut new_ids: HashMap<Vec<LocationIndex>, StackIndex> = HashMap::new();
        for s in &self.samples {
            if !threads[s.thread.index()] || !filter.time.contains(s.time) || !state_ok(s.state) {
                continue;
            }
            let stack = *kept.entry(s.stack).or_insert_with(|| {
                let funcs = self.stack(s.stack);
                let any = |m: &[bool]| funcs.iter().any(|&f| m[f.index()]);
                if (!filter.include.is_empty() && !any(&include)) || any(&exclude) {
                    return None;
                }
                let mut locs = match &focus {
                    Some(mask) => out.cut_at(self.stack_locations(s.stack), mask)?,
                    None => self.stack_locations(s.stack).to_vec(),
                };
                if filter.runtime_only {
                    self.runtime_frames(&mut locs);
                }
                Some(out.intern_stack(locs, &mut new_ids))
            });
            if let Some(stack) = stack {
                out.samples.push(ProfileSample { stack, ..*s });
            }
        }
        // Intervals (the timeline) follow the thread, time and state filters; their
        // stacks are kept as they were when the stack filters would drop them.
        for i in &self.intervals {
            let overlaps = filter.time.start.is_none_or(|a| i.time + i.duration > a)
                && filter.time.end.is_none_or(|e| i.time < e);
            if !threads[i.thread.index()] || !overlaps || !state_ok(i.state) {
                continue;
            }
            let stack = i.stack.map(|st| {
                let mut locs = self.stack_locations(st).to_vec();
                if filter.runtime_only {
                    self.runtime_frames(&mut locs);
                }
                out.intern_stack(locs, &mut new_ids)
            });
            out.intervals.push(Interval { stack, ..*i });
        }
        Ok(out.compact())
    }

    /// Which threads (indexed like `threads`) the filter keeps: by name or tid, not
    /// idle, by process and by service.
    fn kept_threads(&self, filter: &Filter) -> Result<Vec<bool>, FilterError> {
        let mut threads = self.thread_mask(&filter.threads)?;
        if filter.hide_idle {
            for (keep, idle) in threads.iter_mut().zip(self.idle_threads()) {
                *keep &= !idle;
            }
        }
        if !filter.processes.is_empty() {
            let processes = self.process_mask(&filter.processes)?;
            for (t, p) in threads.iter_mut().zip(processes) {
                *t &= p;
            }
        }
        if !filter.services.is_empty() {
            let services = self.service_mask(&filter.services)?;
            for (t, s) in threads.iter_mut().zip(services) {
                *t &= s;
            }
        }
        Ok(threads)
    }

    /// Which threads (indexed like `threads`) were idle for the whole recording: off
    /// the CPU at least 99.9% of their time in it, and at least 95% of it in one
    /// wait (wait, sleep, lock, io or other; not runnable). Only in off-CPU
    /// recordings: without them, every thread is kept.
    pub fn idle_threads(&self) -> Vec<bool> {
        if !self.is_wall_time() {
            return vec![false; self.threads.len()];
        }
        self.thread_states()
            .iter()
            .map(|s| {
                let total: u64 = s.iter().sum();
                let most = ThreadState::ALL
                    .into_iter()
                    .filter(|st| st.is_off_cpu() && *st != ThreadState::Runnable)
                    .map(|st| s[st as usize])
                    .max()
                    .unwrap_or(0);
                let running = s[ThreadState::Running as usize];
                total > 0
                    && u128::from(running) * 1000 <= u128::from(total)
                    && u128::from(most) * 100 >= u128::from(total) * 95
            })
            .collect()
    }

    /// A stack's locations (outermost first) as the runtimes' view shows them: from
    /// the first runtime location on, only runtime locations and markers (the
    /// `[off-cpu: STATE]` frame, a truncation) are kept.
    fn runtime_frames(&self, locs: &mut Vec<LocationIndex>) {
        let class = |l: &LocationIndex| {
            let loc = &self.locations[l.index()];
            loc.functions
                .first()
                .map(|f| self.functions[f.index()].class)
        };
        let runtime = |l: &LocationIndex| {
            matches!(
                class(l),
                Some(FrameClass::Python | FrameClass::Interpreted | FrameClass::Jit)
            )
        };
        let Some(first) = locs.iter().position(runtime) else {
            return;
        };
        let mut i = 0;
        locs.retain(|l| {
            let keep = i < first
                || runtime(l)
                || matches!(class(l), Some(FrameClass::Marker | FrameClass::OffCpu(_)));
            i += 1;
            keep
        });
    }

    fn focus_mask(&self, focus: &str) -> Result<Vec<bool>, FilterError> {
        let exact: Vec<bool> = self.functions.iter().map(|f| f.name == focus).collect();
        if exact.contains(&true) {
            return Ok(exact);
        }
        let re = Regex::new(focus)
            .map_err(|e| FilterError::NoSuchFunction(focus.to_owned(), e.to_string()))?;
        let mask: Vec<bool> = self
            .functions
            .iter()
            .map(|f| re.is_match(&f.name))
            .collect();
        if !mask.contains(&true) {
            return Err(FilterError::NoSuchFunction(
                focus.to_owned(),
                "no match".to_owned(),
            ));
        }
        Ok(mask)
    }

    /// The locations of a stack from its outermost frame in `mask` on, splitting a
    /// location when the frame is inlined inside it; None when no frame is.
    fn cut_at(&mut self, locs: &[LocationIndex], mask: &[bool]) -> Option<Vec<LocationIndex>> {
        for (i, &l) in locs.iter().enumerate() {
            let loc = self.location(l);
            let Some(k) = loc.functions.iter().position(|&f| mask[f.index()]) else {
                continue;
            };
            let mut out = Vec::with_capacity(locs.len() - i);
            if k == 0 {
                out.push(l);
            } else {
                let part = Location {
                    functions: loc.functions[k..].to_vec(),
                    lines: loc.lines.get(k..).map(<[_]>::to_vec).unwrap_or_default(),
                    ..loc.clone()
                };
                out.push(LocationIndex::next(self.locations.len()));
                self.locations.push(part);
            }
            out.extend_from_slice(&locs[i + 1..]);
            return Some(out);
        }
        None
    }

    fn intern_stack(
        &mut self,
        locs: Vec<LocationIndex>,
        ids: &mut HashMap<Vec<LocationIndex>, StackIndex>,
    ) -> StackIndex {
        if let Some(&id) = ids.get(&locs) {
            return id;
        }
        let id = StackIndex::next(self.stacks.len());
        self.stacks.push(
            locs.iter()
                .flat_map(|&l| self.location(l).functions.iter().copied())
                .collect(),
        );
        self.stack_locations.push(locs.clone());
        ids.insert(locs, id);
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_ranges_parse() {
        let r: TimeRange = "1.5..3".parse().unwrap();
        assert_eq!(r.start, Some(1_500_000_000));
        assert_eq!(r.end, Some(3_000_000_000));
        assert!(r.contains(1_500_000_000) && !r.contains(3_000_000_000));
        assert_eq!("2..".parse::<TimeRange>().unwrap().end, None);
        assert_eq!("..0.5".parse::<TimeRange>().unwrap().start, None);
        assert_eq!("..".parse::<TimeRange>().unwrap(), TimeRange::default());
        for bad in ["", "3", "3..1", "1..1", "a..b", "-1..2", "1...2"] {
            assert!(bad.parse::<TimeRange>().is_err(), "{bad}");
        }
    }
}
