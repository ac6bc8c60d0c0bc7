//! What `profile top` draws: the header lines over the sliding window's totals, the
//! table of the chosen view (functions, threads, processes) and the key help line,
//! every line escaped and fitted to the terminal.

use std::collections::HashMap;

use super::{FunctionStats, Sort, ThreadStats, Top, View, WindowStats, processes, truncate};
use crate::format::ThreadState;
use crate::output::top::human_time;

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
    let processes = cpu_by_process(&m);
    let mut lines = header_lines(top, &m, header, &processes);
    lines.push(String::new());
    let footer = usize::from(header.keys);
    let room = height.saturating_sub(lines.len() + 1 + footer);
    match view {
        View::Functions => function_lines(&m, header.off_cpu, sort, width, room, &mut lines),
        View::Processes => {
            let wall = m.duration_ns.max(1);
            lines.extend(processes::lines(
                &m,
                &top.lineage,
                wall,
                header.off_cpu,
                room + 1,
            ));
        }
        View::Threads => {
            let several = processes.len() > 1;
            thread_lines(&m, header.off_cpu, several, room, &mut lines);
        }
    }
    if header.keys {
        while lines.len() + 1 < height {
            lines.push(String::new());
        }
        lines.push(keys_line(header, view, sort));
    }
    lines.truncate(height);
    // Thread, process and function names are other users' text: every control
    // character escaped before the line is fitted to the terminal.
    lines
        .iter()
        .map(|l| truncate(&crate::text::terminal(l, usize::MAX), width))
        .collect()
}

/// Per process of the window: its CPU time and name.
fn cpu_by_process(m: &WindowStats) -> HashMap<u32, (u64, &str)> {
    let mut by_process: HashMap<u32, (u64, &str)> = HashMap::new();
    for t in m.threads.values() {
        let e = by_process.entry(t.pid).or_insert((0, &t.process));
        e.0 += t.states[ThreadState::Running as usize];
    }
    by_process
}

/// The lines above the table: the totals, the busiest of several processes, a note
/// on unwatched processes while the attached ones idle, the uncovered CPU and the
/// time by state.
fn header_lines(
    top: &Top,
    m: &WindowStats,
    header: &Header,
    by_process: &HashMap<u32, (u64, &str)>,
) -> Vec<String> {
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
    lines
}

/// The functions table: its heading (the sort column starred) and at most `room`
/// rows, in shares of CPU time, or of all time when off-CPU time is recorded.
fn function_lines(
    m: &WindowStats,
    off_cpu: bool,
    sort: Sort,
    width: usize,
    room: usize,
    lines: &mut Vec<String>,
) {
    let base = if off_cpu {
        m.states.iter().sum::<u64>()
    } else {
        m.states[ThreadState::Running as usize]
    }
    .max(1);
    let pct = |ns: u64| ns as f64 * 100.0 / base as f64;
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

/// The threads table: its heading and at most `room` threads by CPU time, each with
/// its hottest function (and its process's name when `several` processes show).
fn thread_lines(
    m: &WindowStats,
    off_cpu: bool,
    several: bool,
    room: usize,
    lines: &mut Vec<String>,
) {
    let wall = m.duration_ns.max(1);
    lines.push(format!(
        "{:>8} {:<16} {:>6} {:>9}  HOTTEST FUNCTION",
        "TID", "NAME", "CPU%", "CPU"
    ));
    let mut ts: Vec<(&u32, &ThreadStats)> = m.threads.iter().collect();
    let running = |t: &ThreadStats| t.states[ThreadState::Running as usize];
    ts.sort_by(|a, b| running(b.1).cmp(&running(a.1)).then(a.0.cmp(b.0)));
    for (tid, t) in ts.into_iter().take(room) {
        let hottest = t
            .leaves
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
            .map(|(name, _)| name.as_str())
            .unwrap_or(if off_cpu { "(off the CPU)" } else { "" });
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

/// The key help line at the bottom of a terminal.
fn keys_line(header: &Header, view: View, sort: Sort) -> String {
    format!(
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
    )
}
